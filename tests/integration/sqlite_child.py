"""A child process for the SQLite wake-up and checkpoint tests.

    python tests/integration/sqlite_child.py feed DB LOG [--poll-s S]   # a Feed on "notes" until SIGTERM
    python tests/integration/sqlite_child.py write DB [--start N]        # writes notes, prints each id committed
    python tests/integration/sqlite_child.py hold DB                     # a write transaction left open, until killed

``feed`` opens the store with ``open_store`` (so SKYHUB_SQLITE_WAKE applies), or, with
``--poll-s``, with that data_version poll interval; the feed's own idle re-check is 60 s, so
only a wake-up can make it deliver promptly. It logs ``ready`` and then ``got <id>`` per change.
``hold`` begins a write transaction (the writer lock and SQLite's lock taken), writes a note in it,
prints ``held`` and waits to be killed. ``write`` checkpoints as often as it can (a 64 KiB WAL limit: a TRUNCATE checkpoint every few
writes) and prints ``<id>`` on stdout once ``put`` returned, until it is killed.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from ledger import SYSTEM, Feed, Handler, open_store  # noqa: E402
from ledger.sqlite import SQLiteStore  # noqa: E402


def feed(args: argparse.Namespace) -> None:
    store = open_store(args.db, None, SYSTEM) if args.poll_s is None else SQLiteStore(args.db, None, SYSTEM, poll_interval=args.poll_s)
    log = open(args.log, "a", buffering=1)
    handler = Handler("notes", ["notes"], lambda change, ctx: log.write(f"got {change.id}\n"))
    running = Feed(store, [handler], idle_interval=60, clock=SYSTEM)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    running.start()
    log.write("ready\n")
    stop.wait()
    running.stop()
    store.close()


def write(args: argparse.Namespace) -> None:
    store = SQLiteStore(args.db, None, SYSTEM, wal_limit=64 * 1024)
    i = args.start
    while True:
        store.put("notes", {"i": i, "pad": "x" * 500}, f"n{i:07d}", actor="user:ana")
        sys.stdout.write(f"n{i:07d}\n")
        sys.stdout.flush()
        i += 1


def hold(args: argparse.Namespace) -> None:
    store = SQLiteStore(args.db, None, SYSTEM)
    with store._tx() as cur:
        cur.execute("INSERT INTO docs (db, id, rev, body, deleted) VALUES ('notes', 'never', '1-x', '{}', 0)")
        sys.stdout.write("held\n")
        sys.stdout.flush()
        threading.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    f = sub.add_parser("feed")
    f.add_argument("db")
    f.add_argument("log")
    f.add_argument("--poll-s", type=float, default=None)
    w = sub.add_parser("write")
    w.add_argument("db")
    w.add_argument("--start", type=int, default=0)
    h = sub.add_parser("hold")
    h.add_argument("db")
    args = parser.parse_args()
    {"feed": feed, "write": write, "hold": hold}[args.mode](args)


if __name__ == "__main__":
    main()
