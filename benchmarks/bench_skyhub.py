"""skyhub's side of the benchmarks: commit-to-handler latency, end-to-end jobs/s through
the change feed, and the sweep's recovery delay after a lease expires.

Everything here goes through the engine's public API (``open_store``, ``Feed``, ``Handler``,
``jobs_handler``, ``Sweeper``, ``lease.claim``). Two read-only observers use SQL directly:
counting done jobs while a run is in progress (so the parent can tell when to stop) and
nothing else; the figures come from the engine's own history.
"""

from __future__ import annotations

import collections
import os
import queue
import random
import sqlite3
import threading
import time
from typing import Any

from bench_common import SPAWN, check_alive, start_child, stop_children, summary_ms, wait_for_count, wait_ready

from ledger import SYSTEM, Feed, Handler, Ledger, Rules, deadletter_machine, open_store
from ledger.jobs import JOBS, jobs_handler
from ledger.lease import SWEEP_ACTOR, Sweeper
from ledger.lease import claim as lease_claim

LAT_DB = "lat"
JOBS_DB = "jobs"
BENCH_ACTOR = "user:bench"
WORKER_ACTOR = "handler:on_change"  # what the reference jobs handler writes as
SETTLE = 0.5  # seconds after children report ready (LISTEN / poller threads connect)


def default_rules() -> Rules:
    return Rules([JOBS, deadletter_machine()])


def new_job(i: int) -> dict[str, Any]:
    return {"type": "job", "status": "pending", "input": {"n": i}}


# ---- 1. commit-to-handler latency -------------------------------------------------
def latency_in_process(url: str, samples: int, warmup: int, gap_ms: float = 0.0) -> dict[str, Any]:
    """One Feed with one Handler in this process; one write at a time, the next write as
    soon as the handler has been called (``gap_ms`` = 0) or ``gap_ms`` later.

    The commit timestamp is taken by a commit listener subscribed before the feed: the store
    calls it in the writing thread right after COMMIT, before ``put`` returns. (Timing from
    ``put``'s return instead gave a few negative samples: the feed thread can win the GIL
    between the commit and the return.) Both are reported.
    """
    store = open_store(url, default_rules(), SYSTEM)
    committed: dict[str, int] = {}
    handled: dict[str, int] = {}
    arrived = threading.Event()

    def on_commit(change: Any) -> None:
        if change is not None and change.db == LAT_DB:
            committed[change.id] = time.perf_counter_ns()

    def on_change(change: Any, ctx: Any) -> None:
        handled.setdefault(change.id, time.perf_counter_ns())
        arrived.set()

    unsubscribe = store.subscribe(on_commit)
    feed = Feed(store, [Handler("bench_latency", [LAT_DB], on_change)], clock=SYSTEM)
    feed.start()
    from_commit: list[int] = []
    from_return: list[int] = []
    try:
        for i in range(warmup + samples):
            doc_id = f"s{i}"
            arrived.clear()
            store.put(LAT_DB, {"i": i}, doc_id, actor=BENCH_ACTOR)
            returned = time.perf_counter_ns()
            deadline = time.monotonic() + 10
            while doc_id not in handled:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no delivery of {doc_id} within 10 s")
                arrived.wait(0.5)
                arrived.clear()
            if i >= warmup:
                from_commit.append(handled[doc_id] - committed[doc_id])
                from_return.append(handled[doc_id] - returned)
            if gap_ms:
                time.sleep(gap_ms / 1000)
    finally:
        feed.stop()
        unsubscribe()
        store.close()
    return {
        "from_commit": summary_ms(from_commit),
        "from_return": summary_ms(from_return),
        "negative_from_return": sum(1 for v in from_return if v < 0),
    }


