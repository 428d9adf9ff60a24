"""The ledger's schema, declared once for both SQL dialects: tables, migrations, field indexes.

Every statement is written once, with ``:named`` parameters and ``{fragments}`` where SQLite
and PostgreSQL differ. ``Dialect.compile`` turns it into the driver's own text once (sqlite3
binds ``:name`` natively, psycopg ``%(name)s``); nothing is rewritten per call.

    fragment        SQLite                             PostgreSQL
    {json}          TEXT (JSON text)                   JSONB
    {bigint}        INTEGER (always 64-bit)            BIGINT
    {flag}          INTEGER                            SMALLINT
    {seq_key}       INTEGER PRIMARY KEY (the rowid)    BIGSERIAL PRIMARY KEY
    {clustered}     WITHOUT ROWID (rows in key order)  nothing (a heap and its primary key)
    {for_update}    nothing (BEGIN IMMEDIATE locks)    FOR UPDATE
    {body}          body                               body::text (the store decodes it)
    field f         json_extract(body, '$.f')          (body -> 'f')
    :key            the value itself                   the value as JSON text, ::jsonb

Migrations only append: a database made by any earlier version is brought forward in place.
Versions 1-3 are the tables as first shipped; 4 makes indexes declared (see ``index_name``);
5 counts documents by database, kind and status (``doc_counts``, kept by triggers); 6 gives
PostgreSQL one server-side function per write and per feed operation (one round trip each);
7 indexes what a search reads (``ledger/search.py``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

log = logging.getLogger(__name__)

STATUS_INDEX = "docs_by_status"  # the one index over every database: status, for the machines
TIME_INDEX = "docs_by_status_written"  # status, then when a document was last written: the console's lists by time


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL of SQLite and of PostgreSQL, each difference named."""

    name: str
    fragments: dict[str, str]
    param: Callable[[str], str]  # the driver's syntax for the named parameter
    field_sql: Callable[[str], str]  # a top-level field of body, as the index expression
    index_element: Callable[[str], str]  # that expression as an element of CREATE INDEX
    hint: Callable[[str], str]  # how a query names the index it must use ("" if the planner finds it)
    list_indexes: str  # the names of the indexes on docs (used by migration 4)

    def compile(self, text: str, **extra: str) -> str:
        """``text`` with fragments filled in and ``:name`` parameters in the driver's syntax."""
        text = text.format(**self.fragments, **extra)
        if self.name == "postgres":
            text = text.replace("%", "%%")
        return _PARAM.sub(lambda m: self.param(m.group(1)), text)

    def key_args(self, field: str, key: Any) -> dict[str, Any]:
        """The parameters that compare ``field`` with ``key`` in ``match``."""
        if self.name == "postgres":
            return {"key": json.dumps(key, ensure_ascii=False)}
        if isinstance(key, bool):
            types = ("true", "true") if key else ("false", "false")
        elif isinstance(key, str):
            types = ("text", "text")
        else:
            types = ("integer", "real")
        return {"key": key, "kt1": types[0], "kt2": types[1]}

    def match(self, field: str) -> str:
        """SQL that holds when ``field`` of body equals the query key (see ``key_args``)."""
        if self.name == "postgres":
            return f"{self.field_sql(field)} = :key::jsonb"
        # json_extract gives 1 for true and the text of a nested object: compare the JSON
        # type too, so that a key matches exactly what it matches in PostgreSQL's jsonb
        return f"{self.field_sql(field)} = :key AND json_type(body, '$.{field}') IN (:kt1, :kt2)"


_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")

SQLITE = Dialect(
    "sqlite",
    {
        "json": "TEXT", "bigint": "INTEGER", "flag": "INTEGER", "seq_key": "INTEGER PRIMARY KEY",
        "clustered": " WITHOUT ROWID", "for_update": "", "body": "body",
    },
    param=lambda name: f":{name}",
    field_sql=lambda f: f"json_extract(body, '$.{f}')",
    index_element=lambda f: f"json_extract(body, '$.{f}')",
    # SQLite 3.40's planner preferred the primary key (db, id) for "WHERE db = ? AND <field> = ?
    # ORDER BY id" and read every document of the database: 10.6 ms a query at 20k documents,
    # 0.05 ms with the index named.
    hint=lambda name: f' INDEXED BY "{name}"',
    list_indexes="SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'docs'",
)

POSTGRES = Dialect(
    "postgres",
    {
        "json": "JSONB", "bigint": "BIGINT", "flag": "SMALLINT", "seq_key": "BIGSERIAL PRIMARY KEY",
        "clustered": "", "for_update": " FOR UPDATE", "body": "body::text",
    },
    param=lambda name: f"%({name})s",
    field_sql=lambda f: f"(body -> '{f}')",
    index_element=lambda f: f"(body -> '{f}')",
    hint=lambda name: "",
    list_indexes="SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'docs'",
)


# ---- migrations ----------------------------------------------------------------------------
Step = Callable[[Any, Dialect], None]


def _drop_read_made_indexes(cur: Any, dialect: Dialect) -> None:
    """Before version 4 a query on a new field made an index for it (``docs_by_<field>``, for
    every database): any caller could add indexes without end (200 made writes 4x slower).
    Drop them; the fields that need one are now declared (``Rules.index``) or added by an admin."""
    cur.execute(dialect.list_indexes, {})
    for (name,) in cur.fetchall():
        if name.startswith("docs_by_") and name != STATUS_INDEX:
            cur.execute(f'DROP INDEX IF EXISTS "{name}"', {})


# ---- document counts (migration 5) ---------------------------------------------------------
# A document's kind is its "kind" field, else its "type", else "" (only text values count);
# its status the "status" field's text, else "". Tombstones are not counted.
def _sqlite_kind(row: str) -> str:
    return (
        f"CASE WHEN json_type({row}.body, '$.kind') = 'text' THEN json_extract({row}.body, '$.kind') "
        f"WHEN json_type({row}.body, '$.type') = 'text' THEN json_extract({row}.body, '$.type') ELSE '' END"
    )


