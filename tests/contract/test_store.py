"""The store contract: every backend passes exactly these tests."""

from __future__ import annotations

import threading

import pytest

from ledger import SYSTEM, Conflict, Forbidden, Invalid, NotFound, Rules, TooLarge
from ledger.document import MAX_DOC_BYTES
from skyhub_testkit.memory import MemoryDatabase
from tests.conftest import REMOTE_BACKENDS, reset_database
from tests.contract.conftest import STORE_BACKENDS


@pytest.fixture(params=STORE_BACKENDS + REMOTE_BACKENDS)
def make_store(request, tmp_path, remote_hubs):
    """Every backend, the remote one included: a real hub over HTTP, on SQLite and PostgreSQL."""
    opened = []
    memory = None
    if request.param.startswith("remote-"):
        from skyhub_testkit.hub import ActorRouter

        hub = remote_hubs(request.param.split("-", 1)[1])
        reset_database(hub.database_url)

        def factory(rules=None, clock=SYSTEM):
            router = ActorRouter(hub)
            opened.append(router)
            return router
    else:
        from tests.conftest import store_factory

        if request.param == "memory":
            memory = MemoryDatabase()
            url = memory.url
        else:
            url = f"sqlite:///{tmp_path}/skyhub.db" if request.param == "sqlite" else request.getfixturevalue("pg_url")
        factory = store_factory(url, opened)

    yield factory
    for store in opened:
        store.close()
    if memory is not None:
        memory.close()


def test_put_then_get_returns_the_document_with_id_and_rev(store):
    out = store.put("notes", {"text": "hello", "tags": ["a"]}, "n1", actor="user:ana")
    assert out["_id"] == "n1"
    assert out["_rev"].startswith("1-")
    got = store.get("notes", "n1")
    assert got == {"_id": "n1", "_rev": out["_rev"], "text": "hello", "tags": ["a"]}


def test_put_without_id_makes_one(store):
    out = store.put("notes", {"text": "x"}, actor="user:ana")
    assert store.get("notes", out["_id"])["text"] == "x"


def test_id_may_come_from_the_document(store):
    store.put("notes", {"_id": "from-body", "text": "x"}, actor="user:ana")
    assert store.get("notes", "from-body")["text"] == "x"


def test_every_write_bumps_the_revision_number(store):
    r1 = store.put("notes", {"v": 1}, "n", actor="user:ana")["_rev"]
    r2 = store.put("notes", {"v": 2}, "n", actor="user:ana", if_rev=r1)["_rev"]
    assert (int(r1.split("-")[0]), int(r2.split("-")[0])) == (1, 2)
    assert r1 != r2


def test_if_rev_stale_is_a_conflict_and_writes_nothing(store):
    r1 = store.put("notes", {"v": 1}, "n", actor="user:ana")["_rev"]
    store.put("notes", {"v": 2}, "n", actor="user:ana", if_rev=r1)
    with pytest.raises(Conflict) as err:
        store.put("notes", {"v": 3}, "n", actor="user:ana", if_rev=r1)
    assert err.value.code == "conflict"
    assert "stale revision" in err.value.reason
    assert store.get("notes", "n")["v"] == 2
    assert len(store.history("notes", "n")) == 2


def test_rev_in_the_body_acts_as_if_rev(store):
    doc = store.put("notes", {"v": 1}, "n", actor="user:ana")
    store.put("notes", {**doc, "v": 2}, actor="user:ana")
    with pytest.raises(Conflict):
        store.put("notes", {**doc, "v": 3}, actor="user:ana")


def test_if_rev_on_a_missing_document_is_a_conflict(store):
    with pytest.raises(Conflict):
        store.put("notes", {"v": 1}, "ghost", actor="user:ana", if_rev="1-abc")


