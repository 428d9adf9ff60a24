"""Document counts by database, kind and status: kept in every write's transaction, read
without scanning the documents (what the console and /metrics draw)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from ledger import Conflict, Forbidden, StatusCount


def table(store, db=None):
    return {(c.db, c.kind, c.status): c.n for c in store.counts(db)}


def test_counts_move_with_writes_status_changes_and_deletes(store):
    assert store.counts() == []
    a = store.put("notes", {"kind": "memo", "status": "open"}, "a", actor="user:ana")
    store.put("notes", {"kind": "memo", "status": "open"}, "b", actor="user:ana")
    assert table(store) == {("notes", "memo", "open"): 2}
    a = store.put("notes", {"kind": "memo", "status": "closed"}, "a", actor="user:ana", if_rev=a["_rev"])
    assert table(store) == {("notes", "memo", "open"): 1, ("notes", "memo", "closed"): 1}
    a = store.put("notes", {"kind": "memo", "status": "closed", "edited": True}, "a", actor="user:ana", if_rev=a["_rev"])
    assert table(store) == {("notes", "memo", "open"): 1, ("notes", "memo", "closed"): 1}
    store.delete("notes", "a", actor="user:ana", if_rev=a["_rev"])
    assert table(store) == {("notes", "memo", "open"): 1}
    store.put("notes", {"kind": "memo", "status": "open"}, "a", actor="user:ana")  # made again after its delete
    assert table(store) == {("notes", "memo", "open"): 2}


def test_kind_is_the_kind_field_else_type_else_empty_and_status_may_be_missing(store):
    store.put("mixed", {"kind": "k", "type": "t", "status": "s"}, "1", actor="user:ana")
    store.put("mixed", {"type": "t", "status": "s"}, "2", actor="user:ana")
    store.put("mixed", {"status": "s"}, "3", actor="user:ana")
    store.put("mixed", {"kind": 7, "type": "t"}, "4", actor="user:ana")  # only text values name a kind or a status
    store.put("mixed", {"kind": "k", "status": ["s"]}, "5", actor="user:ana")
    assert table(store) == {("mixed", "k", "s"): 1, ("mixed", "t", "s"): 1, ("mixed", "", "s"): 1,
                            ("mixed", "t", ""): 1, ("mixed", "k", ""): 1}


def test_counts_are_sorted_and_filtered_by_database(store):
    store.put("b-db", {"kind": "x", "status": "s"}, "1", actor="user:ana")
    store.put("a-db", {"kind": "y", "status": "t"}, "1", actor="user:ana")
    store.put("a-db", {"kind": "x", "status": "u"}, "2", actor="user:ana")
    assert store.counts() == [
        StatusCount("a-db", "x", "u", 1), StatusCount("a-db", "y", "t", 1), StatusCount("b-db", "x", "s", 1),
    ]
    assert store.counts("b-db") == [StatusCount("b-db", "x", "s", 1)]
    assert store.counts("none") == []
    assert store.counts()[0].as_dict() == {"db": "a-db", "kind": "x", "status": "u", "n": 1}


def test_refused_and_rolled_back_writes_change_nothing(store):
    job = store.put("jobs", {"type": "job", "status": "pending", "input": {}}, "j", actor="user:ana")
    before = table(store)
    with pytest.raises(Forbidden):
        store.put("jobs", {"type": "job", "status": "done", "input": {}}, "j", actor="user:ana", if_rev=job["_rev"])
    with pytest.raises(Conflict):
        store.put("jobs", {"type": "job", "status": "pending", "input": {}}, "j", actor="user:ana", create_only=True)
    assert table(store) == before
    # a transaction that writes a document and then fails leaves the counts as they were
    with pytest.raises(RuntimeError), store._tx() as cur:
        cur.execute(store.q.insert_doc, {"db": "jobs", "id": "ghost", "rev": "1-x", "body": '{"type":"job","status":"pending"}',
                                         "deleted": 0, "at": 1})
        raise RuntimeError("rolled back")
    assert table(store) == before == {("jobs", "job", "pending"): 1}


WRITER = textwrap.dedent("""
    import sys
    from ledger import SYSTEM, open_store
    url, me = sys.argv[1], sys.argv[2]
    store = open_store(url, None, SYSTEM)
    try:
        for i in range(60):
            doc = store.put("race", {"kind": "own", "status": "a"}, f"{me}-{i}", actor="user:ana")
            if i % 2 == 0:
                doc = store.put("race", {"kind": "own", "status": "b"}, f"{me}-{i}", actor="user:ana", if_rev=doc["_rev"])
            if i % 4 == 0:
                store.delete("race", f"{me}-{i}", actor="user:ana", if_rev=doc["_rev"])
            store.put("race", {"kind": "shared", "status": me}, f"shared-{i % 20}", actor="user:ana")  # both write these
    finally:
        store.close()
""")


@pytest.mark.durable
def test_concurrent_writers_in_two_processes_keep_the_counts_exact(store, backend_url):
    store.put("race", {"kind": "own", "status": "a"}, "seed", actor="user:ana")  # the schema exists before they start
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, backend_url, me]) for me in ("p0", "p1")]
    for proc in procs:
        assert proc.wait(120) == 0
    got = table(store, "race")
    assert got[("race", "own", "a")] == 1 + 2 * 30 and got[("race", "own", "b")] == 2 * 15
    shared = Counter(store.get("race", f"shared-{i}")["status"] for i in range(20))
    assert {s: n for (_, k, s), n in got.items() if k == "shared"} == dict(shared)
    assert sum(shared.values()) == 20
