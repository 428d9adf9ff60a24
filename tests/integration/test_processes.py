"""Several OS processes on one store: races for claims, and a worker killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ledger import SYSTEM, open_store
from ledger.store import Write
from tests.conftest import default_rules

WORKER = Path(__file__).with_name("worker.py")
pytestmark = pytest.mark.slow


def start_workers(url, tmp_path, n, first=0, **options):
    procs = []
    for i in range(first, first + n):
        log = tmp_path / f"worker{i}.log"
        argv = [sys.executable, str(WORKER), url, str(log)]
        for key, value in options.items():
            argv += [f"--{key.replace('_', '-')}", str(value(i) if callable(value) else value)]
        procs.append((subprocess.Popen(argv), log))
    deadline = time.monotonic() + 60
    for proc, log in procs:
        while not (log.exists() and "ready" in log.read_text()):
            assert proc.poll() is None, f"worker exited with {proc.returncode}"
            assert time.monotonic() < deadline, "worker did not start"
            time.sleep(0.05)
    return procs


def stop_workers(procs):
    for proc, _ in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc, _ in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_all_done(store, n, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = sum(1 for _ in _all(store, "done"))
        if done == n:
            return
        time.sleep(0.2)
    counts = {s: sum(1 for _ in _all(store, s)) for s in ("pending", "running", "done", "failed")}
    raise AssertionError(f"not all {n} jobs done in time: {counts}")


def _all(store, status):
    after = None
    while True:
        page = store.query("jobs", "status", status, limit=1000, after=after)
        yield from page.docs
        if page.next is None:
            return
        after = page.next


@pytest.fixture
def stores():
    """Open stores that are closed after the test, whether it passed or not."""
    opened = []

    def make(url):
        store = open_store(url, default_rules(), SYSTEM)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def check_done_exactly_once(store, ids):
    """Every job: exactly one done revision, written with the claim that held it then."""
    for job_id in ids:
        history = store.history("jobs", job_id)
        done = [i for i, c in enumerate(history) if c.doc["status"] == "done"]
        assert len(done) == 1, f"{job_id} done {len(done)} times"
        finisher = history[done[0]]
        claims = [c for c in history[: done[0]] if c.doc["status"] == "running"]
        assert finisher.doc["claimId"] == claims[-1].doc["claimId"], f"{job_id} finished with a stale claim"
        assert finisher.doc["result"]["key"] == f"{job_id}:{finisher.doc['attempts']}"


@pytest.mark.parametrize("jobs,workers", [(500, 4)])
def test_four_processes_race_for_500_jobs(backend_url, tmp_path, jobs, workers, stores):
    store = stores(backend_url)
    # separate cursor groups: every process sees every job and races for every claim. Each job's work
    # takes 10 ms, so one process does at most 100 a second while the jobs come faster: the others
    # always have claims to race for (with no-op work a process that ran hot, beside three that a
    # loaded machine kept waiting, once took all 500 before they looked)
    procs = start_workers(backend_url, tmp_path, workers, group=lambda i: f"racer{i}", work_ms=10)
    try:
        ids = [f"job{i:04d}" for i in range(jobs)]
        for job_id in ids:
            store.put("jobs", {"type": "job", "status": "pending", "input": {"id": job_id}}, job_id, actor="user:ana")
        wait_all_done(store, jobs)
    finally:
        stop_workers(procs)
    check_done_exactly_once(store, ids)
    started = Counter()
    for _, log in procs:
        for line in log.read_text().splitlines():
            if line.startswith("start "):
                started[line.split()[1]] += 1
    assert sorted(started) == sorted(f"{i}:1" for i in ids), "work ran twice or for a lost claim"
    assert set(started.values()) == {1}
    assert sum(1 for _, log in procs if "start " in log.read_text()) >= 2, "no real race: one process did everything"


def test_a_worker_killed_holding_claims_is_recovered_by_the_others(backend_url, tmp_path, stores):
    jobs = 120
    store = stores(backend_url)
    procs = start_workers(
        backend_url, tmp_path, 3, group="shared", lease_ms=1_500, feed_lease_ms=1_000, work_ms=40,
    )
    victim, victim_log = procs[0]
    try:
        ids = [f"job{i:04d}" for i in range(jobs)]
        for job_id in ids:
            store.put("jobs", {"type": "job", "status": "pending", "input": {"id": job_id}}, job_id, actor="user:ana")
        deadline = time.monotonic() + 60
        while True:  # kill it in the middle of a piece of work
            text = victim_log.read_text()
            if text.count("start ") >= 3 and text.count("start ") > text.count("end "):
                break
            assert time.monotonic() < deadline, "the victim never held a claim"
            time.sleep(0.005)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        wait_all_done(store, jobs)
    finally:
        stop_workers(procs)
    check_done_exactly_once(store, ids)
    lines = victim_log.read_text().splitlines()
    unfinished = {l.split()[1] for l in lines if l.startswith("start ")} - {l.split()[1] for l in lines if l.startswith("end ")}
    assert unfinished, "the victim held no claim when killed"
    for key in unfinished:
        job_id, attempt = key.split(":")
        job = store.get("jobs", job_id)
        assert job["status"] == "done" and job["attempts"] > int(attempt)
        assert job["result"]["pid"] != victim.pid
        assert any(c.actor == "tick:sweep" for c in store.history("jobs", job_id)), "recovered without the sweep"
    assert store.query("jobs", "status", "failed").docs == []


def test_a_worker_killed_with_quick_jobs_claimed_and_finished_a_batch_at_a_time_loses_none(backend_url, tmp_path, stores):
    """Quick work: a worker claims a feed batch's jobs in one write and finishes them in one more. Killed in
    the middle of a batch (its work hangs), it holds claims of jobs it never started and finishes it has
    not written: every job is still done exactly once, by the others, after the sweep takes them back."""
    jobs = 150
    store = stores(backend_url)
    options = dict(group="shared", lease_ms=1_500, feed_lease_ms=1_000)
    # the victim alone first: with its group's others beside it, the one that leads (ledger.wake.Lead) could
    # do every job before the victim reached its thirteenth
    procs = start_workers(backend_url, tmp_path, 1, hang_after=13, **options)
    victim, victim_log = procs[0]
    try:
        ids = [f"job{i:04d}" for i in range(jobs)]
        # all at once: every feed batch is full (10 jobs), and after its first the victim claims them together
        store.put_many("jobs", [Write({"type": "job", "status": "pending", "input": {"id": j}}, j) for j in ids],
                       actor="user:ana")
        deadline = time.monotonic() + 120
        while "hang " not in victim_log.read_text():
            assert time.monotonic() < deadline, "the victim never reached its hanging job"
            time.sleep(0.01)
        procs += start_workers(backend_url, tmp_path, 2, first=1, **options)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        wait_all_done(store, jobs)
    finally:
        stop_workers(procs)
    check_done_exactly_once(store, ids)
    assert store.query("jobs", "status", "failed").docs == []
    lines = victim_log.read_text().splitlines()
    hung = next(l.split()[1] for l in lines if l.startswith("hang "))
    job = store.get("jobs", hung.split(":")[0])
    assert job["result"]["pid"] != victim.pid and job["attempts"] >= 2
    by_victim = {j for j in ids if store.get("jobs", j)["result"]["pid"] == victim.pid}
    assert by_victim, "the victim finished nothing before it hung"
    for job_id in ids:  # a job the victim held but never finished went home by the sweep, then to another worker
        history = store.history("jobs", job_id)
        if job_id not in by_victim and sum(1 for c in history if c.doc["status"] == "running") > 1:
            assert any(c.actor == "tick:sweep" for c in history), f"{job_id} recovered without the sweep"


def test_processes_share_the_feed_and_a_killed_ones_batch_is_redelivered(pg_url, tmp_path, stores):
    """PostgreSQL, three processes, one handler: each change handled by one live process."""
    store = stores(pg_url)
    procs = start_workers(pg_url, tmp_path, 3, mode="notes", group="notes", feed_lease_ms=1_000, work_ms=5)
    victim, victim_log = procs[0]
    n = 0
    try:
        deadline = time.monotonic() + 120
        while True:  # keep the work coming until the victim is caught in the middle of a change
            for _ in range(5):
                store.put("notes", {"i": n}, f"n{n}", actor="user:ana")
                n += 1
            text = victim_log.read_text()
            if text.count("start ") >= 5 and text.count("start ") > text.count("end "):
                break
            assert time.monotonic() < deadline and n < 5000, "the victim never took a batch"
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        seqs = _all_seqs(store, "notes")
        deadline = time.monotonic() + 60
        while True:
            handled = Counter()
            for _, log in procs[1:]:
                handled.update(int(l.split()[1]) for l in log.read_text().splitlines() if l.startswith("end "))
            victim_done = {int(l.split()[1]) for l in victim_log.read_text().splitlines() if l.startswith("end ")}
            if seqs <= set(handled) | victim_done:
                break
            assert time.monotonic() < deadline, f"{len(seqs - set(handled) - victim_done)} changes never handled"
            time.sleep(0.1)
    finally:
        stop_workers(procs)
    assert max(handled.values()) == 1, "a live process handled a change twice"
    victim_started = {int(l.split()[1]) for l in victim_log.read_text().splitlines() if l.startswith("start ")}
    in_flight = victim_started - victim_done
    assert in_flight and in_flight <= set(handled), "the killed process's in-flight change was not redelivered"
    assert all(count >= 1 for count in handled.values()) and len(victim_done) < n
    assert sum(1 for _, log in procs[1:] if "end " in log.read_text()) == 2, "the work was not shared"


def _all_seqs(store, db):
    seqs, since = set(), 0
    while True:
        batch = store.changes(since, 1000, dbs=[db])
        if not batch:
            return seqs
        seqs |= {c.seq for c in batch}
        since = batch[-1].seq