def _latency_child(url: str, ready: Any, out: Any, stop: Any) -> None:
    try:
        store = open_store(url, default_rules(), SYSTEM)

        def on_change(change: Any, ctx: Any) -> None:
            out.put((change.id, time.perf_counter_ns()))

        feed = Feed(store, [Handler("bench_latency", [LAT_DB], on_change)], clock=SYSTEM)
        feed.start()
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        ready.put(("error", repr(exc)))
        return
    ready.put(("ready", os.getpid()))
    stop.wait()
    feed.stop()
    store.close()


def latency_cross_process(url: str, samples: int, warmup: int, budget_s: float = 60.0) -> dict[str, Any]:
    """The Feed runs in a child process; this process writes. Woken by NOTIFY (PostgreSQL)
    or by a datagram on its socket in ``<db>.wake/`` (SQLite). time.perf_counter_ns is CLOCK_MONOTONIC,
    the same clock in both processes. Timed from ``put``'s return, as for Procrastinate's
    ``defer``. Stops early after ``budget_s`` of measuring (slow wake-ups)."""
    ready, out, stop = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Event()
    store = open_store(url, default_rules(), SYSTEM)
    procs = [start_child(_latency_child, url, ready, out, stop, name="skyhub-latency-feed")]
    lat: list[int] = []
    try:
        wait_ready(ready, 1, procs)
        time.sleep(SETTLE)
        # warm-up: ``warmup`` samples, or a quarter of the budget, whichever ends first
        began, budget_end, i = time.monotonic(), None, -1
        while len(lat) < samples:
            i += 1
            if budget_end is None and (i >= warmup or time.monotonic() - began > budget_s / 4):
                budget_end = time.monotonic() + budget_s
            if budget_end is not None and time.monotonic() > budget_end:
                break
            doc_id = f"x{i}"
            store.put(LAT_DB, {"i": i}, doc_id, actor=BENCH_ACTOR)
            returned = time.perf_counter_ns()
            deadline = time.monotonic() + 10
            while True:
                try:
                    got_id, t = out.get(timeout=0.5)
                except queue.Empty:
                    check_alive(procs)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no delivery of {doc_id} within 10 s") from None
                    continue
                if got_id == doc_id:
                    break
            if budget_end is not None:
                lat.append(t - returned)
    finally:
        stop_children(procs, stop)
        store.close()
    return {"from_return": summary_ms(lat), "budget_s": budget_s, "cut_short": len(lat) < samples}


# ---- 2. end-to-end jobs/s -----------------------------------------------------------
def _jobs_child(url: str, index: int, ready: Any, stop: Any, results: Any) -> None:
    try:
        store = open_store(url, default_rules(), SYSTEM)
        feed = Feed(store, [jobs_handler()], owner=f"bench-worker-{index}:{os.getpid()}", clock=SYSTEM)
        feed.start()
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        ready.put(("error", repr(exc)))
        return
    ready.put(("ready", os.getpid()))
    stop.wait()
    feed.stop()
    results.put((index, feed.delivered))
    store.close()


class DoneCounter:
    """Counts done jobs with one indexed SQL query (a read-only observer)."""

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("sqlite:///"):
            self.conn: Any = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None, timeout=30)
            self.sql = (
                "SELECT count(*) FROM docs WHERE db = 'jobs' AND json_extract(body, '$.status') = 'done' AND deleted = 0"
            )
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True)
            self.sql = "SELECT count(*) FROM docs WHERE db = 'jobs' AND (body -> 'status') = '\"done\"'::jsonb AND deleted = 0"

    def count(self) -> int:
        return int(self.conn.execute(self.sql).fetchone()[0])

    def statuses(self) -> dict[str, int]:
        expr = "json_extract(body, '$.status')" if self.url.startswith("sqlite:///") else "body ->> 'status'"
        rows = self.conn.execute(f"SELECT {expr}, count(*) FROM docs WHERE db = 'jobs' GROUP BY 1").fetchall()
        return {str(k): int(v) for k, v in rows}

    def close(self) -> None:
        self.conn.close()


