#!/usr/bin/env python
"""``put_many`` alone on PostgreSQL (or SQLite): N new documents, then N updates with their revisions,
in batches of 200, no rules; the time per document and, on PostgreSQL, the statements a batch sends
(counted at the store's cursor; BEGIN and COMMIT are not counted).

    .venv/bin/python benchmarks/bench_put_many.py [--docs 10000] [--backends postgres,sqlite]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import AbstractContextManager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common as bc  # noqa: E402

import ledger.postgres as pg  # noqa: E402
from ledger import SYSTEM, Rules, Write, open_store  # noqa: E402

BATCH = 200
_statements = [0]
_execute = pg._Cursor.execute


def _counted(self: Any, sql: str, args: Any = None) -> Any:
    _statements[0] += 1
    return _execute(self, sql, args)


def run(backend: str, n: int) -> list[list[str]]:
    where: AbstractContextManager[str] = bc.sqlite_file() if backend == "sqlite" else bc.pg_schema("putmany")
    rows: list[list[str]] = []
    with where as url:
        store = open_store(url, Rules(), SYSTEM)
        try:
            docs = [{"type": "note", "status": "new", "n": i, "text": "x" * 200} for i in range(n)]
            revs: dict[str, str] = {}
            for step in ("create", "update"):
                _statements[0] = 0
                started = time.perf_counter()
                for k in range(0, n, BATCH):
                    writes = [Write({**docs[i], "status": "seen"}, f"d{i:06d}", if_rev=revs[f"d{i:06d}"]) if step == "update"
                              else Write(docs[i], f"d{i:06d}") for i in range(k, min(n, k + BATCH))]
                    for out in store.put_many("notes", writes, actor="user:ana"):
                        assert isinstance(out, dict), out
                        revs[out["_id"]] = out["_rev"]
                took = time.perf_counter() - started
                per_batch = f"{_statements[0] / -(-n // BATCH):.0f}" if backend == "postgres" else "-"
                rows.append([backend, step, f"{n:,}", bc.fmt(took), f"{took / n * 1e6:.0f}", per_batch])
        finally:
            store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--backends", default="postgres,sqlite")
    args = parser.parse_args()
    pg._Cursor.execute = _counted  # type: ignore[method-assign]
    load = os.getloadavg()
    rows: list[list[str]] = []
    for backend in args.backends.split(","):
        rows += run(backend, args.docs)
    after = os.getloadavg()
    print(bc.table(f"put_many, batches of {BATCH}", ["backend", "step", "documents", "s", "us/doc", "statements/batch"], rows,
                   note=f"load average (1 min) before: {load[0]:.2f}, after: {after[0]:.2f}"))


if __name__ == "__main__":
    main()