def test_create_only_refuses_an_existing_id(store):
    store.put("notes", {"v": 1}, "n", actor="user:ana", create_only=True)
    with pytest.raises(Conflict) as err:
        store.put("notes", {"v": 2}, "n", actor="user:ana", create_only=True)
    assert "already exists" in err.value.reason
    assert store.get("notes", "n")["v"] == 1


def test_create_only_races_have_one_winner(make_store):
    stores = [make_store() for _ in range(4)]
    wins, conflicts = [], []
    barrier = threading.Barrier(len(stores))

    def create(i):
        barrier.wait()
        try:
            stores[i].put("notes", {"by": i}, "once", actor="user:ana", create_only=True)
            wins.append(i)
        except Conflict:
            conflicts.append(i)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(conflicts) == 3
    assert stores[0].get("notes", "once")["by"] == wins[0]
    assert len(stores[0].history("notes", "once")) == 1


def test_blind_write_is_allowed_only_to_actors_the_rules_allow(store):
    store.put("notes", {"v": 1}, "n", actor="user:ana")
    store.put("notes", {"v": 2}, "n", actor="user:bob")  # people may overwrite blind by default
    with pytest.raises(Forbidden) as err:
        store.put("notes", {"v": 3}, "n", actor="device:builder")
    assert "without a revision" in err.value.reason or "no machine" in err.value.reason
    assert store.get("notes", "n")["v"] == 2


def test_a_database_without_rules_takes_any_object_from_a_person_but_not_from_a_device(store):
    store.put("scratch", {"anything": {"nested": [1, 2, 3]}}, "x", actor="user:ana")
    for actor in ("device:builder", "handler:on_change", "tick:ingest"):
        with pytest.raises(Forbidden) as err:
            store.put("scratch", {"v": 1}, "y", actor=actor, create_only=True)
        assert "no machine there allows it" in err.value.reason
    with pytest.raises(NotFound):
        store.get("scratch", "y")


def test_delete_leaves_a_tombstone_and_history(store):
    doc = store.put("notes", {"v": 1}, "n", actor="user:ana")
    gone = store.delete("notes", "n", actor="user:ana", if_rev=doc["_rev"])
    assert gone["_deleted"] is True and gone["_rev"].startswith("2-")
    with pytest.raises(NotFound) as err:
        store.get("notes", "n")
    assert "deleted" in err.value.reason
    history = store.history("notes", "n")
    assert [c.deleted for c in history] == [False, True]
    assert store.query("notes", "v", 1).docs == []
    again = store.put("notes", {"v": 9}, "n", actor="user:ana", create_only=True)
    assert again["_rev"].startswith("3-")


def test_delete_of_a_missing_document_is_not_found(store):
    with pytest.raises(NotFound):
        store.delete("notes", "nope", actor="user:ana")


def test_get_missing_is_not_found_with_a_reason(store):
    store.put("notes", {"v": 1}, "there", actor="user:ana")
    with pytest.raises(NotFound) as err:
        store.get("notes", "nope")
    assert err.value.code == "not_found" and "no document 'nope' in 'notes'" in err.value.reason


def test_a_database_nothing_was_written_to_is_named_as_missing(store):
    with pytest.raises(NotFound) as err:
        store.get("nosuchdb", "x")
    assert "no database 'nosuchdb'" in err.value.reason
    if hasattr(store, "has_db"):  # a local store answers it; over HTTP the hub does (404 with the same sentence)
        assert not store.has_db("nosuchdb")
        store.put("nosuchdb", {"v": 1}, "x", actor="user:ana")
        store.delete("nosuchdb", "x", actor="user:ana")
        assert store.has_db("nosuchdb")  # a database with only a tombstone still exists


@pytest.mark.parametrize("name", ["", "Upper", "1abc", "a" * 65, "has space", "semi;colon", "_x"])
def test_invalid_database_names_are_refused(store, name):
    with pytest.raises(Invalid) as err:
        store.put(name, {"v": 1}, "x", actor="user:ana")
    assert "database name" in err.value.reason


