"""The bound on the WAL file's size."""

from __future__ import annotations

import os
import sqlite3
import threading

from ledger import SYSTEM
from ledger.sqlite import SQLiteStore

LIMIT = 1024 * 1024
SLACK = 512 * 1024  # the size is looked at every 4th commit (CHECK_EVERY): far more than the pages of 4 small writes, a full-text merge among them


def test_the_wal_file_stays_bounded_under_a_burst_of_writes(tmp_path):
    path = str(tmp_path / "skyhub.db")
    store = SQLiteStore(path, None, SYSTEM, wal_limit=LIMIT)
    sizes: list[int] = []
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                sizes.append(os.stat(path + "-wal").st_size)
            except FileNotFoundError:
                pass
            done.wait(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for i in range(20_000):
            store.put("notes", {"i": i, "text": "x" * 100}, f"n{i:05d}", actor="user:ana")
    finally:
        done.set()
        sampler.join()
    after = os.stat(path + "-wal").st_size
    truncates = store.wal_bound.truncates
    store.close()
    assert len(sizes) > 100 and max(sizes) <= LIMIT + SLACK, f"the WAL reached {max(sizes):,} bytes"
    assert after <= LIMIT + SLACK
    assert truncates > 0
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM docs WHERE db = 'notes'").fetchone()[0] == 20_000
    conn.close()
