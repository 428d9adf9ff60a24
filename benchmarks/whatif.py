#!/usr/bin/env python
"""Size candidate engine fixes before they are made: run the benchmarks with one or more
fixes applied by monkeypatching the engine *in the benchmark processes only*.

    .venv/bin/python benchmarks/whatif.py --patch checkpoint --sections jobs --backends sqlite

Every argument after --patch goes to run.py. Patches (see docs/benchmarks.md, "Engine findings"):

  checkpoint  SQLite: no WAL checkpoint inside COMMIT (``wal_autocheckpoint = 0``); a
              background thread per store checkpoints (PASSIVE) every 250 ms instead

This is an investigation aid that reaches into engine internals as they are at the time of
writing; it refuses to run if they have changed. It changes nothing on disk.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ENV = "SKYHUB_BENCH_WHATIF"
PATCHES: dict[str, Callable[[], None]] = {}


def patch(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    def register(fn: Callable[[], None]) -> Callable[[], None]:
        PATCHES[name] = fn
        return fn

    return register


def _need(obj: Any, *names: str) -> None:
    for n in names:
        if not hasattr(obj, n):
            raise SystemExit(f"whatif: {obj!r} has no {n!r} any more; this patch is out of date")


@patch("checkpoint")
def _checkpoint() -> None:
    from ledger import sqlite

    _need(sqlite.SQLiteStore, "_connect")
    original = sqlite.SQLiteStore._connect

    def _connect(self: Any) -> Any:
        conn = original(self)
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        if getattr(self, "_whatif_checkpointer", None) is None:
            def loop() -> None:
                c = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
                try:
                    while not self._closed.wait(0.25):
                        try:
                            c.execute("PRAGMA wal_checkpoint(PASSIVE)")
                        except sqlite3.Error:
                            pass
                finally:
                    c.close()

            self._whatif_checkpointer = threading.Thread(target=loop, name="whatif-checkpoint", daemon=True)
            self._whatif_checkpointer.start()
        return conn

    sqlite.SQLiteStore._connect = _connect  # type: ignore[method-assign]


def apply(names: str) -> None:
    for name in filter(None, names.split(",")):
        if name not in PATCHES:
            raise SystemExit(f"whatif: unknown patch {name!r}; known: {', '.join(PATCHES)}")
        PATCHES[name]()


# Child processes are started with "spawn", which imports this file again as their main
# module: the patches named in the environment are applied there too.
apply(os.environ.get(ENV, ""))


def main() -> int:
    argv = sys.argv[1:]
    if not argv or argv[0] != "--patch" or len(argv) < 2:
        print(__doc__)
        return 2
    names, rest = argv[1], argv[2:]
    os.environ[ENV] = names
    apply(names)
    import run

    print(f"whatif: engine patched in the benchmark processes: {names}\n", flush=True)
    return run.main(rest)


if __name__ == "__main__":
    sys.exit(main())
