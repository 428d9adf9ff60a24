"""Bad input is the client's error (Invalid, with a sentence), alike on every backend, and
nothing is written; and nothing the store holds can break a reader."""

from __future__ import annotations

import json

import psycopg
import pytest

from ledger import SYSTEM, Feed, Handler, Invalid, Rules
from ledger.document import MAX_DEPTH, MAX_KEYS
from ledger.schema import SQLITE


def nested(depth):
    doc = leaf = {}
    for _ in range(depth - 1):
        leaf["a"] = {}
        leaf = leaf["a"]
    return doc


def depth_of(doc):
    return 1 + max((depth_of(v) for v in doc.values() if isinstance(v, dict)), default=0)


def assert_nothing_written(store, db="notes", id="x"):
    assert store.history(db, id) == []


def test_depth_limit_is_named_and_nothing_is_written(store):
    store.put("notes", nested(MAX_DEPTH), "ok", actor="user:ana")
    for depth in (MAX_DEPTH + 1, 256, 5000):
        with pytest.raises(Invalid) as err:
            store.put("notes", nested(depth), "x", actor="user:ana")
        assert f"{MAX_DEPTH} levels" in err.value.reason
    with pytest.raises(Invalid):
        store.put("notes", {"list": [[[[{"a": nested(MAX_DEPTH)}]]]]}, "x", actor="user:ana")
    assert_nothing_written(store)