def _sqlite_status(row: str) -> str:
    return f"CASE WHEN json_type({row}.body, '$.status') = 'text' THEN json_extract({row}.body, '$.status') ELSE '' END"


def _sqlite_count(row: str, delta: str) -> str:
    return (
        f"INSERT INTO doc_counts (db, kind, status, stripe, n) VALUES ({row}.db, {_sqlite_kind(row)}, {_sqlite_status(row)}, 0, {delta}) "
        f"ON CONFLICT (db, kind, status, stripe) DO UPDATE SET n = n + excluded.n;"
    )


# SQLite: one writer at a time, one row per (db, kind, status). A write that changes neither
# the kind nor the status (a heartbeat, most edits) does not touch the counts.
SQLITE_COUNT_TRIGGERS = (
    f"""CREATE TRIGGER docs_count_insert AFTER INSERT ON docs WHEN NEW.deleted = 0 BEGIN
        {_sqlite_count("NEW", "1")}
    END""",
    f"""CREATE TRIGGER docs_count_update AFTER UPDATE OF body, deleted ON docs
    WHEN OLD.deleted <> NEW.deleted OR OLD.db <> NEW.db
        OR ({_sqlite_kind("OLD")}) <> ({_sqlite_kind("NEW")}) OR ({_sqlite_status("OLD")}) <> ({_sqlite_status("NEW")}) BEGIN
        UPDATE doc_counts SET n = n - 1 WHERE OLD.deleted = 0 AND db = OLD.db AND kind = {_sqlite_kind("OLD")}
            AND status = {_sqlite_status("OLD")} AND stripe = 0;
        INSERT INTO doc_counts (db, kind, status, stripe, n)
            SELECT NEW.db, {_sqlite_kind("NEW")}, {_sqlite_status("NEW")}, 0, 1 WHERE NEW.deleted = 0
            ON CONFLICT (db, kind, status, stripe) DO UPDATE SET n = n + 1;
    END""",
    f"""CREATE TRIGGER docs_count_delete AFTER DELETE ON docs WHEN OLD.deleted = 0 BEGIN
        UPDATE doc_counts SET n = n - 1 WHERE db = OLD.db AND kind = {_sqlite_kind("OLD")}
            AND status = {_sqlite_status("OLD")} AND stripe = 0;
    END""",
)

# PostgreSQL: writers of several processes commit concurrently, and a row of doc_counts is
# locked by the transaction that changes it until it commits: with one row per (db, kind,
# status), every write moving a job to "running" would wait for the previous one's commit.
# Each connection adds to its own stripe (its backend pid modulo COUNT_STRIPES) instead, and a
# read adds the stripes up.
COUNT_STRIPES = 16
POSTGRES_COUNT_TRIGGERS = (
    """CREATE FUNCTION skyhub_doc_kind(body JSONB) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN jsonb_typeof(body -> 'kind') = 'string' THEN body ->> 'kind'
                    WHEN jsonb_typeof(body -> 'type') = 'string' THEN body ->> 'type' ELSE '' END $$""",
    """CREATE FUNCTION skyhub_doc_status(body JSONB) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN jsonb_typeof(body -> 'status') = 'string' THEN body ->> 'status' ELSE '' END $$""",
    """CREATE FUNCTION skyhub_count_docs() RETURNS TRIGGER LANGUAGE plpgsql AS $$
    DECLARE
        my_stripe INTEGER := pg_backend_pid() %% """ + str(COUNT_STRIPES) + """;
        old_kind TEXT; old_status TEXT; new_kind TEXT; new_status TEXT;
    BEGIN
        IF TG_OP <> 'INSERT' AND OLD.deleted = 0 THEN
            old_kind := skyhub_doc_kind(OLD.body);
            old_status := skyhub_doc_status(OLD.body);
        END IF;
        IF TG_OP <> 'DELETE' AND NEW.deleted = 0 THEN
            new_kind := skyhub_doc_kind(NEW.body);
            new_status := skyhub_doc_status(NEW.body);
        END IF;
        IF TG_OP = 'UPDATE' AND OLD.db = NEW.db AND old_kind IS NOT DISTINCT FROM new_kind
                AND old_status IS NOT DISTINCT FROM new_status THEN
            RETURN NULL;
        END IF;
        IF old_kind IS NOT NULL THEN
            INSERT INTO doc_counts (db, kind, status, stripe, n) VALUES (OLD.db, old_kind, old_status, my_stripe, -1)
                ON CONFLICT (db, kind, status, stripe) DO UPDATE SET n = doc_counts.n - 1;
        END IF;
        IF new_kind IS NOT NULL THEN
            INSERT INTO doc_counts (db, kind, status, stripe, n) VALUES (NEW.db, new_kind, new_status, my_stripe, 1)
                ON CONFLICT (db, kind, status, stripe) DO UPDATE SET n = doc_counts.n + 1;
        END IF;
        RETURN NULL;
    END $$""",
    "CREATE TRIGGER docs_count AFTER INSERT OR UPDATE OR DELETE ON docs FOR EACH ROW EXECUTE FUNCTION skyhub_count_docs()",
)


def _count_documents(cur: Any, dialect: Dialect) -> None:
    """Count the documents already there, and keep counting in every write's transaction."""
    triggers: tuple[str, ...]
    if dialect.name == "postgres":
        triggers, kind, status = POSTGRES_COUNT_TRIGGERS, "skyhub_doc_kind(body)", "skyhub_doc_status(body)"
    else:
        triggers, kind, status = SQLITE_COUNT_TRIGGERS, _sqlite_kind("docs"), _sqlite_status("docs")
    for statement in triggers:
        cur.execute(statement, {})
    cur.execute(
        f"INSERT INTO doc_counts (db, kind, status, stripe, n) SELECT db, {kind}, {status}, 0, COUNT(*) FROM docs "
        "WHERE deleted = 0 GROUP BY 1, 2, 3", {},
    )



