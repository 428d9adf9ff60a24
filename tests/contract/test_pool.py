"""Connections and file handles stay bounded by the pool, whatever threads come and go
(uvicorn's worker threads are created and discarded in bursts), and are given back on close."""

from __future__ import annotations

import os
import threading
import time
import uuid

import psycopg

from ledger import SYSTEM, Rules, open_store
from tests.conftest import PG_URL

POOL = 4
BURSTS, THREADS = 20, 8


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def pg_connections(name):
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()[0]


def bursts(store):
    def work(burst, i):
        doc = store.put("notes", {"status": "open", "i": i}, f"b{burst}-{i}", actor="user:ana")
        store.get("notes", doc["_id"])
        store.query("notes", "status", "open", limit=5)
        store.changes(0, 5)
        store.history("notes", doc["_id"])

    for burst in range(BURSTS):
        threads = [threading.Thread(target=work, args=(burst, i)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def wait_for(check, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_bursts_of_threads_keep_sqlite_file_handles_within_the_pool(tmp_path):
    before = open_fds()
    store = open_store(f"sqlite:///{tmp_path}/pool.db", Rules(), SYSTEM, pool_size=POOL)
    bursts(store)
    assert store.get("notes", f"b{BURSTS - 1}-{THREADS - 1}")["i"] == THREADS - 1
    # each connection holds the database, its WAL and its shared-memory file
    assert open_fds() - before <= POOL * 3
    assert store._pool.in_use == 0
    store.close()
    assert open_fds() == before


def test_bursts_of_threads_keep_postgres_connections_within_the_pool(pg_url):
    name = f"skyhub-burst-{uuid.uuid4().hex[:8]}"
    before = open_fds()
    store = open_store(f"{pg_url}&application_name={name}", Rules(), SYSTEM, pool_size=POOL)
    bursts(store)
    assert len(store.changes(0, 1000)) == BURSTS * THREADS
    assert 1 <= pg_connections(name) <= POOL
    assert open_fds() - before <= POOL
    store.close()
    wait_for(lambda: pg_connections(name) == 0)
    assert open_fds() == before
