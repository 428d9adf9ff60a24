"""Indexes are declared, never a side effect of a read; the planner uses them; a query on any
other field is a bounded scan that says so. Every local backend."""

from __future__ import annotations

import re
import secrets

import psycopg
import pytest
from psycopg import sql as pgsql

from ledger import Invalid, Machine, NotFound, Rules
from ledger.schema import SQLITE, STATUS_INDEX, index_name, indexed_query, status_query
from ledger.sql import SCAN_ROWS
from tests.conftest import open_backend


def rules(*pairs):
    r = Rules()
    for db, field in pairs:
        r.index(db, field)
    return r


def index_names(store):
    """The indexes on docs, as the database itself lists them."""
    if store.dialect is SQLITE:  # a file or in memory: through the store's own connection
        with store._op() as cur:
            return {r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'docs'").fetchall()}
    with psycopg.connect(store.url) as conn:
        return {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'docs'")}


def plan(store, sql, args):
    """The plan of ``sql`` as the store runs it (PostgreSQL: the generic plan of a prepared statement)."""
    if store.dialect is SQLITE:
        with store._op() as cur:
            return "\n".join(str(r[-1]) for r in cur.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall())
    names: list[str] = []

    def number(m):  # %(name)s -> $n, as the server sees the store's prepared statement
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    prepared = re.sub(r"%\((\w+)\)s", number, sql).replace("%%", "%")
    with psycopg.connect(store.url, autocommit=True) as conn:
        conn.execute("ANALYZE docs")
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET plan_cache_mode = force_generic_plan")  # what a statement run often gets
        conn.execute(f"PREPARE page AS {prepared}")
        values = pgsql.SQL(", ").join(pgsql.Literal(args[n]) for n in names)
        text = "\n".join(r[0] for r in conn.execute(pgsql.SQL("EXPLAIN EXECUTE page ({})").format(values)))
        assert "$" in text  # a generic plan: it holds for every value
        return text


def dialect(store):
    return store.dialect


def fill(store, n=300, db="tasks"):
    for i in range(n):
        store.put(db, {"status": f"s{i % 30}", "owner": f"o{i % 20}", "n": i}, f"t{i:04d}", actor="user:ana")


def test_reads_never_make_indexes(make_store):
    store = make_store(rules=Rules())
    fill(store, 20)
    before = index_names(store)
    for i in range(200):
        page = store.query("tasks", f"field{i}", "x")
        assert page.docs == [] and page.scanned
    assert index_names(store) == before
    assert [(i.db, i.field) for i in store.indexes()] == [("*", "status")]


def test_declared_indexes_are_made_at_open_and_used_by_the_planner(make_store):
    store = make_store(rules=rules(("tasks", "owner"), ("tasks", "status")))
    fill(store)
    assert index_name("tasks", "owner") in index_names(store)
    page = store.query("tasks", "owner", "o3", limit=5)
    assert not page.scanned
    assert [d["_id"] for d in page.docs] == ["t0003", "t0023", "t0043", "t0063", "t0083"]
    d = dialect(store)
    args = {"after": "", "n": 6, **d.key_args("owner", "o3")}
    assert index_name("tasks", "owner") in plan(store, indexed_query(d, "tasks", "owner"), args)
    args = {"db": "tasks", "after": "", "n": 6, **d.key_args("status", "s3")}
    assert STATUS_INDEX in plan(store, status_query(d), args)
    listed = {(i.db, i.field): i.origin for i in store.indexes()}
    assert listed == {("*", "status"): "builtin", ("tasks", "owner"): "declared"}


def test_a_machine_declares_the_fields_its_ticks_query(make_store):
    machine = Machine("orders", kind="order", start=["new"], edges=[], indexes=["day"])
    store = make_store(rules=Rules([machine]))
    assert ("orders", "day") in [(i.db, i.field) for i in store.indexes()]
    store.put("orders", {"kind": "order", "status": "new", "day": "2024-05-01"}, "o1", actor="admin")
    page = store.query("orders", "day", "2024-05-01")
    assert [d["_id"] for d in page.docs] == ["o1"] and not page.scanned


def test_a_query_on_an_undeclared_field_is_a_bounded_scan_with_a_cursor(make_store, monkeypatch):
    import ledger.sql

    monkeypatch.setattr(ledger.sql, "SCAN_ROWS", 50)
    store = make_store(rules=Rules())
    fill(store, 180)
    seen, after, pages = [], None, 0
    while True:
        page = store.query("tasks", "owner", "o7", limit=100, after=after)
        assert page.scanned
        seen += [d["_id"] for d in page.docs]
        pages += 1
        if page.next is None:
            break
        after = page.next
    assert seen == [f"t{i:04d}" for i in range(7, 180, 20)]
    assert pages == 4  # 180 documents, 50 examined a page
    page = store.query("tasks", "owner", "o7", limit=2)
    assert [d["_id"] for d in page.docs] == ["t0007", "t0027"] and page.next == "t0027"


def test_the_scan_bound_is_ten_thousand():
    assert SCAN_ROWS == 10_000


def test_admin_indexes_persist_for_every_process_and_restart(make_store):
    first = make_store(rules=Rules())
    fill(first, 40)
    made = first.add_index("tasks", "owner")
    assert (made.db, made.field, made.origin) == ("tasks", "owner", "admin") and made.created_at
    assert first.add_index("tasks", "owner") == made  # idempotent
    assert index_name("tasks", "owner") in index_names(first)
    assert not first.query("tasks", "owner", "o1").scanned
    other = make_store(rules=Rules())  # another process, or a restart
    assert ("tasks", "owner", "admin") in [(i.db, i.field, i.origin) for i in other.indexes()]
    page = other.query("tasks", "owner", "o1")
    assert not page.scanned and [d["_id"] for d in page.docs] == ["t0001", "t0021"]
    other.drop_index("tasks", "owner")
    assert index_name("tasks", "owner") not in index_names(first)
    first.catalog.forget()  # as if its list of indexes were old: it reads them again
    page = first.query("tasks", "owner", "o1")
    assert page.scanned and [d["_id"] for d in page.docs] == ["t0001", "t0021"]
    with pytest.raises(NotFound):
        other.drop_index("tasks", "owner")


def test_a_query_naming_an_index_dropped_elsewhere_still_answers(make_store):
    first = make_store(rules=Rules())
    fill(first, 40)
    first.add_index("tasks", "owner")
    first.query("tasks", "owner", "o1")
    make_store(rules=Rules()).drop_index("tasks", "owner")
    page = first.query("tasks", "owner", "o1")  # its list still names the index
    assert [d["_id"] for d in page.docs] == ["t0001", "t0021"]


def test_declared_and_builtin_indexes_cannot_be_dropped(make_store):
    store = make_store(rules=rules(("tasks", "owner")))
    with pytest.raises(Invalid, match="declared by the code"):
        store.drop_index("tasks", "owner")
    with pytest.raises(Invalid, match="every database"):
        store.drop_index("tasks", "status")
    assert store.add_index("tasks", "status").origin == "builtin"
    with pytest.raises(Invalid):
        store.add_index("tasks", "no-such field")
    with pytest.raises(Invalid):
        store.add_index("Bad DB", "owner")


def test_index_names_never_collide(make_store):
    long_db = "d" * 64
    names = {index_name(db, f) for db in ("tasks", long_db, long_db[:-1] + "e") for f in ("A", "a", "f" * 64, "f" * 63 + "g")}
    assert len(names) == 12
    assert all(len(n) <= 63 for n in names)
    store = make_store(rules=rules(("tasks", "A"), ("tasks", "a"), (long_db, "f" * 64)))
    store.put("tasks", {"A": 1, "a": 2}, "x", actor="user:ana")
    store.put("tasks", {"A": 2, "a": 1}, "y", actor="user:ana")
    store.put(long_db, {"f" * 64: "v"}, "z", actor="user:ana")
    assert {index_name("tasks", "A"), index_name("tasks", "a"), index_name(long_db, "f" * 64)} <= index_names(store)
    assert [d["_id"] for d in store.query("tasks", "A", 1).docs] == ["x"]
    assert [d["_id"] for d in store.query("tasks", "a", 1).docs] == ["y"]
    assert [d["_id"] for d in store.query(long_db, "f" * 64, "v").docs] == ["z"]


def test_keys_match_by_json_type_alike_on_every_backend(make_store):
    store = make_store(rules=rules(("vals", "v")))
    for i, v in enumerate([1, 1.0, True, "1", {"a": 1}, 0, False, '{"a":1}', [1]]):
        store.put("vals", {"v": v, "w": v}, f"d{i}", actor="user:ana")
    for field in ("v", "w"):  # indexed, scanned
        got = {repr(k): [d["_id"] for d in store.query("vals", field, k).docs] for k in (1, True, "1", 0, False, '{"a":1}')}
        assert got == {
            "1": ["d0", "d1"], "True": ["d2"], "'1'": ["d3"], "0": ["d5"], "False": ["d6"], "'{\"a\":1}'": ["d7"],
        }


def test_indexes_survive_a_reopen_with_fewer_declarations(tmp_path, make_store):
    store = make_store(rules=rules(("tasks", "owner")))
    fill(store, 10)
    again = make_store(rules=Rules())
    assert ("tasks", "owner") in [(i.db, i.field) for i in again.indexes()]
    assert not again.query("tasks", "owner", "o1").scanned
    again.drop_index("tasks", "owner")  # no longer declared here: an admin may drop it


def test_an_indexed_value_too_long_to_index_is_refused_alike(make_store):
    store = make_store(rules=rules(("tasks", "owner")))
    for field in ("status", "owner"):
        with pytest.raises(Invalid, match="indexed"):
            store.put("tasks", {field: "x" * 3000}, "big", actor="user:ana")
        with pytest.raises(Invalid, match="indexed"):
            store.put("tasks", {field: {"nested": ["y" * 600, "z" * 600]}}, "big", actor="user:ana")
    store.put("tasks", {"other": "x" * 3000, "owner": "x" * 900}, "fine", actor="user:ana")
    assert store.history("tasks", "big") == []


def test_open_store_takes_pool_settings(backend_url):
    store = open_backend(backend_url, Rules(), pool_size=2, statement_timeout=3, connect_timeout=2)
    try:
        store.put("notes", {"v": 1}, "n", actor="user:ana")
        assert store.ping(1.0) < 1.0
    finally:
        store.close()


def test_a_declared_index_that_cannot_be_made_does_not_stop_a_start(make_store):
    first = make_store(rules=Rules())
    noise = secrets.token_urlsafe(6000)  # 8 kB that do not compress
    first.put("tasks", {"owner": noise}, "huge", actor="user:ana")  # not indexed yet: allowed
    first.put("tasks", {"owner": "ana"}, "t1", actor="user:ana")
    store = make_store(rules=rules(("tasks", "owner")))
    page = store.query("tasks", "owner", "ana")
    assert [d["_id"] for d in page.docs] == ["t1"]
    if store.url.startswith("postgres"):  # PostgreSQL cannot index an 8 kB value: the field scans
        assert page.scanned and ("tasks", "owner") not in [(i.db, i.field) for i in store.indexes()]