def _wait_done(counter: DoneCounter, target: int, procs: list[Any], timeout: float) -> float:
    """Until ``target`` jobs are done; fails after ``timeout`` or a minute without progress."""
    return wait_for_count(counter.count, target, procs, timeout, what="jobs done",
                          explain=lambda: f"jobs by status: {counter.statuses()}")


def _create(store: Any, n: int, start: int) -> list[str]:
    return [store.put(JOBS_DB, new_job(start + i), actor=BENCH_ACTOR)["_id"] for i in range(n)]


def verify_jobs(store: Any, ids: list[str]) -> dict[str, Any]:
    """Every job's history: exactly one transition to done, done at the head; returns the
    commit times (``at``) of the done transitions and any anomalies."""
    problems: collections.Counter[str] = collections.Counter()
    done_at: list[int] = []
    reclaimed = 0
    done_once = 0
    for job_id in ids:
        history = store.history(JOBS_DB, job_id)
        statuses = [c.doc.get("status") for c in history]
        dones = [c for c in history if c.doc.get("status") == "done"]
        if len(dones) != 1:
            problems[f"{len(dones)} transitions to done"] += 1
        else:
            done_once += 1
        if not statuses or statuses[-1] != "done":
            problems[f"ends {statuses[-1] if statuses else 'missing'}"] += 1
        if statuses.count("running") > 1:
            reclaimed += 1
        done_at.extend(c.at for c in dones)
    dead = store.changes(0, 10, ["deadletters"])
    if dead:
        problems["dead letters"] += len(dead)
    return {
        "ok": not problems,
        "problems": dict(problems),
        "claimed_twice": reclaimed,
        "last_done_at": max(done_at) if done_at else None,
        "done_once": done_once,
        "jobs": len(ids),
    }


def jobs_end_to_end(url: str, n: int, workers: int, warmup: int = 50) -> dict[str, Any]:
    """N jobs created one at a time by this (parent) process while ``workers`` worker
    processes, each running a Feed with the reference jobs handler (one shared handler
    group), claim and finish them. Timed from just before the first create to the commit
    of the last transition to done (its ``at``)."""
    ready, stop, results = SPAWN.Queue(), SPAWN.Event(), SPAWN.Queue()
    store = open_store(url, default_rules(), SYSTEM)
    counter = DoneCounter(url)
    procs = [
        start_child(_jobs_child, url, i, ready, stop, results, name=f"skyhub-worker-{i}")
        for i in range(workers)
    ]
    try:
        wait_ready(ready, workers, procs)
        time.sleep(SETTLE)
        _create(store, warmup, 1_000_000)  # warms connections, prepared statements, imports
        _wait_done(counter, warmup, procs, 60)
        t0 = time.time()
        ids = _create(store, n, 0)
        t_created = time.time()
        t_seen = _wait_done(counter, warmup + n, procs, max(120.0, n / 20))
    finally:
        codes = stop_children(procs, stop)
        counter.close()
    delivered = {}
    while True:
        try:
            index, count = results.get(timeout=0.2)
        except queue.Empty:
            break
        delivered[index] = count
    check = verify_jobs(store, ids)
    store.close()
    end = check["last_done_at"] / 1000 if check["last_done_at"] else t_seen
    elapsed = end - t0
    return {
        "n": n,
        "workers": workers,
        "create_s": t_created - t0,
        "elapsed_s": elapsed,
        "jobs_per_s": n / elapsed,
        "create_per_s": n / (t_created - t0),
        "verified": check,
        "delivered": [delivered.get(i) for i in range(workers)],
        "exit_codes": codes,
    }


# ---- 3. recovery after a lease expires ----------------------------------------------
def _claim_one(store: Any, i: int, lease_ms: int) -> dict[str, Any]:
    doc = store.put(JOBS_DB, new_job(i), actor=BENCH_ACTOR)
    held = lease_claim(Ledger(store, WORKER_ACTOR, SYSTEM), JOBS_DB, doc, "running", lease_ms, SYSTEM.now_ms())
    return held


