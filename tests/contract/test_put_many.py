"""``put_many``: a batch of writes in one transaction, each judged as ``put`` judges it, on every backend.

The contract suite's backends (SQLite, PostgreSQL, the in-memory store); ``test_store.py``'s remote
backend sends one request per write and is checked for the same outcomes there."""

from __future__ import annotations

import pytest

from ledger import Conflict, Forbidden, Invalid, Rules, Write
from ledger.jobs import JOBS
from ledger.store import MAX_BATCH
from tests.conftest import store_factory


@pytest.fixture
def make(backend_url):
    opened: list = []
    yield store_factory(backend_url, opened)
    for s in opened:
        s.close()


def test_a_batch_writes_every_document_with_one_revision_each_in_order(make):
    store = make()
    head = store.head_seq()
    out = store.put_many("notes", [Write({"n": i}, f"n{i:02d}") for i in range(20)], actor="user:ana")
    assert [d["_id"] for d in out] == [f"n{i:02d}" for i in range(20)]
    assert all(d["_rev"].startswith("1-") for d in out)
    assert store.get("notes", "n07")["n"] == 7
    changes = store.changes(head, limit=100, dbs=["notes"])
    assert [c.id for c in changes] == [f"n{i:02d}" for i in range(20)]
    assert [c.seq for c in changes] == sorted(c.seq for c in changes)
    assert {c.actor for c in changes} == {"user:ana"}
    assert [h.actor for h in store.history("notes", "n03")] == ["user:ana"]


def test_one_stale_revision_refuses_that_write_only(make):
    store = make()
    revs = [store.put("notes", {"v": 1}, f"d{i}", actor="user:ana")["_rev"] for i in range(5)]
    store.put("notes", {"v": "theirs"}, "d2", actor="user:bob", if_rev=revs[2])  # changed meanwhile
    out = store.put_many("notes", [Write({"v": 2}, f"d{i}", if_rev=revs[i]) for i in range(5)], actor="user:ana")
    assert isinstance(out[2], Conflict) and "stale revision" in out[2].reason
    assert [o["v"] for i, o in enumerate(out) if i != 2] == [2, 2, 2, 2]
    assert store.get("notes", "d2")["v"] == "theirs"  # counted, not overwritten
    assert [store.get("notes", f"d{i}")["v"] for i in (0, 1, 3, 4)] == [2, 2, 2, 2]
    assert len(store.history("notes", "d2")) == 2


def test_create_only_on_an_existing_document_refuses_only_there(make):
    store = make()
    store.put("notes", {"v": "old"}, "b", actor="user:ana")
    out = store.put_many("notes", [Write({"v": 1}, "a", create_only=True), Write({"v": 1}, "b", create_only=True),
                                   Write({"v": 1}, "c", create_only=True)], actor="user:ana")
    assert isinstance(out[1], Conflict) and "already exists" in out[1].reason
    assert out[0]["v"] == 1 and out[2]["v"] == 1
    assert store.get("notes", "b")["v"] == "old"


def test_a_rule_refusal_and_a_malformed_write_lose_nothing_else(make):
    store = make(rules=Rules([JOBS]))
    out = store.put_many("jobs", [
        Write({"type": "job", "status": "pending", "input": 1}, "j1"),
        Write({"type": "job", "status": "done"}, "j2"),  # a job must start in pending
        Write({"type": "job", "status": "pending", "_id": "other"}, "j3"),  # the body's id disagrees
        Write({"type": "job", "status": "pending", "input": 4}, "j4"),
    ], actor="user:ana")
    assert isinstance(out[1], Forbidden) and "must start in pending" in out[1].reason
    assert isinstance(out[2], Invalid) and "does not match" in out[2].reason
    assert out[0]["_id"] == "j1" and out[3]["_id"] == "j4"
    assert store.get("jobs", "j4")["input"] == 4
    assert not store.history("jobs", "j2") and not store.history("jobs", "j3")


