"""The change feed's promises, on every backend."""

from __future__ import annotations

import threading
import time

import pytest

from ledger import FakeClock, Feed, Handler


def put_notes(store, n, start=0, db="notes"):
    return [store.put(db, {"i": i}, f"n{i:03d}", actor="user:ana") for i in range(start, start + n)]


def collector(name="collect", dbs=("notes",), **options):
    seen = []
    return Handler(name, list(dbs), lambda change, ctx: seen.append(change), **options), seen


def test_delivers_every_change_in_commit_order_in_batches_of_at_most_ten(store):
    handler, seen = collector()
    batches = []
    feed = Feed(store, [handler])
    put_notes(store, 25)
    store.put("other", {"x": 1}, "o", actor="user:ana")  # not subscribed
    while feed.step(handler):
        batches.append(len(seen) - sum(batches))
    assert [c.doc["i"] for c in seen] == list(range(25))
    assert batches == [10, 10, 5]
    assert all(c.db == "notes" for c in seen)
    position = store.feed_position("collect")
    assert position.done == position.claimed == seen[-1].seq and position.leases == []
    assert position.head == store.head_seq() and position.behind == 1  # the write to "other"


def test_a_feed_position_says_how_far_behind_the_handler_is(store):
    handler, seen = collector()
    put_notes(store, 3)
    feed = Feed(store, [handler])
    feed.step(handler)
    put_notes(store, 4, start=3)
    store.put("other", {"x": 1}, "o", actor="user:ana")
    position = store.feed_position("collect", ["notes"])
    assert (position.pending, position.behind) == (4, 5)
    assert store.feed_position("collect").pending is None
    assert store.feed_position("nobody", ["notes"]).pending == 7


def test_the_cursor_is_durable_across_restarts(make_store):
    first = make_store()
    handler, seen = collector()
    put_notes(first, 12)
    Feed(first, [handler]).drain()
    first.close()
    second = make_store()
    put_notes(second, 3, start=12)
    handler2, seen2 = collector()
    Feed(second, [handler2]).drain()
    assert [c.doc["i"] for c in seen] == list(range(12))
    assert [c.doc["i"] for c in seen2] == [12, 13, 14]


def test_the_event_carries_db_id_doc_with_rev_and_deleted(store):
    handler, seen = collector()
    doc = store.put("notes", {"v": 1}, "n", actor="user:ana")
    store.delete("notes", "n", actor="user:ana", if_rev=doc["_rev"])
    Feed(store, [handler]).drain()
    first, second = seen
    assert (first.db, first.id, first.doc["_rev"], first.deleted, first.doc["v"]) == ("notes", "n", doc["_rev"], False, 1)
    assert second.deleted and second.doc["_deleted"] is True


def test_a_raising_handler_gets_the_same_event_again_with_exponential_backoff(store):
    times, events = [], []

    def flaky(change, ctx):
        times.append(time.monotonic())
        events.append((change.seq, change.rev, ctx.tries))
        if len(times) < 3:
            raise ValueError("not yet")

    handler = Handler("flaky", ["notes"], flaky, backoff=0.05, max_tries=5)
    put_notes(store, 1)
    Feed(store, [handler]).drain()
    assert len(events) == 3 and len({(s, r) for s, r, _ in events}) == 1
    assert [t for _, _, t in events] == [0, 1, 2]
    assert times[1] - times[0] >= 0.05 and times[2] - times[1] >= 0.1
    assert store.query("deadletters", "kind", "dead-letter").docs == []


def test_after_bounded_tries_the_event_goes_to_a_visible_dead_letter_and_the_cursor_moves_on(store):
    seen = []

    def poison(change, ctx):
        if change.doc["i"] == 1:
            raise RuntimeError("cannot handle i=1")
        seen.append(change.doc["i"])

    handler = Handler("poison", ["notes"], poison, backoff=0.001, max_tries=3)
    put_notes(store, 3)
    Feed(store, [handler]).drain()
    assert seen == [0, 2]
    dead = store.query("deadletters", "kind", "dead-letter").docs
    assert len(dead) == 1
    letter = dead[0]
    assert (letter["status"], letter["handler"], letter["db"], letter["docId"], letter["tries"]) == ("open", "poison", "notes", "n001", 3)
    assert "RuntimeError: cannot handle i=1" in letter["error"]
    # a person can dismiss it once dealt with
    store.put("deadletters", {**letter, "status": "dismissed"}, actor="user:ana")


def test_a_handler_past_its_time_limit_is_redelivered(store):
    calls = []
    release = threading.Event()

    def slow_once(change, ctx):
        calls.append(ctx.tries)
        if len(calls) == 1:
            release.wait(5)  # hangs past the limit the first time

    handler = Handler("slow", ["notes"], slow_once, timeout=0.2, backoff=0.01)
    put_notes(store, 1)
    Feed(store, [handler]).drain()
    release.set()
    assert calls == [0, 1]


def test_the_feed_wakes_on_commit_not_on_a_polling_interval(store):
    got = threading.Event()
    handler = Handler("fast", ["notes"], lambda change, ctx: got.set())
    feed = Feed(store, [handler], idle_interval=60.0)
    feed.start()
    try:
        time.sleep(0.2)  # the runner is now idle, waiting up to 60 s
        put_notes(store, 1)
        assert got.wait(10), "the commit did not wake the feed"
    finally:
        feed.stop()


def test_a_dead_consumers_batch_is_taken_over_after_its_lease(make_store):
    clock = FakeClock()
    store = make_store(clock=clock)
    put_notes(store, 4)
    handler, seen = collector()
    # a consumer claims a batch and dies before finishing it
    dead = store.feed_claim("collect", ["notes"], "dead-owner", 1_000)
    assert dead is not None and len(dead.changes) == 4
    feed = Feed(store, [handler], clock=clock, lease_ms=1_000)
    assert feed.drain() == 0 and seen == []  # still leased
    clock.advance(1_001)
    feed.drain()
    assert [c.doc["i"] for c in seen] == [0, 1, 2, 3]
    assert not store.feed_finish(dead, "dead-owner")  # the late owner cannot finish it
    assert store.feed_position("collect").done == seen[-1].seq


def test_handlers_sharing_a_group_split_batches_and_each_change_is_handled_once(make_store):
    stores = [make_store(), make_store()]
    put_notes(stores[0], 60)
    seen = {0: [], 1: []}
    feeds = [
        Feed(s, [Handler("share", ["notes"], lambda c, ctx, i=i: seen[i].append(c.doc["i"]))], batch_size=5)
        for i, s in enumerate(stores)
    ]
    for f in feeds:
        f.start()
    deadline = time.monotonic() + 30
    while len(seen[0]) + len(seen[1]) < 60 and time.monotonic() < deadline:
        time.sleep(0.02)
    for f in feeds:
        f.stop()
    assert sorted(seen[0] + seen[1]) == list(range(60))


@pytest.mark.parametrize("dbs", [["notes"], ["notes", "other"]])
def test_handler_sees_only_its_databases(store, dbs):
    handler, seen = collector(dbs=dbs)
    put_notes(store, 2)
    put_notes(store, 2, db="other")
    put_notes(store, 2, db="third")
    Feed(store, [handler]).drain()
    assert sorted({c.db for c in seen}) == sorted(dbs)