# ---- one round trip per write and per feed operation (migration 6, PostgreSQL) -------------
# A write used to be BEGIN, a head read, the insert or update, the append lock, the append and
# COMMIT: six round trips, and a claim nine. Each is now one statement that calls a function;
# the transaction is that statement's own. The machine rules still run in Python, before the
# call, against the head the caller read (or knew): the function writes only if the head is
# still at that revision, and otherwise returns the head as it is, for the caller to check
# again (or raise Conflict). Bookkeeping (claim, renew, finish) commits without waiting for the
# disk, as before: a lost lease or cursor move only means a redelivery.
_CLAIM_COLUMNS = "c.seq, c.db, c.id, c.rev, c.body, c.deleted, c.actor, c.at"
_ONE_DB = "c.db = v_one"
_ANY_DB = "c.db = ANY(p_dbs)"


def _claim_rows(where_db: str) -> str:
    return (
        "RETURN QUERY SELECT v_taken, v_after, v_upto, v_tries, v_pos, " + _CLAIM_COLUMNS + " FROM changes c WHERE " + where_db
        + " AND c.seq > v_after AND c.seq <= v_upto AND c.actor <> p_skip ORDER BY c.seq LIMIT v_n;"
    )


def _claim_count(where_db: str) -> str:
    return (
        "SELECT COUNT(*), MAX(s.seq) INTO v_count, v_last FROM (SELECT c.seq FROM changes c WHERE " + where_db
        + " AND c.seq > v_claimed AND c.seq <= COALESCE(v_top, 9223372036854775807) AND c.actor <> p_skip "
        "ORDER BY c.seq LIMIT p_n) s;"
    )


