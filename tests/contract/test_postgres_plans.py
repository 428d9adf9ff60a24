"""PostgreSQL: what the server does for a write, a search and an idle feed claim (plans, locks),
read from the server itself. Each of these once cost a job's write or a worker's wait."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from ledger import SYSTEM, Rules, open_store
from ledger.schema import MIGRATIONS
from tests.contract.test_indexes import plan

JOB = {"type": "job", "status": "pending"}


def docs_scans(url: str) -> tuple[int, int]:
    """(sequential scans, index scans) of this schema's docs table, as the server counts them."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT seq_scan, idx_scan FROM pg_stat_user_tables "
                           "WHERE schemaname = current_schema() AND relname = 'docs'").fetchone()
    return int(row[0]), int(row[1] or 0)


def test_a_new_database_reads_each_write_s_head_by_its_key(pg_url):
    # the write function's plan is cached for the life of a connection: made while the table was
    # empty and its statistics said so, it scanned every document at every write
    store = open_store(pg_url, Rules(), SYSTEM)
    try:
        for i in range(300):
            store.put("jobs", dict(JOB, n=i), f"j{i:04d}", actor="user:ana")
    finally:
        store.close()  # its server process ends, and hands in its counts
    seq, idx = docs_scans(pg_url)
    assert idx >= 300 and seq < 30, f"{seq} sequential scans of docs for 300 writes ({idx} by index)"


def test_searches_read_the_text_index_and_documents_without_text_stay_out_of_it(pg_url):
    store = open_store(pg_url, Rules(), SYSTEM)
    try:
        for i in range(50):
            store.put("notes", dict(JOB, n=i), f"job-{i:03d}", actor="user:ana")
        store.put("notes", {"kind": "mention", "text": "make me a pomodoro timer"}, "m1", actor="user:ana")
        store.put("notes", {"kind": "post", "caption": "sunset pomodoro"}, "p1", actor="user:ana")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            (definition,) = conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                                         "AND indexname = 'docs_search'").fetchone()
        assert "?|" in definition and "'text'" in definition and "'lastError'" in definition
        assert [d["_id"] for d in store.search("notes", "pomodoro").docs] == ["m1", "p1"]
        from ledger.search import parse_search, search_args, search_sql

        query = search_sql(store.dialect, True)
        args = search_args("notes", parse_search("pomodoro"), store.dialect) | {"after": "", "n": 20}
        for sql in (query.count, query.page):
            assert "docs_search" in plan(store, sql, args), sql
    finally:
        store.close()


@pytest.mark.parametrize("dbs", [["jobs"], ["jobs", "other"]])
def test_an_idle_feed_claim_neither_waits_for_nor_takes_the_cursor_lock(pg_url, dbs):
    store = open_store(pg_url, Rules(), SYSTEM)
    try:
        store.put("jobs", JOB, "j1", actor="user:ana")
        batch = store.feed_claim("worker", dbs, "me", 10_000)
        assert batch is not None and [c.id for c in batch.changes] == ["j1"]
        assert store.feed_finish(batch, "me")
        done: list[object] = []
        with psycopg.connect(pg_url) as other:  # another consumer, in the middle of its claim
            other.execute("SELECT claimed FROM feed_cursors WHERE handler = 'worker' FOR UPDATE")
            t = threading.Thread(target=lambda: done.append(store.feed_claim("worker", dbs, "me", 10_000)))
            t.start()
            t.join(60)
            held = t.is_alive()
            other.rollback()
        t.join()
        assert not held and done == [None], "an idle claim waited for the cursor's row lock"
        store.put("jobs", JOB, "j2", actor="user:ana")  # not idle: claimed as before
        batch = store.feed_claim("worker", dbs, "me", 10_000)
        assert batch is not None and [c.id for c in batch.changes] == ["j2"]
    finally:
        store.close()


def test_a_database_of_version_8_gets_the_partial_index_and_its_statistics(pg_url):
    store = open_store(pg_url, Rules(), SYSTEM)
    try:
        store.put("notes", {"text": "kept through the migration"}, "n1", actor="user:ana")
        for i in range(20):
            store.put("notes", dict(JOB, n=i), f"j{i}", actor="user:ana")
    finally:
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # back to version 8: the index over every document
        conn.execute("DROP INDEX docs_search")
        conn.execute("CREATE INDEX docs_search ON docs USING GIN (to_tsvector('simple', skyhub_search_text(body))) WHERE deleted = 0")
        conn.execute("DELETE FROM schema_version WHERE version > 8")
    store = open_store(pg_url, Rules(), SYSTEM)
    try:
        assert [d["_id"] for d in store.search("notes", "migration").docs] == ["n1"]
        with psycopg.connect(pg_url, autocommit=True) as conn:
            (definition,) = conn.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                                         "AND indexname = 'docs_search'").fetchone()
            versions = [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]
            (analyzed,) = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'docs'::regclass").fetchone()
        assert "?|" in definition and versions == [m.version for m in MIGRATIONS]
        assert analyzed >= 21
    finally:
        store.close()


def test_a_commit_to_another_schema_of_the_same_database_wakes_no_one_here(pg_url):
    from ledger import Elsewhere
    from skyhub_testkit.postgres import schema

    here, there = open_store(pg_url, Rules(), SYSTEM), open_store(pg_url, Rules(), SYSTEM)
    heard: list[object] = []
    got = threading.Event()

    def listener(change):
        heard.append(change)
        got.set()

    try:
        here.subscribe(listener, hints=True)
        assert got.wait(10)  # LISTEN is in place (its first wake-up: "anything meanwhile")
        with schema() as elsewhere_url:
            elsewhere = open_store(elsewhere_url, Rules(), SYSTEM)
            try:
                got.clear()
                heard.clear()
                elsewhere.put("foreign", {"i": 1}, "f1", actor="user:eve")  # notified first, on the same channel
                there.put("notes", {"i": 1}, "n1", actor="user:ana")
                assert got.wait(10), "the other store's commit did not wake this one"
                for _ in range(200):  # the wake-up may come before the hint lands in the list
                    if Elsewhere("notes", "user:ana") in heard:
                        break
                    time.sleep(0.05)
            finally:
                elsewhere.close()
        assert heard == [Elsewhere("notes", "user:ana")]
    finally:
        here.close()
        there.close()
