"""huey's ``SqliteHuey`` (huey 2.x/3.x), the embedded peer of skyhub on SQLite, driving the
same workload as skyhub's end-to-end run: a parent process enqueues N no-op tasks one at a
time into a fresh SQLite file while a consumer in another process runs them.

- The storage is at huey's defaults: WAL, ``synchronous`` left at SQLite's default (FULL;
  read back and reported), an 8 MB cache, a 5 s busy timeout. What it does per task (its
  source): the enqueue is one ``BEGIN EXCLUSIVE`` commit (an insert), the dequeue another
  (select the oldest, delete it); no history, no lease, no status, nothing kept once a task
  ran (a task returning ``None`` stores no result).
- The consumer is ``huey.create_consumer`` in a child process, ``periodic=False``, with
  ``workers`` workers of ``worker_type`` (``process``: forked by the consumer; ``thread``),
  and one of two polls: huey's defaults (``initial_delay`` 0.1 s, ``backoff`` 1.15,
  ``max_delay`` 10 s) or its best for latency (``huey_consumer -d 0.001 -b 1 -m 0.001``).
- Exactly once: each task appends ``"<i> <epoch s>"`` to a file of its own process and
  thread (one line-buffered ``write``, no fsync); afterwards every i must appear exactly
  once and the queue must be empty. The run ends at the last task's timestamp, as
  skyhub's ends at its last ``done`` commit and Procrastinate's at its last 'succeeded' event.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from typing import Any

from bench_common import SPAWN, start_child, stop_children, wait_for_count, wait_ready

SETTLE = 0.5
POLLS: dict[str, tuple[float, float, float]] = {  # name: (initial_delay, backoff, max_delay), huey_consumer's -d -b -m
    "defaults": (0.1, 1.15, 10.0),
    "best poll": (0.001, 1.0, 0.001),
}
_local = threading.local()


def make_huey(path: str, out_dir: str | None) -> tuple[Any, Any]:
    from huey import SqliteHuey

    huey = SqliteHuey(name="bench", filename=path)

    @huey.task(name="noop")
    def noop(i: int) -> None:
        f = getattr(_local, "file", None)
        if f is None:
            f = _local.file = open(os.path.join(str(out_dir), f"{os.getpid()}-{threading.get_ident()}.log"), "a",
                                   buffering=1)
        f.write(f"{i} {time.time():.6f}\n")

    return huey, noop


def settings(huey: Any) -> str:
    """What the storage runs with, read back from one of its connections."""
    journal = huey.storage.sql("pragma journal_mode", results=True)[0][0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(huey.storage.sql("pragma synchronous", results=True)[0][0])
    return f"journal_mode {journal}, synchronous {sync}"


def _consumer_child(path: str, out_dir: str, workers: int, worker_type: str, poll: str, ready: Any) -> None:
    import logging

    logging.getLogger("huey").setLevel(logging.WARNING)
    try:
        huey, _ = make_huey(path, out_dir)
        delay, backoff, max_delay = POLLS[poll]
        consumer = huey.create_consumer(workers=workers, worker_type=worker_type, periodic=False,
                                        initial_delay=delay, backoff=backoff, max_delay=max_delay)
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        ready.put(("error", repr(exc)))
        return
    ready.put(("ready", os.getpid()))
    consumer.run()  # SIGINT from the parent: huey's graceful stop


def _read(out_dir: str) -> list[tuple[int, float]]:
    got = []
    for name in os.listdir(out_dir):
        with open(os.path.join(out_dir, name)) as f:
            for line in f:
                if line.endswith("\n"):
                    i, at = line.split()
                    got.append((int(i), float(at)))
    return got


def _lines(path: str) -> int:
    with open(path) as f:
        return sum(1 for _ in f)


def _wait(out_dir: str, target: int, procs: list[Any], timeout: float) -> None:
    wait_for_count(lambda: len(_read(out_dir)), target, procs, timeout, what="huey tasks ran")


def jobs_end_to_end(n: int, workers: int, worker_type: str = "process", poll: str = "defaults",
                    warmup: int = 50) -> dict[str, Any]:
    """N no-op tasks enqueued one at a time by this process while a huey consumer in another
    process runs them. Timed from just before the first enqueue to the last task's run."""
    folder = tempfile.mkdtemp(prefix="skyhub-bench-huey-")
    path, out_dir = os.path.join(folder, "huey.db"), os.path.join(folder, "out")
    os.mkdir(out_dir)
    try:
        huey, noop = make_huey(path, None)  # creates the tables (in WAL) before the consumer opens the file
        ready = SPAWN.Queue()
        procs = [start_child(_consumer_child, path, out_dir, workers, worker_type, poll, ready,
                             name=f"huey-consumer-{worker_type}-{workers}", daemon=False)]  # it forks its workers
        try:
            wait_ready(ready, 1, procs)
            for i in range(warmup):
                noop(-1 - i)
            _wait(out_dir, warmup, procs, 60)
            time.sleep(SETTLE)
            t0 = time.time()
            for i in range(n):
                noop(i)
            t_created = time.time()
            _wait(out_dir, warmup + n, procs, max(120.0, n / 20))
        finally:
            for p in procs:
                if p.is_alive():
                    os.kill(p.pid, signal.SIGINT)
            codes = stop_children(procs, None, timeout=20)
        ran = _read(out_dir)
        counts = Counter(i for i, _ in ran if i >= 0)
        left = huey.storage.queue_size()
        not_once = sum(1 for i in range(n) if counts.get(i) != 1) + sum(1 for i in counts if i >= n)
        end = max(at for i, at in ran if i >= 0)
        used = settings(huey)
        per_worker = sorted((_lines(os.path.join(out_dir, name)) for name in os.listdir(out_dir)), reverse=True)
        huey.storage.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    elapsed = end - t0
    return {
        "n": n,
        "workers": workers,
        "worker_type": worker_type,
        "poll": poll,
        "settings": used,
        "create_s": t_created - t0,
        "elapsed_s": elapsed,
        "jobs_per_s": n / elapsed,
        "create_per_s": n / (t_created - t0),
        "verified": {"ok": not_once == 0 and left == 0, "not_exactly_once": not_once, "left_in_queue": left},
        "per_worker": per_worker,  # tasks run by each worker (warm-up included), by process and thread
        "exit_codes": codes,
    }
