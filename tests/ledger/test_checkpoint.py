"""WAL checkpoints off the commit path, and the bound on the WAL file."""

from __future__ import annotations

import os
import sqlite3
import threading

from ledger.sqlite import SQLiteStore

LIMIT = 1024 * 1024
ONE_WRITE = 256 * 1024  # far more than the pages one small write touches


def test_the_wal_file_stays_bounded_under_a_burst_of_writes(tmp_path):
    path = str(tmp_path / "skyhub.db")
    store = SQLiteStore(path, wal_limit=LIMIT)
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
    checkpoints = store.checkpointer.checkpoints
    store.close()
    assert len(sizes) > 100 and max(sizes) <= LIMIT + ONE_WRITE, f"the WAL reached {max(sizes):,} bytes"
    assert after <= LIMIT
    assert checkpoints > 0
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM docs WHERE db = 'notes'").fetchone()[0] == 20_000
    conn.close()


def test_no_connection_checkpoints_inside_its_commits(tmp_path):
    store = SQLiteStore(str(tmp_path / "skyhub.db"))
    try:
        with store._op() as cur:
            cur.execute("PRAGMA wal_autocheckpoint")
            assert cur.fetchone()[0] == 0
    finally:
        store.close()


def test_a_store_that_only_reads_runs_no_checkpointer(tmp_path):
    path = str(tmp_path / "skyhub.db")
    writer = SQLiteStore(path)
    writer.put("notes", {"i": 0}, "n0", actor="user:ana")
    reader = SQLiteStore(path)
    try:
        assert reader.get("notes", "n0")["i"] == 0
        reader.subscribe(lambda change: None)
        assert reader.checkpointer._thread is None
        assert writer.checkpointer._thread is not None
    finally:
        reader.close()
        writer.close()