POSTGRES_FUNCTIONS = (
    """CREATE OR REPLACE FUNCTION skyhub_write(
        p_db TEXT, p_id TEXT, p_expect TEXT, p_rev TEXT, p_text TEXT, p_deleted SMALLINT, p_actor TEXT, p_at BIGINT,
        p_channel TEXT, p_lock BIGINT, OUT o_seq BIGINT, OUT o_rev TEXT, OUT o_body TEXT, OUT o_deleted SMALLINT)
    LANGUAGE plpgsql AS $$
    -- o_seq: the new change's seq; NULL when the head is not at p_expect (NULL: no document),
    -- with the head in o_rev, o_body, o_deleted (all NULL: there is none), also when another
    -- writer created the document meanwhile; 0 when that document is gone again.
    DECLARE
        h_rev TEXT; h_body JSONB; h_deleted SMALLINT;
    BEGIN
        SELECT d.rev, d.body, d.deleted INTO h_rev, h_body, h_deleted FROM docs d WHERE d.db = p_db AND d.id = p_id FOR UPDATE;
        IF FOUND THEN
            IF p_expect IS NULL OR h_rev <> p_expect THEN
                o_rev := h_rev; o_body := h_body::text; o_deleted := h_deleted;
                RETURN;
            END IF;
            UPDATE docs SET rev = p_rev, body = p_text::jsonb, deleted = p_deleted, written = p_at WHERE db = p_db AND id = p_id;
        ELSIF p_expect IS NOT NULL THEN
            RETURN;
        ELSE
            INSERT INTO docs (db, id, rev, body, deleted, written) VALUES (p_db, p_id, p_rev, p_text::jsonb, p_deleted, p_at)
                ON CONFLICT (db, id) DO NOTHING;
            IF NOT FOUND THEN
                -- another writer created it meanwhile (and has committed: the insert waited):
                -- hand back its head, so that the write is judged again against it
                SELECT d.rev, d.body::text, d.deleted INTO o_rev, o_body, o_deleted FROM docs d
                    WHERE d.db = p_db AND d.id = p_id FOR UPDATE;
                IF NOT FOUND THEN
                    o_seq := 0;
                END IF;
                RETURN;
            END IF;
        END IF;
        -- the append lock, as late as possible and held to commit (the end of this statement):
        -- seqs are handed out in commit order, so a feed reader never skips a late commit
        PERFORM pg_advisory_xact_lock(p_lock);
        INSERT INTO changes (db, id, rev, body, deleted, actor, at) VALUES (p_db, p_id, p_rev, p_text, p_deleted, p_actor, p_at)
            RETURNING seq INTO o_seq;
        -- feeds skip what they would skip; the schema: listeners of another schema of the database ignore it
        PERFORM pg_notify(p_channel, o_seq::text || ' ' || p_db || ' ' || p_actor || ' ' || current_schema());
    END $$""",
    """CREATE OR REPLACE FUNCTION skyhub_feed_claim(
        p_handler TEXT, p_dbs TEXT[], p_owner TEXT, p_now BIGINT, p_until BIGINT, p_n INTEGER, p_skip TEXT, p_max INTEGER)
    RETURNS TABLE (b_taken BOOLEAN, b_after BIGINT, b_upto BIGINT, b_tries INTEGER, b_pos BIGINT, c_seq BIGINT, c_db TEXT, c_id TEXT,
                   c_rev TEXT, c_body TEXT, c_deleted SMALLINT, c_actor TEXT, c_at BIGINT)
    LANGUAGE plpgsql AS $$
    -- A batch's rows, one per change (one row without a change when all were skipped); no
    -- rows when there is nothing to do. p_skip: the actor whose changes are passed over ('': none).
    DECLARE
        v_claimed BIGINT; v_after BIGINT; v_upto BIGINT; v_tries INTEGER; v_pos BIGINT;
        v_top BIGINT; v_last BIGINT; v_count INTEGER; v_n INTEGER := p_n; v_one TEXT; v_taken BOOLEAN := FALSE;
    BEGIN
        PERFORM set_config('synchronous_commit', 'off', true);
        IF cardinality(p_dbs) = 1 THEN
            v_one := p_dbs[1];  -- "db = v_one" reads changes_by_db; "db = ANY(...)" reads the log from the cursor on
        END IF;
        -- idle (nothing at all after the cursor, no expired batch): back without locking or writing
        -- the cursor. The loser of a wake-up race, or a worker woken by another handler's commit, no
        -- longer queues behind the winner's claim on the cursor's row (nor writes a row lock to the WAL).
        -- A change committed after these reads wakes the caller again.
        SELECT f.claimed INTO v_claimed FROM feed_cursors f WHERE f.handler = p_handler;
        IF FOUND AND NOT EXISTS (SELECT 1 FROM feed_leases l WHERE l.handler = p_handler AND l.lease_until < p_now) THEN
            IF v_one IS NOT NULL THEN
                IF NOT EXISTS (SELECT 1 FROM changes c WHERE c.db = v_one AND c.seq > v_claimed) THEN
                    RETURN;
                END IF;
            ELSIF NOT EXISTS (SELECT 1 FROM unnest(p_dbs) AS d(db)
                              WHERE EXISTS (SELECT 1 FROM changes c WHERE c.db = d.db AND c.seq > v_claimed)) THEN
                RETURN;
            END IF;
        END IF;
        SELECT f.claimed INTO v_claimed FROM feed_cursors f WHERE f.handler = p_handler FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO feed_cursors (handler, done, claimed) VALUES (p_handler, 0, 0) ON CONFLICT (handler) DO NOTHING;
            SELECT f.claimed INTO v_claimed FROM feed_cursors f WHERE f.handler = p_handler FOR UPDATE;
        END IF;
        SELECT l.after, l.upto, l.tries, l.pos INTO v_after, v_upto, v_tries, v_pos FROM feed_leases l
            WHERE l.handler = p_handler AND l.lease_until < p_now ORDER BY l.after LIMIT 1;
        IF FOUND THEN  -- a dead consumer's batch, taken over as it was
            UPDATE feed_leases SET owner = p_owner, lease_until = p_until WHERE handler = p_handler AND after = v_after;
            v_n := p_max;
            v_taken := TRUE;
        ELSE
            v_after := v_claimed; v_tries := 0; v_pos := 0;
            IF p_skip <> '' THEN
                -- the visible end of the handler's changes, read first: every change at or
                -- below it has committed (commit order), so skipped ones up to it can be passed
                IF v_one IS NOT NULL THEN
                    SELECT MAX(c.seq) INTO v_top FROM changes c WHERE c.db = v_one AND c.seq > v_claimed;
                ELSE
                    SELECT MAX((SELECT MAX(c.seq) FROM changes c WHERE c.db = d.db AND c.seq > v_claimed))
                        INTO v_top FROM unnest(p_dbs) AS d(db);
                END IF;
                IF v_top IS NULL THEN
                    RETURN;
                END IF;
            END IF;
            IF v_one IS NOT NULL THEN
                """ + _claim_count(_ONE_DB) + """
            ELSE
                """ + _claim_count(_ANY_DB) + """
            END IF;
            IF v_count = 0 THEN
                IF v_top IS NOT NULL THEN  -- only skipped changes: pass them
                    UPDATE feed_cursors SET claimed = v_top, done = CASE WHEN EXISTS
                        (SELECT 1 FROM feed_leases l WHERE l.handler = p_handler) THEN done ELSE v_top END
                        WHERE handler = p_handler;
                END IF;
                RETURN;
            END IF;
            v_upto := CASE WHEN v_count < p_n AND v_top IS NOT NULL THEN v_top ELSE v_last END;
            INSERT INTO feed_leases (handler, after, upto, owner, lease_until, tries, pos)
                VALUES (p_handler, v_claimed, v_upto, p_owner, p_until, 0, 0);
            UPDATE feed_cursors SET claimed = v_upto WHERE handler = p_handler;
        END IF;
        IF v_one IS NOT NULL THEN
            """ + _claim_rows(_ONE_DB) + """
        ELSE
            """ + _claim_rows(_ANY_DB) + """
        END IF;
        IF NOT FOUND THEN
            RETURN QUERY SELECT v_taken, v_after, v_upto, v_tries, v_pos, NULL::BIGINT, NULL::TEXT, NULL::TEXT, NULL::TEXT, NULL::TEXT,
                NULL::SMALLINT, NULL::TEXT, NULL::BIGINT;
        END IF;
    END $$""",
    """CREATE OR REPLACE FUNCTION skyhub_feed_renew(
        p_handler TEXT, p_after BIGINT, p_owner TEXT, p_until BIGINT, p_tries INTEGER, p_pos BIGINT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM set_config('synchronous_commit', 'off', true);
        UPDATE feed_leases SET lease_until = p_until, tries = p_tries, pos = p_pos
            WHERE handler = p_handler AND after = p_after AND owner = p_owner;
        RETURN FOUND;
    END $$""",
    """CREATE OR REPLACE FUNCTION skyhub_feed_finish(p_handler TEXT, p_after BIGINT, p_owner TEXT)
    RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE
        v_claimed BIGINT; v_low BIGINT;
    BEGIN
        PERFORM set_config('synchronous_commit', 'off', true);
        SELECT f.claimed INTO v_claimed FROM feed_cursors f WHERE f.handler = p_handler FOR UPDATE;
        DELETE FROM feed_leases WHERE handler = p_handler AND after = p_after AND owner = p_owner;
        IF NOT FOUND THEN
            RETURN FALSE;
        END IF;
        SELECT MIN(l.after) INTO v_low FROM feed_leases l WHERE l.handler = p_handler;
        UPDATE feed_cursors SET done = COALESCE(v_low, v_claimed) WHERE handler = p_handler;
        RETURN TRUE;
    END $$""",
)


def _install_functions(cur: Any, dialect: Dialect) -> None:
    """PostgreSQL: the write and feed functions (SQLite runs the same steps in Python)."""
    if dialect.name == "postgres":
        for statement in POSTGRES_FUNCTIONS:
            cur.execute(statement, {})


# ---- search (migration 7) -------------------------------------------------------------------
# What a search reads of a document: its top-level text, caption and lastError (ledger/search.py).
SEARCH_FIELDS = ("text", "caption", "lastError")


