"""A database made by an earlier version (schema versions 1-3) is brought forward in place."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from ledger import SYSTEM, Feed, Handler, Rules, open_store
from ledger.schema import MIGRATIONS, STATUS_INDEX, index_name
from tests.contract.test_indexes import index_names

pytestmark = pytest.mark.durable  # a database an earlier version made: a file or a server, never one in memory

# the tables exactly as versions 1-3 made them, and the indexes that reads used to make
V3 = {
    "sqlite": [
        """CREATE TABLE docs (db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL, body TEXT NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (db, id)) WITHOUT ROWID""",
        """CREATE TABLE changes (seq INTEGER PRIMARY KEY, db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL,
            body TEXT NOT NULL, deleted INTEGER NOT NULL, actor TEXT NOT NULL, at INTEGER NOT NULL)""",
        "CREATE INDEX changes_by_doc ON changes (db, id, seq)",
        "CREATE TABLE feed_cursors (handler TEXT PRIMARY KEY, done INTEGER NOT NULL, claimed INTEGER NOT NULL)",
        """CREATE TABLE feed_leases (handler TEXT NOT NULL, after INTEGER NOT NULL, upto INTEGER NOT NULL,
            owner TEXT NOT NULL, lease_until INTEGER NOT NULL, tries INTEGER NOT NULL, pos INTEGER NOT NULL,
            PRIMARY KEY (handler, after))""",
        """CREATE TABLE tick_runs (tick TEXT NOT NULL, scheduled_at INTEGER NOT NULL, owner TEXT NOT NULL,
            started_at INTEGER NOT NULL, finished_at INTEGER, outcome TEXT, error TEXT, PRIMARY KEY (tick, scheduled_at))""",
        "CREATE TABLE once_keys (key TEXT PRIMARY KEY, expires_at INTEGER NOT NULL)",
        "CREATE INDEX once_keys_by_expiry ON once_keys (expires_at)",
        "CREATE INDEX IF NOT EXISTS changes_by_db ON changes (db, seq)",
        "CREATE TABLE schema_version (version INTEGER NOT NULL)",
        "INSERT INTO schema_version (version) VALUES (1), (2), (3)",
        "CREATE INDEX docs_by_status ON docs (db, json_extract(body, '$.status'), id) WHERE deleted = 0",
        "CREATE INDEX docs_by_owner ON docs (db, json_extract(body, '$.owner'), id) WHERE deleted = 0",
        "CREATE INDEX docs_by_a ON docs (db, json_extract(body, '$.A'), id) WHERE deleted = 0",
        """INSERT INTO docs VALUES ('tasks', 't1', '1-aaaaaaaaaaaaaaaa', '{"status":"open","owner":"ana"}', 0)""",
        """INSERT INTO changes (db, id, rev, body, deleted, actor, at)
            VALUES ('tasks', 't1', '1-aaaaaaaaaaaaaaaa', '{"status":"open","owner":"ana"}', 0, 'user:ana', 1)""",
        "INSERT INTO feed_cursors VALUES ('reader', 0, 0)",
    ],
    "postgres": [
        """CREATE TABLE docs (db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL, body JSONB NOT NULL,
            deleted SMALLINT NOT NULL DEFAULT 0, PRIMARY KEY (db, id))""",
        """CREATE TABLE changes (seq BIGSERIAL PRIMARY KEY, db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL,
            body TEXT NOT NULL, deleted SMALLINT NOT NULL, actor TEXT NOT NULL, at BIGINT NOT NULL)""",
        "CREATE INDEX changes_by_doc ON changes (db, id, seq)",
        "CREATE TABLE feed_cursors (handler TEXT PRIMARY KEY, done BIGINT NOT NULL, claimed BIGINT NOT NULL)",
        """CREATE TABLE feed_leases (handler TEXT NOT NULL, after BIGINT NOT NULL, upto BIGINT NOT NULL, owner TEXT NOT NULL,
            lease_until BIGINT NOT NULL, tries INTEGER NOT NULL, pos BIGINT NOT NULL, PRIMARY KEY (handler, after))""",
        """CREATE TABLE tick_runs (tick TEXT NOT NULL, scheduled_at BIGINT NOT NULL, owner TEXT NOT NULL,
            started_at BIGINT NOT NULL, finished_at BIGINT, outcome TEXT, error TEXT, PRIMARY KEY (tick, scheduled_at))""",
        "CREATE TABLE once_keys (key TEXT PRIMARY KEY, expires_at BIGINT NOT NULL)",
        "CREATE INDEX once_keys_by_expiry ON once_keys (expires_at)",
        "CREATE INDEX IF NOT EXISTS changes_by_db ON changes (db, seq)",
        "CREATE TABLE schema_version (version INTEGER NOT NULL)",
        "INSERT INTO schema_version (version) VALUES (1), (2), (3)",
        "CREATE INDEX docs_by_status ON docs (db, (body -> 'status'), id) WHERE deleted = 0",
        "CREATE INDEX docs_by_owner ON docs (db, (body -> 'owner'), id) WHERE deleted = 0",
        "CREATE INDEX docs_by_a ON docs (db, (body -> 'A'), id) WHERE deleted = 0",
        """INSERT INTO docs VALUES ('tasks', 't1', '1-aaaaaaaaaaaaaaaa', '{"status":"open","owner":"ana"}', 0)""",
        """INSERT INTO changes (db, id, rev, body, deleted, actor, at)
            VALUES ('tasks', 't1', '1-aaaaaaaaaaaaaaaa', '{"status":"open","owner":"ana"}', 0, 'user:ana', 1)""",
        "INSERT INTO feed_cursors VALUES ('reader', 0, 0)",
    ],
}


def make_v3(url):
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///"):])
        with conn:
            for statement in V3["sqlite"]:
                conn.execute(statement)
        conn.close()
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in V3["postgres"]:
                conn.execute(statement)


def versions(url):
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///"):])
        try:
            return [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]
        finally:
            conn.close()
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]


@pytest.fixture
def v3_url(backend_url):
    make_v3(backend_url)
    return backend_url


def test_a_version_3_database_keeps_working(v3_url):
    rules = Rules()
    rules.index("tasks", "owner")
    store = open_store(v3_url, rules, SYSTEM)
    try:
        assert versions(v3_url) == [m.version for m in MIGRATIONS]
        names = index_names(store)
        assert STATUS_INDEX in names and index_name("tasks", "owner") in names
        assert "docs_by_owner" not in names and "docs_by_a" not in names  # made by reads: gone
        doc = store.get("tasks", "t1")
        assert doc["owner"] == "ana"
        assert [(c.db, c.kind, c.status, c.n) for c in store.counts()] == [("tasks", "", "open", 1)]  # counted in place
        assert [d["_id"] for d in store.query("tasks", "status", "open").docs] == ["t1"]
        assert [d["_id"] for d in store.query("tasks", "owner", "ana").docs] == ["t1"]
        store.put("tasks", {"status": "done", "owner": "ana"}, "t1", actor="user:ana", if_rev=doc["_rev"])
        assert [c.seq for c in store.history("tasks", "t1")] == [1, 2]
        assert [(c.status, c.n) for c in store.counts("tasks")] == [("done", 1)]
        seen = []
        Feed(store, [Handler("reader", ["tasks"], lambda change, ctx: seen.append(change.seq))], clock=SYSTEM).drain()
        assert seen == [1, 2]
    finally:
        store.close()
    again = open_store(v3_url, Rules(), SYSTEM)  # opening again changes nothing
    try:
        assert versions(v3_url) == [m.version for m in MIGRATIONS]
        assert again.get("tasks", "t1")["status"] == "done"
    finally:
        again.close()