def test_a_second_write_to_the_same_id_is_judged_against_the_first(make):
    store = make()
    first = store.put("notes", {"v": 0}, "x", actor="user:ana")["_rev"]
    out = store.put_many("notes", [Write({"v": 1}, "x", if_rev=first), Write({"v": 2}, "x", if_rev=first),
                                   Write({"v": 3}, "y", create_only=True), Write({"v": 4}, "y", create_only=True)],
                         actor="user:ana")
    assert out[0]["v"] == 1 and isinstance(out[1], Conflict)
    assert out[2]["v"] == 3 and isinstance(out[3], Conflict)
    assert [h.rev for h in store.history("notes", "x")][-1] == out[0]["_rev"]


def test_a_batch_over_the_limit_is_refused_whole(make):
    store = make()
    with pytest.raises(Invalid) as err:
        store.put_many("notes", [Write({"v": i}, f"n{i}") for i in range(MAX_BATCH + 1)], actor="user:ana")
    assert f"at most {MAX_BATCH}" in err.value.reason
    assert not store.has_db("notes")


def test_listeners_hear_every_written_change_after_the_commit(make):
    store, reader = make(), make()
    heard: list = []

    def listener(change):
        if change is not None:  # another process's hint carries no change
            # after the commit: another connection already reads the document
            heard.append((change.id, reader.get("notes", change.id)["_rev"] == change.rev))

    store.subscribe(listener)
    store.put("notes", {"v": 0}, "taken", actor="user:ana")
    heard.clear()
    store.put_many("notes", [Write({"v": 1}, "p"), Write({"v": 1}, "taken", create_only=True), Write({"v": 1}, "q")],
                   actor="user:ana")
    assert heard == [("p", True), ("q", True)]