def _sqlite_search_text(row: str) -> str:
    parts = [f"CASE WHEN json_type({row}.body, '$.{f}') = 'text' THEN json_extract({row}.body, '$.{f}') ELSE '' END"
             for f in SEARCH_FIELDS]
    return "trim(" + " || ' ' || ".join(parts) + ")"


# SQLite: an FTS5 table of the searchable text, its rows numbered by doc_search_keys (docs has
# no rowid), kept by triggers in the write's transaction. A write that changes none of the
# searched fields (a claim, a heartbeat, most moves) does not touch it.
_SQLITE_SEARCH_PUT = (
    "INSERT INTO doc_search_keys (db, id) SELECT NEW.db, NEW.id WHERE NEW.deleted = 0 AND ({new}) <> '' "
    "ON CONFLICT (db, id) DO NOTHING; "
    "INSERT INTO doc_search (rowid, text) SELECT k, ({new}) FROM doc_search_keys WHERE db = NEW.db AND id = NEW.id "
    "AND NEW.deleted = 0 AND ({new}) <> '';"
)
_SQLITE_SEARCH_DROP = (
    "DELETE FROM doc_search WHERE rowid = (SELECT k FROM doc_search_keys WHERE db = OLD.db AND id = OLD.id); "
    "DELETE FROM doc_search_keys WHERE db = OLD.db AND id = OLD.id;"
)
SQLITE_SEARCH = (
    "CREATE TABLE doc_search_keys (k INTEGER PRIMARY KEY, db TEXT NOT NULL, id TEXT NOT NULL, UNIQUE (db, id))",
    # unicode61 folds case; diacritics are kept, as PostgreSQL's "simple" configuration keeps them
    "CREATE VIRTUAL TABLE doc_search USING fts5(text, tokenize = 'unicode61 remove_diacritics 0', prefix = '2 3')",
    f"""CREATE TRIGGER docs_search_insert AFTER INSERT ON docs WHEN NEW.deleted = 0 AND ({_sqlite_search_text("NEW")}) <> '' BEGIN
        {_SQLITE_SEARCH_PUT.format(new=_sqlite_search_text("NEW"))}
    END""",
    f"""CREATE TRIGGER docs_search_update AFTER UPDATE OF body, deleted ON docs
    WHEN OLD.deleted <> NEW.deleted OR ({_sqlite_search_text("OLD")}) IS NOT ({_sqlite_search_text("NEW")}) BEGIN
        {_SQLITE_SEARCH_DROP}
        {_SQLITE_SEARCH_PUT.format(new=_sqlite_search_text("NEW"))}
    END""",
    f"""CREATE TRIGGER docs_search_delete AFTER DELETE ON docs BEGIN
        {_SQLITE_SEARCH_DROP}
    END""",
    "INSERT INTO doc_search_keys (db, id) SELECT db, id FROM docs d WHERE deleted = 0 AND (" + _sqlite_search_text("d") + ") <> ''",
    "INSERT INTO doc_search (rowid, text) SELECT k.k, (" + _sqlite_search_text("d") + ") FROM doc_search_keys k "
    "JOIN docs d ON d.db = k.db AND d.id = k.id",
)

# PostgreSQL: a GIN index on the text's tsvector (the index is kept by the write itself), and
# ids in byte order for prefixes (the primary key's collation may not be "C"). Letters and
# digits only reach the parser, so that a URL or a path is words, as in SQLite.
# The text index holds only the documents that have one of the searched fields (POSTGRES_SEARCHABLE,
# which a search names too, so that the planner may read the index): a job, a lease or a counter is
# written without touching it. Measured (benchmarks/bench_jobs.py): a GIN insert was 0.3 ms of the
# server's 0.55 ms per job write, for documents that have no text at all.
POSTGRES_SEARCHABLE = "body ?| ARRAY[" + ", ".join(f"'{f}'" for f in SEARCH_FIELDS) + "]"
POSTGRES_SEARCH_INDEX = (
    "CREATE INDEX IF NOT EXISTS docs_search ON docs USING GIN (to_tsvector('simple', skyhub_search_text(body))) "
    "WHERE deleted = 0 AND " + POSTGRES_SEARCHABLE
)
POSTGRES_SEARCH = (
    """CREATE OR REPLACE FUNCTION skyhub_search_text(body JSONB) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT regexp_replace(concat_ws(' ', """ + ", ".join(
        f"CASE WHEN jsonb_typeof(body -> '{f}') = 'string' THEN body ->> '{f}' END" for f in SEARCH_FIELDS
    ) + """), '[^[:alnum:]]+', ' ', 'g') $$""",
    POSTGRES_SEARCH_INDEX,
    'CREATE INDEX IF NOT EXISTS docs_by_id_bytes ON docs (db, id COLLATE "C") WHERE deleted = 0',
)


def _search_index(cur: Any, dialect: Dialect) -> None:
    """Index what a search reads of the documents already there, and keep it in every write's transaction.
    Measured on 100,000 documents (benchmarks/bench_search.py, a shared 2-core machine): 1.0 s on SQLite,
    1.7 s on PostgreSQL, once, when this version first opens the database."""
    for statement in POSTGRES_SEARCH if dialect.name == "postgres" else SQLITE_SEARCH:
        cur.execute(statement, {})
    if dialect.name == "postgres":
        # the planner's statistics for the new expression: without them it read a search through an
        # unrelated partial index and filtered every document (42 ms at 5,000 documents; 0.6 ms after)
        _analyze_if_filled(cur)


def _analyze_if_filled(cur: Any) -> None:
    """PostgreSQL: the planner's statistics of the documents, when there are some. Never of an empty
    table: the planner trusts "no rows" from then on, and a plan cached while the table was small (the
    write function's head read) scanned the whole table at every write for the life of the connection
    (3,000 creates into a new database: 2,866 sequential scans, 4 M rows read). Without statistics it
    assumes a table of some size, and reads by key; autovacuum analyzes once rows have come."""
    cur.execute("SELECT EXISTS (SELECT 1 FROM docs)", {})
    if cur.fetchone()[0]:
        cur.execute("ANALYZE docs", {})


