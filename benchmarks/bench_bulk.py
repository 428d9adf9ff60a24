#!/usr/bin/env python
"""Bulk retry (``ledger.bulk``) over many failed jobs, on SQLite and PostgreSQL: the dry run (read, count,
sample), the real run (every job written through the machine's person edge with its revision, then one
audit record), and ``error_groups`` (what ``skyhub errors`` and the overview read), timed in this
process against the store. The jobs are written through the store's normal write path first (as admin).
Prints a table; the figures go in docs/benchmarks.md with the machine they ran on.

    .venv/bin/python benchmarks/bench_bulk.py [--docs 10000] [--backends sqlite,postgres]
    .venv/bin/python benchmarks/bench_bulk.py --quick      # smoke run: 300 documents
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import AbstractContextManager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common as bc  # noqa: E402

from hub.app import build_rules  # noqa: E402
from ledger import SYSTEM, Ledger, open_store  # noqa: E402
from ledger.bulk import Filter, bulk  # noqa: E402
from ledger.fingerprint import error_groups  # noqa: E402


def _fill(store, n: int) -> None:  # noqa: ANN001
    for i in range(n):
        error = f"lease expired during attempt 3 of 3 (job {i:08x}ab)" if i % 10 else f"worker {i} ran out of memory"
        store.put("jobs", {"type": "job", "status": "failed", "input": {"n": i}, "attempts": 3, "lastError": error}, f"job-{i:06d}",
                  actor="admin")


def run(backend: str, n: int) -> list[list[str]]:
    where: AbstractContextManager[str] = bc.sqlite_file() if backend == "sqlite" else bc.pg_schema("bulk")
    rows: list[list[str]] = []
    with where as url:
        rules = build_rules()
        store = open_store(url, rules, SYSTEM)
        try:
            started = time.perf_counter()
            _fill(store, n)
            rows.append([backend, "write the failed jobs", f"{n:,}", bc.fmt(time.perf_counter() - started), ""])
            clock = SYSTEM
            started = time.perf_counter()
            groups = error_groups(store, rules, "jobs", scan=n)
            rows.append([backend, "group errors (skyhub errors)", f"{n:,}", bc.fmt(time.perf_counter() - started),
                         f"{len(groups)} groups"])
            ana = Ledger(store, "user:ana", clock)
            started = time.perf_counter()
            dry = bulk(ana, rules, "jobs", "retry", Filter(status="failed"), dry_run=True)
            rows.append([backend, "bulk retry, dry run", f"{dry.matched:,}", bc.fmt(time.perf_counter() - started), ""])
            started = time.perf_counter()
            out = bulk(ana, rules, "jobs", "retry", Filter(status="failed"))
            took = time.perf_counter() - started
            rows.append([backend, "bulk retry", f"{len(out.written):,}", bc.fmt(took), f"{len(out.written) / took:,.0f} docs/s"])
        finally:
            store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 300 documents")
    args = parser.parse_args()
    n = 300 if args.quick else args.docs
    load = os.getloadavg()
    rows: list[list[str]] = []
    for backend in args.backends.split(","):
        rows += run(backend, n)
    after = os.getloadavg()
    print(bc.table("Bulk retry over failed jobs (seconds, in process)", ["backend", "step", "documents", "s", "rate"], rows,
                   note=f"load average (1 min) before: {load[0]:.2f}, after: {after[0]:.2f}"))
    for key, value in bc.machine_description():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