@pytest.mark.parametrize("doc", [[1, 2], "text", 3, None])
def test_a_document_must_be_an_object(store, doc):
    with pytest.raises(Invalid) as err:
        store.put("notes", doc, "x", actor="user:ana")
    assert "JSON object" in err.value.reason


@pytest.mark.parametrize("field", ["_deleted", "_attachments", "_secret"])
def test_reserved_fields_are_refused(store, field):
    with pytest.raises(Invalid) as err:
        store.put("notes", {field: True}, "x", actor="user:ana")
    assert "reserved" in err.value.reason
    assert store.history("notes", "x") == []


def test_a_document_over_one_mebibyte_is_too_large(store):
    with pytest.raises(TooLarge) as err:
        store.put("notes", {"blob": "x" * MAX_DOC_BYTES}, "big", actor="user:ana")
    assert err.value.code == "too_large" and "1 MiB" in err.value.reason
    store.put("notes", {"blob": "x" * (MAX_DOC_BYTES - 20)}, "fits", actor="user:ana")


def test_mismatched_id_is_refused(store):
    with pytest.raises(Invalid):
        store.put("notes", {"_id": "a"}, "b", actor="user:ana")


def test_invalid_actor_is_refused(store):
    with pytest.raises(Invalid):
        store.put("notes", {"v": 1}, "x", actor="robot")


def test_query_by_field_pages_with_a_cursor(store):
    for i in range(25):
        store.put("tasks", {"status": "open" if i % 2 == 0 else "closed", "n": i}, f"t{i:02d}", actor="user:ana")
    seen, after, pages = [], None, 0
    while True:
        page = store.query("tasks", "status", "open", limit=5, after=after)
        seen += [d["_id"] for d in page.docs]
        pages += 1
        if page.next is None:
            break
        after = page.next
    assert seen == [f"t{i:02d}" for i in range(0, 25, 2)]
    assert pages == 3
    assert all(d["_rev"] for d in store.query("tasks", "status", "closed", limit=100).docs)


def test_query_sees_the_latest_revision_only(store):
    doc = store.put("tasks", {"status": "open"}, "t", actor="user:ana")
    store.put("tasks", {"status": "closed"}, "t", actor="user:ana", if_rev=doc["_rev"])
    assert store.query("tasks", "status", "open").docs == []
    assert [d["_id"] for d in store.query("tasks", "status", "closed").docs] == ["t"]


def test_query_on_any_top_level_field_and_numbers(store):
    store.put("tasks", {"owner": "ana", "n": 3}, "a", actor="user:ana")
    store.put("tasks", {"owner": "bob", "n": 4}, "b", actor="user:ana")
    assert [d["_id"] for d in store.query("tasks", "owner", "bob").docs] == ["b"]
    assert [d["_id"] for d in store.query("tasks", "n", 3).docs] == ["a"]


def test_query_refuses_a_bad_field_name(store):
    with pytest.raises(Invalid):
        store.query("tasks", "status'; drop table docs; --", "x")
    with pytest.raises(Invalid):
        store.query("tasks", "status", "x", limit=0)


def test_history_keeps_every_revision_with_actor_and_time(store):
    r = store.put("notes", {"v": 1}, "n", actor="user:ana")["_rev"]
    store.put("notes", {"v": 2}, "n", actor="user:bob", if_rev=r)
    history = store.history("notes", "n")
    assert [(c.doc["v"], c.actor) for c in history] == [(1, "user:ana"), (2, "user:bob")]
    assert history[0].at <= history[1].at and history[0].seq < history[1].seq
    assert history[1].doc["_rev"] == history[1].rev