def test_key_count_limit_is_named(store):
    store.put("notes", {f"k{i}": i for i in range(MAX_KEYS)}, "ok", actor="user:ana")
    with pytest.raises(Invalid) as err:
        store.put("notes", {"a": {f"k{i}": i for i in range(MAX_KEYS // 2)}, "b": {f"k{i}": i for i in range(MAX_KEYS // 2)}},
                  "x", actor="user:ana")
    assert "10,000 keys" in err.value.reason
    assert_nothing_written(store)


@pytest.mark.parametrize("doc", [
    {"v": "\ud800"}, {"\ud800": 1}, {"v": ["ok", {"deep": "x\udfff"}]},
    {"v": "a\u0000b"}, {"a\u0000": 1}, {"v": [{"w": "\u0000"}]},
], ids=["surrogate-value", "surrogate-key", "surrogate-nested", "nul-value", "nul-key", "nul-nested"])
def test_lone_surrogates_and_nul_are_refused(store, doc):
    with pytest.raises(Invalid) as err:
        store.put("notes", doc, "x", actor="user:ana")
    assert "surrogate" in err.value.reason or "NUL" in err.value.reason
    assert_nothing_written(store)


@pytest.mark.parametrize("doc_id", ["\ud800", "a\u0000", "x\udfffy"])
def test_bad_ids_are_refused(store, doc_id):
    with pytest.raises(Invalid):
        store.put("notes", {"v": 1}, doc_id, actor="user:ana")
    with pytest.raises(Invalid):
        store.get("notes", doc_id)
    with pytest.raises(Invalid):
        store.history("notes", doc_id)


def test_big_numbers_in_documents_round_trip_and_huge_ones_are_refused(store):
    store.put("notes", {"big": 2**70, "neg": -(2**70)}, "n", actor="user:ana")
    assert store.get("notes", "n")["big"] == 2**70
    with pytest.raises(Invalid):
        store.put("notes", {"v": 10**5000}, "x", actor="user:ana")
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(Invalid):
            store.put("notes", {"v": bad}, "x", actor="user:ana")
    assert_nothing_written(store)


@pytest.mark.parametrize("key", [2**70, -(2**70), 10**5000, float("nan"), float("inf"), "\ud800", "a\u0000", None, [1], {"a": 1}],
                         ids=["2^70", "-2^70", "5000-digits", "nan", "inf", "surrogate", "nul", "null", "list", "object"])
@pytest.mark.parametrize("field", ["status", "owner"])
def test_bad_query_keys_are_refused(store, key, field):
    with pytest.raises(Invalid) as err:
        store.query("tasks", field, key)
    assert "query key" in err.value.reason


def test_largest_integer_keys_are_fine(store):
    store.put("tasks", {"n": 2**63 - 1, "status": -(2**63)}, "t", actor="user:ana")
    assert [d["_id"] for d in store.query("tasks", "n", 2**63 - 1).docs] == ["t"]
    assert [d["_id"] for d in store.query("tasks", "status", -(2**63)).docs] == ["t"]


@pytest.mark.parametrize("after", ["\ud800", "a\u0000", "x" * 600, 5, b"t"])
def test_bad_cursors_are_refused(store, after):
    for field in ("status", "owner"):
        with pytest.raises(Invalid) as err:
            store.query("tasks", field, "x", after=after)
        assert "cursor" in err.value.reason


@pytest.mark.parametrize("since", [-1, 2**63, 2**70, 10**5000, "5", 1.5, None, True],
                         ids=["-1", "2^63", "2^70", "5000-digits", "text", "float", "null", "bool"])
def test_since_out_of_range_is_refused(store, since):
    with pytest.raises(Invalid) as err:
        store.changes(since)
    assert "since" in err.value.reason


def test_largest_since_is_fine(store):
    assert store.changes(2**63 - 1) == []


@pytest.mark.parametrize("dbs", [["Bad"], ["ok", "a\u0000"], ["\ud800"]])
def test_bad_database_lists_are_refused(store, dbs):
    with pytest.raises(Invalid):
        store.changes(0, dbs=dbs)


@pytest.mark.parametrize("key", ["a\u0000", "\ud800", "", "x" * 600])
def test_bad_once_keys_are_refused(store, key):
    with pytest.raises(Invalid):
        store.use_once(key, 1)


# ---- what is already stored cannot break a reader --------------------------------------------
def plant(store, db, doc_id, body_text):
    """Write a row as an older version could have (no limits), straight into the database."""
    rev = "1-0000000000000000"
    if store.dialect is SQLITE:  # a file or in memory: through the store's own connection
        with store._tx() as cur:
            cur.execute("INSERT INTO docs (db, id, rev, body, deleted) VALUES (?, ?, ?, ?, 0)", (db, doc_id, rev, body_text))
            cur.execute("INSERT INTO changes (db, id, rev, body, deleted, actor, at) VALUES (?, ?, ?, ?, 0, 'user:old', 0)",
                        (db, doc_id, rev, body_text))
    else:
        with psycopg.connect(store.url, autocommit=True) as conn:
            conn.execute("INSERT INTO docs (db, id, rev, body, deleted) VALUES (%s, %s, %s, %s::jsonb, 0)", (db, doc_id, rev, body_text))
            conn.execute("INSERT INTO changes (db, id, rev, body, deleted, actor, at) VALUES (%s, %s, %s, %s, 0, 'user:old', 0)",
                         (db, doc_id, rev, body_text))


@pytest.mark.parametrize("depth", [256, 1500])  # 1500: past what json.loads can read (SQLite stores up to 2000)
def test_a_too_deep_document_already_stored_does_not_break_readers(make_store, depth):
    store = make_store(rules=Rules())
    text = '{"status":"open","a":' + '{"a":' * (depth - 2) + "{}" + "}" * (depth - 1)  # depth levels
    plant(store, "notes", "deep", text)
    store.put("notes", {"status": "open"}, "after", actor="user:ana")
    got = store.get("notes", "deep")
    assert "_truncated" in got and depth_of(got) <= MAX_DEPTH
    assert [d["_id"] for d in store.query("notes", "status", "open").docs] == ["after", "deep"]
    assert len(store.history("notes", "deep")) == 1
    json.dumps(store.changes(0)[0].doc)  # serializable
    seen = []
    feed = Feed(store, [Handler("reader", ["notes"], lambda change, ctx: seen.append(change.id))], clock=SYSTEM)
    feed.drain()
    assert seen == ["deep", "after"]  # the feed goes past it
    with pytest.raises(Invalid, match="reserved"):
        store.put("notes", got, "deep", actor="user:ana")  # a truncated read cannot be written back as is
    body = {k: v for k, v in got.items() if not k.startswith("_")}
    store.put("notes", {**body, "fixed": True}, "deep", actor="user:ana", if_rev=got["_rev"])
    assert store.get("notes", "deep")["fixed"] is True