def test_batches_creating_the_same_documents_in_opposite_orders_both_finish(make):
    """Two batches racing to create the same new ids, one listing them backwards: one writes each document and
    the other finds it there (a Conflict per write), never a whole batch failed by a deadlock between them."""
    import threading

    a, b = make(), make()
    for round_ in range(8):
        ids = [f"r{round_}-{i:03d}" for i in range(60)]
        results: dict[str, list] = {}
        barrier = threading.Barrier(2)

        def run(name, store, order, barrier, results):
            barrier.wait()
            results[name] = store.put_many("notes", [Write({"by": name}, i, create_only=True) for i in order],
                                           actor="user:ana")

        threads = [threading.Thread(target=run, args=("a", a, ids, barrier, results)),
                   threading.Thread(target=run, args=("b", b, ids[::-1], barrier, results))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(results) == {"a", "b"}, "a batch failed instead of giving each write its outcome"
        wins = [o for o in results["a"] + results["b"] if isinstance(o, dict)]
        assert sorted(o["_id"] for o in wins) == ids  # each document written once
        assert all(isinstance(o, (dict, Conflict)) for o in results["a"] + results["b"])


def test_a_new_document_created_by_another_writer_meanwhile_refuses_that_id_s_writes_only(make, backend, monkeypatch):
    """Another writer creates a new id after the batch read its heads (they are not there to lock): the batch's
    writes of that id are judged again against no document, as one at a time; the rest are written."""
    if backend != "postgres":
        pytest.skip("staged between PostgreSQL's head read and the batch's writes (SQLite's writers take turns)")
    from ledger.document import encode, next_rev

    store, other = make(), make()
    lock_heads = store._lock_heads

    def then_another_writer(cur, db, ids):
        heads = lock_heads(cur, db, ids)
        other.put("notes", {"by": "bob"}, "x", actor="user:bob")
        return heads

    monkeypatch.setattr(store, "_lock_heads", then_another_writer)
    head = store.head_seq()
    first = next_rev(None, encode({"v": 1}))  # the revision the batch's first write of x would make
    out = store.put_many("notes", [Write({"v": 1}, "x"), Write({"v": 0}, "w"), Write({"v": 2}, "x"),
                                   Write({"v": 3}, "x", if_rev=first), Write({"v": 4}, "y")], actor="user:ana")
    assert out[1]["v"] == 0 and out[4]["v"] == 4
    assert isinstance(out[0], Conflict) and "by another writer just now" in out[0].reason
    assert isinstance(out[2], Conflict) and "by another writer just now" in out[2].reason
    assert isinstance(out[3], Conflict) and "does not exist" in out[3].reason  # not judged against out[0]
    assert store.get("notes", "x")["by"] == "bob"
    assert [h.actor for h in store.history("notes", "x")] == ["user:bob"]
    assert [c.id for c in store.changes(head, dbs=["notes"])] == ["x", "w", "y"]


def test_the_rules_read_a_document_the_batch_wrote_before(make):
    """A role read while judging a write sees the batch's earlier documents, as it would after a put each."""
    from ledger import ADMIN, user
    from tests.contract.test_roles import REVIEWED

    rules = Rules([REVIEWED])
    rules.allow("docs", free=[user(), ADMIN], blind=[user(), ADMIN])
    rules.roles_from(lambda actor, read: (read("docs", actor.partition(":")[2]) or {}).get("role"))
    store = make(rules=rules)
    role = store.put("docs", {"role": "approver"}, "ann", actor="admin")
    draft = store.put("docs", {"type": "draft", "status": "draft"}, "d1", actor="user:ann")
    out = store.put_many("docs", [Write({"role": "editor"}, "ann", if_rev=role["_rev"]),
                                  Write({"type": "draft", "status": "approved"}, "d1", if_rev=draft["_rev"])],
                         actor="user:ann")
    assert out[0]["role"] == "editor"
    assert isinstance(out[1], Forbidden) and "as editor" in out[1].reason
    assert store.get("docs", "d1")["status"] == "draft"


def test_another_process_hears_a_batch_once_with_its_database_and_actor(make, backend):
    """One NOTIFY for a batch (PostgreSQL), worded as a single write's: another store's feeds wake once."""
    if backend != "postgres":
        pytest.skip("NOTIFY is PostgreSQL's")
    import threading
    import time

    from ledger.store import Elsewhere

    here, there = make(), make()
    heard: list = []
    got = threading.Event()

    def listener(change):
        heard.append(change)
        got.set()

    here.subscribe(listener, hints=True)
    assert got.wait(10)  # LISTEN is in place: its first wake-up ("anything meanwhile") came
    got.clear()
    heard.clear()
    there.put_many("notes", [Write({"v": i}, f"n{i}") for i in range(30)], actor="user:ana")
    assert got.wait(10), "the other store's batch did not wake this one"
    time.sleep(0.3)  # any further notification would have come by now
    assert heard == [Elsewhere("notes", "user:ana")]


def test_a_write_that_moves_a_head_while_a_batch_waits_for_its_transaction_is_seen(make, monkeypatch):
    """SQLite judges a batch before its transaction (``_judge_ahead``); a head that moved between that and the
    transaction is judged again there: a stale ``if_rev`` is refused, a moved blind write counts from the new head."""
    store = make()
    a = store.put("notes", {"v": 1}, "a", actor="user:ana")
    store.put("notes", {"v": 1}, "b", actor="user:ana")
    judge = store._judge_ahead

    def meanwhile(work):
        judge(work)
        store.put("notes", {"v": 2}, "a", actor="user:bob")  # another writer, after the judgment, before the transaction
        store.put("notes", {"v": 2}, "b", actor="user:bob")

    monkeypatch.setattr(store, "_judge_ahead", meanwhile)
    out = store.put_many("notes", [Write({"v": 3}, "a", if_rev=a["_rev"]), Write({"v": 3}, "b")], actor="user:ana")
    assert isinstance(out[0], Conflict) and "stale revision" in out[0].reason
    assert out[1]["_rev"].startswith("3-"), "a blind write judged against the head before the other writer's"
    assert store.get("notes", "a")["v"] == 2 and store.get("notes", "b")["v"] == 3
    assert [h.doc["v"] for h in store.history("notes", "b")] == [1, 2, 3]