def _search_index_partial(cur: Any, dialect: Dialect) -> None:
    """PostgreSQL: the text index again, over only the documents that have a searched field (version 7
    indexed every live one); and fresh statistics (version 7 took them of an empty table, see above)."""
    if dialect.name == "postgres":
        cur.execute("DROP INDEX IF EXISTS docs_search", {})
        cur.execute(POSTGRES_SEARCH_INDEX, {})
        _analyze_if_filled(cur)


@dataclass(frozen=True)
class Migration:
    """One schema version: its statements (with fragments) and any steps that need code."""

    version: int
    why: str
    statements: tuple[str, ...]
    steps: tuple[Step, ...] = ()


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "documents, the change log, feed cursors and batch leases, tick runs", (
        """CREATE TABLE docs (
            db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL, body {json} NOT NULL,
            deleted {flag} NOT NULL DEFAULT 0, PRIMARY KEY (db, id)){clustered}""",
        """CREATE TABLE changes (
            seq {seq_key}, db TEXT NOT NULL, id TEXT NOT NULL, rev TEXT NOT NULL,
            body TEXT NOT NULL, deleted {flag} NOT NULL, actor TEXT NOT NULL, at {bigint} NOT NULL)""",
        "CREATE INDEX changes_by_doc ON changes (db, id, seq)",
        "CREATE TABLE feed_cursors (handler TEXT PRIMARY KEY, done {bigint} NOT NULL, claimed {bigint} NOT NULL)",
        """CREATE TABLE feed_leases (
            handler TEXT NOT NULL, after {bigint} NOT NULL, upto {bigint} NOT NULL, owner TEXT NOT NULL,
            lease_until {bigint} NOT NULL, tries INTEGER NOT NULL, pos {bigint} NOT NULL,
            PRIMARY KEY (handler, after))""",
        """CREATE TABLE tick_runs (
            tick TEXT NOT NULL, scheduled_at {bigint} NOT NULL, owner TEXT NOT NULL,
            started_at {bigint} NOT NULL, finished_at {bigint}, outcome TEXT, error TEXT,
            PRIMARY KEY (tick, scheduled_at))""",
    )),
    Migration(2, "keys that may be used once (request nonces)", (
        "CREATE TABLE once_keys (key TEXT PRIMARY KEY, expires_at {bigint} NOT NULL)",
        "CREATE INDEX once_keys_by_expiry ON once_keys (expires_at)",
    )),
    Migration(3, "the feed reads a handler's databases in seq order (without this it sorts them all)", (
        "CREATE INDEX IF NOT EXISTS changes_by_db ON changes (db, seq)",
    )),
    Migration(4, "indexes are declared: the status index joins the schema, every other index is listed", (
        "CREATE INDEX IF NOT EXISTS " + STATUS_INDEX + " ON docs (db, {status}, id) WHERE deleted = 0",
        """CREATE TABLE doc_indexes (
            db TEXT NOT NULL, field TEXT NOT NULL, name TEXT NOT NULL, origin TEXT NOT NULL,
            created_at {bigint} NOT NULL, PRIMARY KEY (db, field))""",
    ), steps=(_drop_read_made_indexes,)),
    Migration(5, "documents counted by database, kind and status, in the write's transaction (no scan to count)", (
        """CREATE TABLE doc_counts (
            db TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL, stripe INTEGER NOT NULL, n {bigint} NOT NULL,
            PRIMARY KEY (db, kind, status, stripe)){clustered}""",
    ), steps=(_count_documents,)),
    Migration(6, "PostgreSQL: one round trip per write, feed claim, renew and finish (server-side functions)", (),
              steps=(_install_functions,)),
    Migration(7, "search: ids by prefix and the words of text, caption and lastError, indexed in the write's transaction",
              (), steps=(_search_index,)),
    Migration(8, "when each document was last written (from the change log), indexed by status: lists by time", (
        "ALTER TABLE docs ADD COLUMN written {bigint} NOT NULL DEFAULT 0",
        "UPDATE docs SET written = COALESCE((SELECT MAX(c.at) FROM changes c WHERE c.db = docs.db AND c.id = docs.id), 0)",
        "CREATE INDEX IF NOT EXISTS " + TIME_INDEX + " ON docs (db, {status}, written, id) WHERE deleted = 0",
    ), steps=(_install_functions,)),  # PostgreSQL's write function sets the column from now on
    Migration(9, "PostgreSQL: the text index holds only documents with text, caption or lastError; statistics of a "
              "filled table only; an idle feed claim locks nothing; a notification names its schema", (), steps=(_search_index_partial, _install_functions)),
)


def migration_statements(migration: Migration, dialect: Dialect) -> list[str]:
    """The migration's statements in ``dialect``'s SQL."""
    return [dialect.compile(s, status=dialect.index_element("status")) for s in migration.statements]


def migrate(cur: Any, dialect: Dialect, q: Queries) -> list[int]:
    """Apply every migration the database has not had, in the caller's transaction (which
    holds the schema lock); the versions applied."""
    cur.execute(q.version_table, {})
    cur.execute(q.version, {})
    current = cur.fetchone()[0] or 0
    applied = []
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        for statement in migration_statements(migration, dialect):
            cur.execute(statement, {})
        for step in migration.steps:
            step(cur, dialect)
        cur.execute(q.version_set, {"version": migration.version})
        log.info("%s: migrated to version %d (%s)", dialect.name, migration.version, migration.why,
                 extra={"version": migration.version})
        applied.append(migration.version)
    return applied


# ---- field indexes -------------------------------------------------------------------------
def index_name(db: str, field: str) -> str:
    """The name of the index on ``field`` of the documents of ``db``.

    Readable, at most 59 characters (PostgreSQL cuts names at 63), and distinct for every
    (db, field): SQLite compares names without case, so the hash of the exact pair tells
    ``A`` from ``a``, and long names that share a prefix apart.
    """
    digest = hashlib.blake2b(f"{db}\0{field}".encode(), digest_size=6).hexdigest()
    return f"ix_{db[:20].replace('-', '_')}_{field[:20].lower()}_{digest}"