def recovery_in_process(url: str, reps: int, lease_ms: int) -> dict[str, Any]:
    """A job is claimed with a short lease and never finished; a Sweeper (``.start()``,
    deadline-driven) in the same process takes it back. Delay = sweep commit (commit listener,
    wall clock) - leaseUntil; also ``at`` (the sweep's clock reading) - leaseUntil."""
    rules = default_rules()
    store = open_store(url, rules, SYSTEM)
    swept: dict[str, tuple[int, int, str]] = {}
    arrived = threading.Event()

    def on_commit(change: Any) -> None:
        if change is not None and change.actor == SWEEP_ACTOR:
            swept[change.id] = (time.time_ns(), change.at, str(change.doc.get("status")))
            arrived.set()

    unsubscribe = store.subscribe(on_commit)
    sweeper = Sweeper(store, rules, clock=SYSTEM)
    sweeper.start()
    commit_delay: list[int] = []
    at_delay: list[int] = []
    states: collections.Counter[str] = collections.Counter()
    try:
        time.sleep(0.2)
        for i in range(reps):
            held = _claim_one(store, i, lease_ms)
            lease_until = held["leaseUntil"]
            deadline = time.monotonic() + lease_ms / 1000 + 10
            while held["_id"] not in swept:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the sweep did not take back {held['_id']} within 10 s of its lease")
                arrived.wait(0.5)
                arrived.clear()
            wall_ns, at, status = swept[held["_id"]]
            commit_delay.append(wall_ns - lease_until * 1_000_000)
            at_delay.append((at - lease_until) * 1_000_000)
            states[status] += 1
            time.sleep(random.uniform(0.01, 0.05))  # leases expire at unrelated moments
    finally:
        sweeper.stop()
        unsubscribe()
        store.close()
    return {"commit": summary_ms(commit_delay), "at": summary_ms(at_delay), "states": dict(states)}


def _sweeper_child(url: str, ready: Any, out: Any, stop: Any) -> None:
    try:
        rules = default_rules()
        store = open_store(url, rules, SYSTEM)

        def on_commit(change: Any) -> None:
            if change is not None and change.actor == SWEEP_ACTOR:
                out.put((change.id, time.time_ns(), change.at, str(change.doc.get("status"))))

        store.subscribe(on_commit)
        sweeper = Sweeper(store, rules, clock=SYSTEM)
        sweeper.start()
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        ready.put(("error", repr(exc)))
        return
    ready.put(("ready", os.getpid()))
    stop.wait()
    sweeper.stop()
    store.close()


def recovery_cross_process(url: str, reps: int, lease_ms: int) -> dict[str, Any]:
    """As ``recovery_in_process``, but the Sweeper runs in another process (like a hub
    whose worker died holding a job): it learns of the claim through NOTIFY / data_version."""
    ready, out, stop = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Event()
    store = open_store(url, default_rules(), SYSTEM)
    procs = [start_child(_sweeper_child, url, ready, out, stop, name="skyhub-sweeper")]
    commit_delay: list[int] = []
    at_delay: list[int] = []
    states: collections.Counter[str] = collections.Counter()
    try:
        wait_ready(ready, 1, procs)
        time.sleep(SETTLE)
        for i in range(reps):
            held = _claim_one(store, i, lease_ms)
            lease_until = held["leaseUntil"]
            deadline = time.monotonic() + lease_ms / 1000 + 10
            while True:
                try:
                    got_id, wall_ns, at, status = out.get(timeout=0.5)
                except queue.Empty:
                    check_alive(procs)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the sweep did not take back {held['_id']} within 10 s of its lease") from None
                    continue
                if got_id == held["_id"]:
                    break
            commit_delay.append(wall_ns - lease_until * 1_000_000)
            at_delay.append((at - lease_until) * 1_000_000)
            states[status] += 1
            time.sleep(random.uniform(0.01, 0.05))
    finally:
        stop_children(procs, stop)
        store.close()
    return {"commit": summary_ms(commit_delay), "at": summary_ms(at_delay), "states": dict(states)}
