"""Lists by time (``Documents.by_time``): a status's documents by when they were last written,
newest or oldest first, keyset-paged, with a bounded jump ahead; every backend, the remote one
included, and a database made before the column existed (its times come from the change log)."""

from __future__ import annotations

import pytest

from ledger import FakeClock, Invalid, Rules, open_store
from ledger.store import MAX_SKIP
from tests.contract.test_migrations import make_v3
from tests.contract.test_store import make_store  # noqa: F401 - the fixture: every backend, the remote one too


def ids(page):
    return [d["_id"] for d in page.docs]


CLOCK = FakeClock(1_800_000_000_000)


@pytest.fixture
def store(make_store):  # noqa: F811 - on the local backends, a clock that moves a second between writes
    return make_store(clock=CLOCK)


def put(store, db, doc, doc_id):
    CLOCK.advance(1000)  # the remote hub keeps its own clock: there, the expected order is read from the history
    return store.put(db, doc, doc_id, actor="user:ana")


def _fill(store, n, status="failed", db="tasks"):
    """Documents written in an order that is not the ids' order; their ids newest first, as the history times them."""
    for doc_id in [f"t{(i * 7) % n:03d}" for i in range(n)]:
        put(store, db, {"kind": "task", "status": status}, doc_id)
    return newest_first(store, db, status)


def newest_first(store, db, status):
    """What the list must be: the status's documents by the time of their last revision, then id (both descending)."""
    found = [d["_id"] for d in store.query(db, "status", status, 1000).docs]
    return sorted(found, key=lambda i: (store.history(db, i)[-1].at, i), reverse=True)


def test_documents_come_newest_first_or_oldest_first_by_their_last_write(store):
    _fill(store, 12)
    put(store, "tasks", {"kind": "task", "status": "done"}, "other")  # another status: not listed
    put(store, "tasks", {**store.get("tasks", "t005"), "note": "touched"}, "t005")  # written last now
    expected = newest_first(store, "tasks", "failed")
    assert expected[0] == "t005" and len(expected) == 12
    newest = store.by_time("tasks", "failed", limit=100)
    assert ids(newest) == expected and newest.next is None
    assert list(newest.written) == [store.history("tasks", i)[-1].at for i in expected]
    assert ids(store.by_time("tasks", "failed", limit=100, newest=False)) == list(reversed(expected))
    assert newest.docs[0]["note"] == "touched" and newest.docs[0]["_rev"].startswith("2-")


def test_pages_follow_one_another_without_a_repeat_or_a_gap(store):
    expected = _fill(store, 23)
    for newest in (True, False):
        seen, after = [], None
        while True:
            page = store.by_time("tasks", "failed", limit=5, after=after, newest=newest)
            seen += ids(page)
            if page.next is None:
                break
            after = page.next
        assert seen == (expected if newest else list(reversed(expected)))


def test_a_jump_skips_ahead_and_is_bounded(store):
    expected = _fill(store, 30)
    third = store.by_time("tasks", "failed", limit=10, skip=20)
    assert ids(third) == expected[20:30] and third.next is None
    assert ids(store.by_time("tasks", "failed", limit=10, skip=20, newest=False)) == list(reversed(expected))[20:30]
    with pytest.raises(Invalid, match="skip must be between 0 and"):
        store.by_time("tasks", "failed", limit=10, skip=MAX_SKIP + 1)
    with pytest.raises(Invalid, match="next cursor of a previous page by time"):
        store.by_time("tasks", "failed", after="not-a-cursor")
    assert ids(store.by_time("tasks", "cancelled")) == [] and store.by_time("tasks", "nothing").next is None


def test_a_deleted_document_and_a_moved_one_leave_the_list(store):
    _fill(store, 4)
    store.delete("tasks", "t001", actor="user:ana")
    moved = store.get("tasks", "t002")
    store.put("tasks", {**moved, "status": "done"}, "t002", actor="user:ana", if_rev=moved["_rev"])
    assert sorted(ids(store.by_time("tasks", "failed"))) == ["t000", "t003"]
    assert ids(store.by_time("tasks", "done")) == ["t002"]


@pytest.mark.durable
def test_a_database_from_before_the_column_lists_by_the_change_log(backend, backend_url):
    make_v3(backend_url)  # version 3 holds t1 ("open"), written at 1 ms by its change
    store = open_store(backend_url, Rules(), FakeClock(1_800_000_000_000))
    try:
        store.put("tasks", {"kind": "task", "status": "open"}, "a", actor="user:ana")
        page = store.by_time("tasks", "open")
        assert ids(page) == ["a", "t1"] and page.written == (1_800_000_000_000, 1)
        assert ids(store.by_time("tasks", "open", newest=False)) == ["t1", "a"]
    finally:
        store.close()
