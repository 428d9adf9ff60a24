"""Procrastinate (3.x, PsycopgConnector) driving the equivalent no-op workload on the same
PostgreSQL server, in a database of its own that this run creates and drops.

- Tasks are ``async def`` no-ops (Procrastinate's cheapest path: no thread hop), so the
  comparison is against Procrastinate at its best.
- Workers are separate processes, ``concurrency=1`` each (one job at a time, like one
  skyhub feed thread), ``listen_notify=True`` (woken by NOTIFY on defer), default polling.
- The parent defers with the synchronous API (one ``defer`` = one autocommit statement).
"""

from __future__ import annotations

import logging
import os
import queue
import time
from typing import Any

from bench_common import SPAWN, check_alive, scalar, start_child, stop_children, summary_ms, wait_for_count, wait_ready

SETTLE = 0.5
_OUT: Any = None  # in a worker process: where the ping task reports its start time


def make_app(url: str) -> Any:
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    @app.task(name="noop")
    async def noop(i: int) -> None:
        return None

    @app.task(name="ping")
    async def ping(i: int) -> None:
        started = time.perf_counter_ns()
        if _OUT is not None:
            _OUT.put((i, started))

    return app


def apply_schema(url: str) -> None:
    app = make_app(url)
    app.open()
    try:
        app.schema_manager.apply_schema()
    finally:
        app.close()


def _worker_child(url: str, index: int, ready: Any, out: Any) -> None:
    global _OUT
    _OUT = out
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    try:
        app = make_app(url)
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        ready.put(("error", repr(exc)))
        return
    ready.put(("ready", os.getpid()))
    # SIGTERM from the parent stops the worker gracefully (procrastinate's signal handlers).
    app.run_worker(concurrency=1, wait=True, name=f"bench-{index}", listen_notify=True)


def _start_workers(url: str, workers: int, out: Any) -> list[Any]:
    import psycopg

    ready = SPAWN.Queue()
    procs = [start_child(_worker_child, url, i, ready, out, name=f"procrastinate-worker-{i}") for i in range(workers)]
    try:
        wait_ready(ready, workers, procs)
        deadline = time.monotonic() + 60
        with psycopg.connect(url, autocommit=True) as conn:
            while scalar(conn.execute("SELECT count(*) FROM procrastinate_workers")) < workers:
                check_alive(procs)
                if time.monotonic() > deadline:
                    raise TimeoutError("Procrastinate workers did not register within 60 s")
                time.sleep(0.05)
        time.sleep(SETTLE)  # their LISTEN connections
    except BaseException:
        _stop_workers(procs)
        raise
    return procs


def _stop_workers(procs: list[Any]) -> list[int | None]:
    for p in procs:
        if p.is_alive():
            p.terminate()  # SIGTERM: graceful stop
    return stop_children(procs, None, timeout=20)


def latency(url: str, samples: int, warmup: int, budget_s: float = 60.0) -> dict[str, Any]:
    """Defer one task at a time from this process; the worker process reports when the task
    starts. Timed from ``defer``'s return. Stops early after ``budget_s`` of measuring."""
    out = SPAWN.Queue()
    procs = _start_workers(url, 1, out)
    app = make_app(url)
    app.open()
    ping = app.tasks["ping"]
    lat: list[int] = []
    try:
        # warm-up: ``warmup`` samples, or a quarter of the budget, whichever ends first
        began, budget_end, i = time.monotonic(), None, -1
        while len(lat) < samples:
            i += 1
            if budget_end is None and (i >= warmup or time.monotonic() - began > budget_s / 4):
                budget_end = time.monotonic() + budget_s
            if budget_end is not None and time.monotonic() > budget_end:
                break
            ping.defer(i=i)
            returned = time.perf_counter_ns()
            deadline = time.monotonic() + 10
            while True:
                try:
                    got, t = out.get(timeout=0.5)
                except queue.Empty:
                    check_alive(procs)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"task {i} did not start within 10 s") from None
                    continue
                if got == i:
                    break
            if budget_end is not None:
                lat.append(t - returned)
    finally:
        app.close()
        _stop_workers(procs)
    return {"from_return": summary_ms(lat), "budget_s": budget_s, "cut_short": len(lat) < samples}


def _count_succeeded(conn: Any, after_id: int) -> int:
    return int(scalar(conn.execute(
        "SELECT count(*) FROM procrastinate_jobs WHERE id > %s AND status = 'succeeded'", (after_id,)
    )))


def _wait_succeeded(conn: Any, after_id: int, target: int, procs: list[Any], timeout: float) -> float:
    def statuses() -> str:
        rows = conn.execute(
            "SELECT status::text, count(*) FROM procrastinate_jobs WHERE id > %s GROUP BY 1", (after_id,)
        ).fetchall()
        return f"jobs by status: {dict(rows)}"

    return wait_for_count(lambda: _count_succeeded(conn, after_id), target, procs, timeout,
                          what="tasks succeeded", explain=statuses)


def jobs_end_to_end(url: str, n: int, workers: int, warmup: int = 50) -> dict[str, Any]:
    """N no-op tasks deferred one at a time by this process while ``workers`` worker
    processes run them. Timed from just before the first defer to the last 'succeeded'
    event (procrastinate_events.at)."""
    import psycopg

    procs = _start_workers(url, workers, None)
    try:
        app = make_app(url)
        app.open()
        conn = psycopg.connect(url, autocommit=True)
    except BaseException:
        _stop_workers(procs)
        raise
    noop = app.tasks["noop"]
    try:
        for i in range(warmup):
            noop.defer(i=-1 - i)
        _wait_succeeded(conn, 0, warmup, procs, 60)
        last_warm = int(scalar(conn.execute("SELECT max(id) FROM procrastinate_jobs")))
        t0 = time.time()
        for i in range(n):
            noop.defer(i=i)
        t_created = time.time()
        t_seen = _wait_succeeded(conn, last_warm, n, procs, max(120.0, n / 20))
        # before the workers stop: unregistering a worker clears worker_id on its jobs
        per_worker = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE id > %s GROUP BY worker_id ORDER BY worker_id",
            (last_warm,),
        ).fetchall()
    except BaseException:
        conn.close()
        raise
    finally:
        app.close()
        codes = _stop_workers(procs)
    try:
        end = scalar(conn.execute(
            "SELECT extract(epoch FROM max(at)) FROM procrastinate_events WHERE type = 'succeeded' AND job_id > %s",
            (last_warm,),
        ))
        bad = scalar(conn.execute(
            """SELECT count(*) FROM (
                   SELECT j.id,
                          count(e.id) FILTER (WHERE e.type = 'started') AS started,
                          count(e.id) FILTER (WHERE e.type = 'succeeded') AS succeeded
                   FROM procrastinate_jobs j LEFT JOIN procrastinate_events e ON e.job_id = j.id
                   WHERE j.id > %s GROUP BY j.id) per_job
               WHERE started <> 1 OR succeeded <> 1""",
            (last_warm,),
        ))
        total = scalar(conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE id > %s", (last_warm,)))
    finally:
        conn.close()
    end_s = float(end) if end is not None else t_seen
    elapsed = end_s - t0
    return {
        "n": n,
        "workers": workers,
        "create_s": t_created - t0,
        "elapsed_s": elapsed,
        "jobs_per_s": n / elapsed,
        "create_per_s": n / (t_created - t0),
        "verified": {"ok": bad == 0 and total == n, "jobs": int(total), "not_exactly_once": int(bad)},
        "per_worker": [int(r[0]) for r in per_worker],
        "exit_codes": codes,
    }
