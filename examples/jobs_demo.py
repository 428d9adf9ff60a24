"""The reference jobs machine, end to end, in one process: a runnable example.

    .venv/bin/python examples/jobs_demo.py

Creates a few jobs in a temporary SQLite file, runs the change feed with the jobs handler and
the sweep, makes one worker crash mid-job, and prints every revision of every job.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ledger import SYSTEM, Feed, Rules, deadletter_machine, open_store  # noqa: E402
from ledger.jobs import JOBS, jobs_handler  # noqa: E402
from ledger.lease import Sweeper  # noqa: E402


def main() -> None:
    rules = Rules([JOBS, deadletter_machine()])
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(os.path.join(tmp, "demo.db"), rules, SYSTEM)
        crashed: set[str] = set()

        def work(key, job, ctx):
            # "job-2" crashes on its first attempt: the feed redelivers the event (the claim is
            # then refused as stale), the sweep takes the lease back, and attempt 2 succeeds.
            if job["_id"] == "job-2" and job["_id"] not in crashed:
                crashed.add(job["_id"])
                raise RuntimeError("worker crashed")
            return {"answer": job["input"]["n"] * 2, "key": key}

        feed = Feed(store, [jobs_handler(work, lease_ms=500, backoff=0.05)], clock=SYSTEM)
        sweeper = Sweeper(store, rules, safety_interval=5, clock=SYSTEM)
        feed.start()
        sweeper.start()
        for n in range(1, 4):
            store.put("jobs", {"type": "job", "status": "pending", "input": {"n": n}}, f"job-{n}", actor="user:demo")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if all(store.get("jobs", f"job-{n}")["status"] == "done" for n in range(1, 4)):
                break
            time.sleep(0.05)
        feed.stop()
        sweeper.stop()
        for n in range(1, 4):
            print(f"job-{n}:")
            for change in store.history("jobs", f"job-{n}"):
                doc = change.doc
                extra = f" result={doc['result']}" if "result" in doc else ""
                print(f"  {change.rev:<20} {doc['status']:<8} by {change.actor:<18} attempts={doc.get('attempts', 0)}{extra}")
        store.close()


if __name__ == "__main__":
    main()