def test_changes_are_in_commit_order_with_monotonic_sequence(store):
    start = store.head_seq()
    for i in range(15):
        store.put("a" if i % 2 else "b", {"i": i}, f"d{i}", actor="user:ana")
    changes = store.changes(start, 100)
    assert [c.doc["i"] for c in changes] == list(range(15))
    assert [c.seq for c in changes] == sorted(c.seq for c in changes)
    assert store.changes(changes[4].seq, 3) == changes[5:8]
    assert [c.db for c in store.changes(start, 100, dbs=["a"])] == ["a"] * 7


def test_concurrent_writers_never_skip_a_change(make_store):
    """Changes read by a follower while writers commit concurrently arrive gap-free."""
    writers = [make_store() for _ in range(3)]
    reader = make_store()
    start = reader.head_seq()

    def write(w, k):
        for i in range(60):
            w.put("many", {"k": k, "i": i}, f"{k}-{i}", actor="user:ana")

    threads = [threading.Thread(target=write, args=(w, k)) for k, w in enumerate(writers)]
    for t in threads:
        t.start()
    seen, since = [], start
    while any(t.is_alive() for t in threads) or len(seen) < 180:
        batch = reader.changes(since, 7)
        if batch:
            seen += batch
            since = batch[-1].seq
    for t in threads:
        t.join()
    assert len(seen) == 180
    assert len({(c.doc["k"], c.doc["i"]) for c in seen}) == 180
    assert [c.seq for c in seen] == sorted(c.seq for c in seen)


def test_machine_rules_are_checked_in_the_write(make_store):
    from ledger.jobs import JOBS

    store = make_store(rules=Rules([JOBS]))
    with pytest.raises(Forbidden) as err:
        store.put("jobs", {"type": "job", "status": "done"}, "j", actor="user:ana")
    assert "must start in pending" in err.value.reason
    doc = store.put("jobs", {"type": "job", "status": "pending", "input": 1}, "j", actor="user:ana")
    with pytest.raises(Forbidden) as err:
        store.put("jobs", {"type": "job", "status": "done", "input": 1}, "j", actor="user:ana", if_rev=doc["_rev"])
    assert "no transition pending -> done" in err.value.reason
    assert len(store.history("jobs", "j")) == 1


def test_reopening_the_store_keeps_everything(make_store):
    first = make_store()
    first.put("notes", {"v": 1}, "n", actor="user:ana")
    first.close()
    second = make_store()
    assert second.get("notes", "n")["v"] == 1
    assert len(second.history("notes", "n")) == 1


def test_repr_hides_passwords():
    from ledger.sql import redact_url

    assert redact_url("postgresql://bot:hunter2@db:5432/x") == "postgresql://bot:***@db:5432/x"
    assert "hunter2" not in redact_url("postgres://u:hunter2@h/d?sslmode=require")


def test_a_conninfo_string_is_not_mistaken_for_a_file(tmp_path):
    from ledger import open_store

    with pytest.raises(Invalid, match="postgresql://"):
        open_store("user=postgres dbname=test host=127.0.0.1 port=5432", None, SYSTEM)
    with pytest.raises(Invalid, match="unknown database URL scheme"):
        open_store("mysql://root@localhost/x", None, SYSTEM)


# ---- a write is checked against the head, even when another writer moved it just before ------
def test_a_write_against_a_head_another_writer_moved_is_checked_again(make_store):
    a, b = make_store(), make_store()
    first = a.put("notes", {"v": 1}, "n", actor="user:ana")  # a has seen revision 1
    second = b.put("notes", {"v": 2}, "n", actor="user:bob", if_rev=first["_rev"])
    with pytest.raises(Conflict) as err:
        a.put("notes", {"v": 3}, "n", actor="user:ana", if_rev=first["_rev"])
    assert f"is at {second['_rev']}, not {first['_rev']}" in err.value.reason
    third = a.put("notes", {"v": 4}, "n", actor="user:ana")  # blind: on top of b's write
    assert third["_rev"].startswith("3-")
    assert [c.doc["v"] for c in a.history("notes", "n")] == [1, 2, 4]
    b.delete("notes", "n", actor="user:bob", if_rev=third["_rev"])
    with pytest.raises(NotFound):
        a.delete("notes", "n", actor="user:ana")
    again = a.put("notes", {"v": 5}, "n", actor="user:ana", create_only=True)  # a tombstone is no document
    assert again["_rev"].startswith("5-") and b.get("notes", "n")["v"] == 5


