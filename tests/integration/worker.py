"""A worker process for the race and crash tests: runs the jobs handler and the sweep on a
store until SIGTERM. Each piece of work is logged (start/end) to a per-process file so the
test can tell which claims a killed process held.

    python tests/integration/worker.py URL LOGFILE --group G --lease-ms N --work-ms N [--hang-after N]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ledger import SYSTEM, Feed, Handler, Rules, deadletter_machine, open_store  # noqa: E402
from ledger.jobs import JOBS, jobs_handler  # noqa: E402
from ledger.lease import Sweeper  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("log")
    parser.add_argument("--group", default=None)
    parser.add_argument("--lease-ms", type=int, default=30_000)
    parser.add_argument("--feed-lease-ms", type=int, default=10_000)
    parser.add_argument("--work-ms", type=float, default=0.0)
    parser.add_argument("--mode", choices=["jobs", "notes"], default="jobs")
    parser.add_argument("--hang-after", type=int, default=0, help="the work of the job after this many never ends")
    args = parser.parse_args()

    rules = Rules([JOBS, deadletter_machine()])
    store = open_store(args.url, rules, SYSTEM)
    log = open(args.log, "a", buffering=1)
    pid = os.getpid()

    worked = []

    def work(key, job, ctx):
        log.write(f"start {key}\n")
        worked.append(key)
        if args.hang_after and len(worked) > args.hang_after:
            log.write(f"hang {key}\n")
            time.sleep(3600)
        if args.work_ms:
            time.sleep(args.work_ms / 1000)
        log.write(f"end {key}\n")
        return {"pid": pid, "key": key}

    def note(change, ctx):
        log.write(f"start {change.seq}\n")
        if args.work_ms:
            time.sleep(args.work_ms / 1000)
        log.write(f"end {change.seq}\n")

    if args.mode == "jobs":
        handler = jobs_handler(work, lease_ms=args.lease_ms, group=args.group, backoff=0.05, skip_own=True)
    else:
        handler = Handler("notes", ["notes"], note, group=args.group)
    feed = Feed(store, [handler], lease_ms=args.feed_lease_ms, clock=SYSTEM)
    sweeper = Sweeper(store, rules, safety_interval=1.0, clock=SYSTEM)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    feed.start()
    sweeper.start()
    log.write("ready\n")
    stop.wait()
    feed.stop()
    sweeper.stop()
    store.close()


if __name__ == "__main__":
    main()