def create_index_sql(dialect: Dialect, db: str, field: str) -> str:
    """One index per (db, field), partial on the database: a write to another database does
    not touch it. ``db`` and ``field`` are checked names (letters, digits, '_', '-')."""
    return (
        f'CREATE INDEX IF NOT EXISTS "{index_name(db, field)}" ON docs ({dialect.index_element(field)}, id) '
        f"WHERE db = '{db}' AND deleted = 0"
    )


def drop_index_sql(db: str, field: str) -> str:
    """The statement that drops the index of (db, field), if it exists."""
    return f'DROP INDEX IF EXISTS "{index_name(db, field)}"'


def indexed_query(dialect: Dialect, db: str, field: str) -> str:
    """The page query that the index of (db, field) answers. The database is written into the
    text so that the planner can prove the partial index applies (with ``db = $1`` a generic
    PostgreSQL plan cannot)."""
    return dialect.compile(
        "SELECT id, rev, {body} FROM docs{hint} WHERE db = '" + db + "' AND deleted = 0 AND " + dialect.match(field)
        + " AND id > :after ORDER BY id LIMIT :n",
        hint=dialect.hint(index_name(db, field)),
    )


def status_query(dialect: Dialect) -> str:
    """The page query that the built-in status index answers."""
    return dialect.compile(
        "SELECT id, rev, {body} FROM docs{hint} WHERE db = :db AND " + dialect.match("status")
        + " AND deleted = 0 AND id > :after ORDER BY id LIMIT :n",
        hint=dialect.hint(STATUS_INDEX),
    )


def time_query(dialect: Dialect, newest: bool) -> str:
    """A page of one status by when its documents were last written, after the cursor (written, id):
    the keyset is the index's own order, so a page reads only its rows (plus ``:skip``, when jumping)."""
    order, beyond = ("DESC", "<") if newest else ("ASC", ">")
    return dialect.compile(
        "SELECT id, rev, {body}, written FROM docs{hint} WHERE db = :db AND " + dialect.match("status")
        + f" AND deleted = 0 AND (written, id) {beyond} (:written, :after)"
        + f" ORDER BY written {order}, id {order} LIMIT :n OFFSET :skip",
        hint=dialect.hint(TIME_INDEX),
    )


def scan_query(dialect: Dialect, field: str) -> str:
    """Matching documents among those with ``after < id <= last`` (a window of the database)."""
    return dialect.compile(
        "SELECT id, rev, {body} FROM docs WHERE db = :db AND id > :after AND id <= :last AND deleted = 0 AND "
        + dialect.match(field) + " ORDER BY id LIMIT :n"
    )


# ---- every fixed statement -----------------------------------------------------------------
_CHANGE = "seq, db, id, rev, body, deleted, actor, at"