def test_the_rules_judge_the_head_as_it_is_not_as_a_writer_last_saw_it(make_store, request):
    from ledger.actor import handler, user

    if request.node.callspec.params["make_store"].startswith("remote-"):
        pytest.skip("a hub's rules are its own: these are set for a local store")

    rules = Rules()
    rules.allow("notes", free=[user(), handler()])  # handlers may create notes; only people overwrite blind
    a, b = make_store(rules=rules), make_store(rules=rules)
    a.put("notes", {"v": 0}, "other", actor="handler:h")
    b.put("notes", {"v": 1}, "y", actor="user:bob")  # a has never seen y
    with pytest.raises(Forbidden) as err:
        a.put("notes", {"v": 2}, "y", actor="handler:h")
    assert "without a revision" in err.value.reason
    assert a.get("notes", "y")["v"] == 1 and len(a.history("notes", "y")) == 1


def race_from(stores, rev, body):
    """Both stores write ``body`` with ``if_rev=rev`` at once; (winners, losers by Conflict)."""
    barrier = threading.Barrier(len(stores))
    wins, conflicts = [], []

    def write(i):
        barrier.wait()
        try:
            stores[i].put("notes", {**body, "by": i}, "r", actor="user:ana", if_rev=rev)
            wins.append(i)
        except Conflict:
            conflicts.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wins, conflicts


def test_writers_racing_from_the_same_revision_have_one_winner_every_time(make_store):
    stores = [make_store(), make_store()]
    stores[0].put("notes", {"v": 0}, "r", actor="user:ana")
    for n in range(1, 9):
        heads = [s.get("notes", "r") for s in stores]  # each has seen the same head
        assert heads[0]["_rev"] == heads[1]["_rev"]
        wins, conflicts = race_from(stores, heads[0]["_rev"], {"v": n})
        assert len(wins) == 1 and len(conflicts) == 1
        assert stores[1].get("notes", "r")["by"] == wins[0]
    assert [c.doc["v"] for c in stores[0].history("notes", "r")] == list(range(9))


def test_blind_writers_racing_on_one_document_lose_no_write(make_store):
    stores = [make_store(), make_store()]
    stores[0].put("notes", {"by": -1, "k": -1}, "hot", actor="user:ana")
    barrier = threading.Barrier(2)

    def write(i):
        barrier.wait()
        for k in range(15):
            stores[i].put("notes", {"by": i, "k": k}, "hot", actor="user:ana")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history = stores[0].history("notes", "hot")
    assert [c.rev.split("-")[0] for c in history] == [str(n) for n in range(1, 32)]
    assert sorted((c.doc["by"], c.doc["k"]) for c in history[1:]) == sorted((i, k) for i in range(2) for k in range(15))


def test_a_batch_of_writes_has_an_outcome_per_write(make_store):
    """``put_many`` on every backend, a hub over HTTP included (one request per write there)."""
    from ledger import Write

    store = make_store()
    rev = store.put("notes", {"v": 0}, "a", actor="user:ana")["_rev"]
    store.put("notes", {"v": "theirs"}, "a", actor="user:ana", if_rev=rev)
    out = store.put_many("notes", [Write({"v": 1}, "a", if_rev=rev), Write({"v": 1}, "b"), Write({"v": 1}, "c")],
                         actor="user:ana")
    assert isinstance(out[0], Conflict)
    assert [o["_id"] for o in out[1:]] == ["b", "c"]
    assert store.get("notes", "a")["v"] == "theirs" and store.get("notes", "c")["v"] == 1