@dataclass(frozen=True)
class Queries:
    """Every fixed statement the SQL store runs, by name; ``compile_queries`` makes a dialect's."""

    get: str = "SELECT rev, {body}, deleted FROM docs WHERE db = :db AND id = :id"
    has_db: str = "SELECT 1 FROM docs WHERE db = :db LIMIT 1"
    head: str = "SELECT rev, {body}, deleted FROM docs WHERE db = :db AND id = :id{for_update}"
    head_rev: str = "SELECT rev, deleted FROM docs WHERE db = :db AND id = :id"
    insert_doc: str = (
        "INSERT INTO docs (db, id, rev, body, deleted, written) VALUES (:db, :id, :rev, :body, :deleted, :at) "
        "ON CONFLICT (db, id) DO NOTHING"
    )
    update_doc: str = "UPDATE docs SET rev = :rev, body = :body, deleted = :deleted, written = :at WHERE db = :db AND id = :id"
    append_change: str = (
        "INSERT INTO changes (db, id, rev, body, deleted, actor, at) VALUES (:db, :id, :rev, :body, :deleted, :actor, :at) "
        "RETURNING seq"
    )
    history: str = "SELECT " + _CHANGE + " FROM changes WHERE db = :db AND id = :id ORDER BY seq"
    # the feed reads one database far more often than several: "db = :db" uses changes_by_db
    # (4 us at 50k changes), where "db IN (...)" reads the log from the cursor on (400-600 us)
    changes: str = "SELECT " + _CHANGE + " FROM changes WHERE seq > :after ORDER BY seq LIMIT :n"
    changes_of: str = "SELECT " + _CHANGE + " FROM changes WHERE db = :db AND seq > :after ORDER BY seq LIMIT :n"
    changes_in: str = (
        "SELECT " + _CHANGE + " FROM changes WHERE seq > :after AND db IN (SELECT value FROM json_each(:dbs)) "
        "ORDER BY seq LIMIT :n"
    )
    feed_of: str = (
        "SELECT " + _CHANGE + " FROM changes WHERE db = :db AND seq > :after AND seq <= :upto AND actor <> :skip "
        "ORDER BY seq LIMIT :n"
    )
    feed_in: str = (
        "SELECT " + _CHANGE + " FROM changes WHERE seq > :after AND seq <= :upto AND actor <> :skip "
        "AND db IN (SELECT value FROM json_each(:dbs)) ORDER BY seq LIMIT :n"
    )
    feed_top_of: str = "SELECT MAX(seq) FROM changes WHERE db = :db AND seq > :after"
    feed_next_of: str = "SELECT 1 FROM changes WHERE db = :db AND seq > :after AND actor <> :skip LIMIT 1"
    head_seq: str = "SELECT COALESCE(MAX(seq), 0) FROM changes"
    pending_of: str = "SELECT COUNT(*) FROM (SELECT 1 FROM changes WHERE db = :db AND seq > :after LIMIT :n) p"
    scan_window: str = (
        "SELECT MAX(id), COUNT(*) FROM (SELECT id FROM docs WHERE db = :db AND id > :after ORDER BY id LIMIT :n) w"
    )
    cursor_make: str = "INSERT INTO feed_cursors (handler, done, claimed) VALUES (:handler, 0, 0) ON CONFLICT (handler) DO NOTHING"
    cursor_lock: str = "SELECT done, claimed FROM feed_cursors WHERE handler = :handler{for_update}"
    cursor_get: str = "SELECT done, claimed FROM feed_cursors WHERE handler = :handler"
    cursor_claimed: str = "UPDATE feed_cursors SET claimed = :upto WHERE handler = :handler"
    cursor_done: str = "UPDATE feed_cursors SET done = :done WHERE handler = :handler"
    # a claim that found only skipped changes passes them: claimed moves, and done too when no
    # batch is in flight (else the finish of the last one moves it)
    cursor_pass: str = (
        "UPDATE feed_cursors SET claimed = :upto, done = CASE WHEN EXISTS "
        "(SELECT 1 FROM feed_leases WHERE handler = :handler) THEN done ELSE :upto END WHERE handler = :handler"
    )
    lease_expired: str = (
        "SELECT after, upto, tries, pos FROM feed_leases WHERE handler = :handler AND lease_until < :now ORDER BY after LIMIT 1"
    )
    lease_take: str = "UPDATE feed_leases SET owner = :owner, lease_until = :until WHERE handler = :handler AND after = :after"
    lease_make: str = (
        "INSERT INTO feed_leases (handler, after, upto, owner, lease_until, tries, pos) "
        "VALUES (:handler, :after, :upto, :owner, :until, 0, 0)"
    )
    lease_renew: str = (
        "UPDATE feed_leases SET lease_until = :until, tries = :tries, pos = :pos "
        "WHERE handler = :handler AND after = :after AND owner = :owner"
    )
    lease_drop: str = "DELETE FROM feed_leases WHERE handler = :handler AND after = :after AND owner = :owner"
    lease_low: str = "SELECT MIN(after) FROM feed_leases WHERE handler = :handler"
    leases: str = "SELECT after, upto, owner, lease_until, tries FROM feed_leases WHERE handler = :handler ORDER BY after"
    tick_claim: str = (
        "INSERT INTO tick_runs (tick, scheduled_at, owner, started_at) VALUES (:tick, :at, :owner, :now) "
        "ON CONFLICT (tick, scheduled_at) DO NOTHING"
    )
    tick_trim: str = (
        "DELETE FROM tick_runs WHERE tick = :tick AND scheduled_at < "
        "(SELECT scheduled_at FROM tick_runs WHERE tick = :tick ORDER BY scheduled_at DESC LIMIT 1 OFFSET :kept)"
    )
    tick_finish: str = (
        "UPDATE tick_runs SET finished_at = :now, outcome = :outcome, error = :error WHERE tick = :tick AND scheduled_at = :at"
    )
    tick_runs: str = (
        "SELECT tick, scheduled_at, owner, started_at, finished_at, outcome, error FROM tick_runs "
        "ORDER BY scheduled_at DESC, tick LIMIT :n"
    )
    tick_runs_of: str = (
        "SELECT tick, scheduled_at, owner, started_at, finished_at, outcome, error FROM tick_runs WHERE tick = :tick "
        "ORDER BY scheduled_at DESC, tick LIMIT :n"
    )
    once_purge: str = "DELETE FROM once_keys WHERE expires_at < :now"
    once_use: str = "INSERT INTO once_keys (key, expires_at) VALUES (:key, :expires) ON CONFLICT (key) DO NOTHING"
    indexes: str = "SELECT db, field, name, origin, created_at FROM doc_indexes ORDER BY db, field"
    index_add: str = (
        "INSERT INTO doc_indexes (db, field, name, origin, created_at) VALUES (:db, :field, :name, :origin, :now) "
        "ON CONFLICT (db, field) DO NOTHING"
    )
    index_drop: str = "DELETE FROM doc_indexes WHERE db = :db AND field = :field"
    counts: str = (
        "SELECT db, kind, status, SUM(n) FROM doc_counts GROUP BY db, kind, status HAVING SUM(n) <> 0 ORDER BY db, kind, status"
    )
    counts_of: str = (
        "SELECT db, kind, status, SUM(n) FROM doc_counts WHERE db = :db GROUP BY db, kind, status HAVING SUM(n) <> 0 "
        "ORDER BY db, kind, status"
    )
    version_table: str = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
    version: str = "SELECT MAX(version) FROM schema_version"
    version_set: str = "INSERT INTO schema_version (version) VALUES (:version)"
    ping: str = "SELECT 1"


POSTGRES_TEXTS = {
    # sequence numbers in commit order: see ledger/postgres.py; the NOTIFY wakes other processes
    "append_change": (
        "WITH c AS (INSERT INTO changes (db, id, rev, body, deleted, actor, at) "
        "VALUES (:db, :id, :rev, :body, :deleted, :actor, :at) RETURNING seq) "
        "SELECT seq, pg_notify(:channel, seq::text || ' ' || :db || ' ' || :actor || ' ' || current_schema()) FROM c"
    ),
    "changes_in": "SELECT " + _CHANGE + " FROM changes WHERE seq > :after AND db = ANY(:dbs) ORDER BY seq LIMIT :n",
    "feed_in": (
        "SELECT " + _CHANGE + " FROM changes WHERE seq > :after AND seq <= :upto AND actor <> :skip AND db = ANY(:dbs) "
        "ORDER BY seq LIMIT :n"
    ),
}


def compile_queries(dialect: Dialect, overrides: dict[str, str] | None = None) -> Queries:
    """Every statement of ``Queries`` in ``dialect``'s text, with its own where it differs."""
    texts = {f.name: (overrides or {}).get(f.name, f.default) for f in fields(Queries)}
    return Queries(**{name: dialect.compile(text) for name, text in texts.items()})  # type: ignore[arg-type]


def declared_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Declared (db, field) pairs that need an index of their own (status has one for all)."""
    return [(db, f) for db, f in dict.fromkeys(pairs) if f != "status"]

