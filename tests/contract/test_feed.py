"""The change feed's promises, on every backend."""

from __future__ import annotations

import threading
import time

import pytest

from ledger import SYSTEM, Elsewhere, FakeClock, Feed, Handler
from ledger.actor import handler as handlers
from ledger.actor import user
from ledger.feed import HOT_LOOK_S, HOT_S
from tests.conftest import default_rules


def put_notes(store, n, start=0, db="notes"):
    return [store.put(db, {"i": i}, f"n{i:03d}", actor="user:ana") for i in range(start, start + n)]


def collector(name="collect", dbs=("notes",), **options):
    seen = []
    return Handler(name, list(dbs), lambda change, ctx: seen.append(change), **options), seen


def test_delivers_every_change_in_commit_order_in_batches_of_at_most_ten(store):
    handler, seen = collector()
    batches = []
    feed = Feed(store, [handler], clock=SYSTEM)
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
    feed = Feed(store, [handler], clock=SYSTEM)
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
    Feed(first, [handler], clock=SYSTEM).drain()
    first.close()
    second = make_store()
    put_notes(second, 3, start=12)
    handler2, seen2 = collector()
    Feed(second, [handler2], clock=SYSTEM).drain()
    assert [c.doc["i"] for c in seen] == list(range(12))
    assert [c.doc["i"] for c in seen2] == [12, 13, 14]


def test_the_event_carries_db_id_doc_with_rev_and_deleted(store):
    handler, seen = collector()
    doc = store.put("notes", {"v": 1}, "n", actor="user:ana")
    store.delete("notes", "n", actor="user:ana", if_rev=doc["_rev"])
    Feed(store, [handler], clock=SYSTEM).drain()
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
    Feed(store, [handler], clock=SYSTEM).drain()
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
    Feed(store, [handler], clock=SYSTEM).drain()
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
    Feed(store, [handler], clock=SYSTEM).drain()
    release.set()
    assert calls == [0, 1]


def test_the_feed_wakes_on_commit_not_on_a_polling_interval(store):
    got = threading.Event()
    handler = Handler("fast", ["notes"], lambda change, ctx: got.set())
    feed = Feed(store, [handler], idle_interval=60.0, clock=SYSTEM)
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
        Feed(s, [Handler("share", ["notes"], lambda c, ctx, i=i: seen[i].append(c.doc["i"]))], batch_size=5, clock=SYSTEM)
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
    Feed(store, [handler], clock=SYSTEM).drain()
    assert sorted({c.db for c in seen}) == sorted(dbs)


# ---- skip-own: a handler may pass over the changes its own actor wrote ----------------------
@pytest.fixture
def hstore(make_store):
    """A store where handlers may write free-form notes (as they do in these tests)."""
    return make_store(rules=handler_rules())


def handler_rules():
    rules = default_rules()
    rules.allow("notes", free=[user(), handlers()])
    return rules


def own_notes(store, n, start=0, actor="handler:echo"):
    return [store.put("notes", {"i": i}, f"own{i:03d}", actor=actor) for i in range(start, start + n)]


def test_a_skip_own_handler_passes_a_tail_of_its_own_changes(hstore):
    handler, seen = collector("echo", skip_own=True)
    feed = Feed(hstore, [handler], clock=SYSTEM)
    put_notes(hstore, 2)
    own_notes(hstore, 3)
    put_notes(hstore, 1, start=2)
    own_notes(hstore, 12, start=3)  # more than a batch of them after the last foreign change
    feed.drain()
    assert [c.doc["i"] for c in seen] == [0, 1, 2] and all(c.actor == "user:ana" for c in seen)
    position = hstore.feed_position("echo", ["notes"])
    assert position.done == position.claimed == position.head == hstore.head_seq()
    assert position.pending == 0 and position.leases == []
    assert hstore.feed_claim("echo", ["notes"], "someone", 1_000, skip_actor="handler:echo") is None
    assert not feed.step(handler)
    put_notes(hstore, 1, start=3)  # a foreign change after the tail is delivered
    feed.drain()
    assert [c.doc["i"] for c in seen] == [0, 1, 2, 3]


def test_a_skip_own_handler_whose_log_holds_only_its_own_changes_moves_its_cursor_to_the_end(hstore):
    handler, seen = collector("echo", skip_own=True)
    own_notes(hstore, 4)
    assert not Feed(hstore, [handler], clock=SYSTEM).step(handler)
    assert seen == []
    position = hstore.feed_position("echo", ["notes"])
    assert position.done == position.claimed == hstore.head_seq() and position.pending == 0


def test_passing_own_changes_keeps_done_below_a_batch_still_in_flight(hstore):
    put_notes(hstore, 2)
    in_flight = hstore.feed_claim("echo", ["notes"], "other", 60_000, skip_actor="handler:echo")
    assert in_flight is not None and [c.doc["i"] for c in in_flight.changes] == [0, 1]
    own_notes(hstore, 3)
    assert hstore.feed_claim("echo", ["notes"], "me", 60_000, skip_actor="handler:echo") is None
    position = hstore.feed_position("echo", ["notes"])
    assert position.claimed == hstore.head_seq()
    assert position.done == 0  # the batch in flight may still fail and be taken over
    assert hstore.feed_finish(in_flight, "other")
    position = hstore.feed_position("echo", ["notes"])
    assert position.done == hstore.head_seq() and position.pending == 0


def test_a_handler_without_skip_own_gets_its_own_writes(hstore):
    seen = []

    def echo(change, ctx):
        seen.append((change.actor, change.doc["i"]))
        if change.actor == "user:ana":
            ctx.db.put("notes", {"i": change.doc["i"] + 100}, f"echo{change.doc['i']}")

    handler = Handler("echo", ["notes"], echo)
    put_notes(hstore, 2)
    Feed(hstore, [handler], clock=SYSTEM).drain()
    assert seen == [("user:ana", 0), ("user:ana", 1), ("handler:echo", 100), ("handler:echo", 101)]


def test_a_skip_own_handler_does_not_get_its_own_writes_but_gets_other_handlers(hstore):
    seen = []

    def echo(change, ctx):
        seen.append((change.actor, change.doc["i"]))
        if change.actor == "user:ana":
            ctx.db.put("notes", {"i": change.doc["i"] + 100}, f"echo{change.doc['i']}")

    handler = Handler("echo", ["notes"], echo, skip_own=True)
    put_notes(hstore, 2)
    own_notes(hstore, 1, start=50, actor="handler:other")
    Feed(hstore, [handler], clock=SYSTEM).drain()
    assert seen == [("user:ana", 0), ("user:ana", 1), ("handler:other", 50)]
    assert hstore.feed_position("echo", ["notes"]).pending == 0


def test_a_dead_skip_own_consumers_batch_is_taken_over_without_its_own_changes(make_store):
    clock = FakeClock()
    store = make_store(rules=handler_rules(), clock=clock)
    put_notes(store, 1)
    own_notes(store, 2)
    put_notes(store, 1, start=1)
    dead = store.feed_claim("echo", ["notes"], "dead-owner", 1_000, skip_actor="handler:echo")
    assert dead is not None and [c.doc["i"] for c in dead.changes] == [0, 1]
    handler, seen = collector("echo", skip_own=True)
    feed = Feed(store, [handler], clock=clock, lease_ms=1_000)
    clock.advance(1_001)
    feed.drain()
    assert [c.doc["i"] for c in seen] == [0, 1]
    assert store.feed_position("echo", ["notes"]).done == store.head_seq()


# ---- the runner waits after a short batch, and never loses a wake-up ----------------------
class CountingStore:
    """A store whose feed claims are counted; ``during_claim`` runs inside the first one.
    Only this process's commits wake the feed (not the backend's "something may have changed"
    wake-ups, which come when they come), so every wake-up the test sees is one it made."""

    def __init__(self, store, during_claim=None):
        self._store = store
        self.claims = 0
        self._during = during_claim

    def __getattr__(self, name):
        return getattr(self._store, name)

    def subscribe(self, listener, **options):
        return self._store.subscribe(lambda change: listener(change) if change is not None else None, **options)

    def feed_claim(self, *args, **kwargs):
        self.claims += 1
        batch = self._store.feed_claim(*args, **kwargs)
        if self._during is not None:
            during, self._during = self._during, None
            during()
        return batch


def test_after_a_short_batch_the_runner_waits_for_a_commit_instead_of_claiming_again(store):
    counting = CountingStore(store)
    got = []
    handler = Handler("short", ["notes"], lambda change, ctx: got.append(change.doc["i"]))
    put_notes(store, 3)  # fewer than a batch
    feed = Feed(counting, [handler], idle_interval=60.0, clock=SYSTEM)
    feed.start()
    try:
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)  # a runner that claims again and again would have done so by now
        if store.skips_wakeups:
            # where other processes may skip a busy runner's wake-ups (SQLite's boards), it stays hot a moment
            # (looks, reads only, every HOT_LOOK_S for HOT_S), then waits: no more looks from then on
            looks = counting.claims
            # (about HOT_S / HOT_LOOK_S looks, plus the first short pauses, the last look and the first claim)
            assert 2 <= looks <= HOT_S / HOT_LOOK_S + 8
            time.sleep(0.3)
            assert got == [0, 1, 2] and counting.claims == looks, "the runner kept looking after HOT_S"
        else:
            assert got == [0, 1, 2] and counting.claims == 1
        position = store.feed_position("short")
        assert position.done == position.claimed and not position.leases  # the look leased nothing
        put_notes(store, 1, start=3)  # a commit wakes it
        deadline = time.monotonic() + 10
        while len(got) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got == [0, 1, 2, 3]
    finally:
        feed.stop()


def test_a_commit_during_a_claim_is_not_lost(store):
    got = threading.Event()
    counting = CountingStore(store, during_claim=lambda: put_notes(store, 1))
    handler = Handler("wake", ["notes"], lambda change, ctx: got.set())
    feed = Feed(counting, [handler], idle_interval=60.0, clock=SYSTEM)
    feed.start()  # the first claim finds nothing, and a note commits before the runner waits
    try:
        assert got.wait(10), "the commit made during the claim did not wake the runner"
    finally:
        feed.stop()


# ---- wake-ups from other processes say what committed, where the backend can -------------
def test_another_processs_commit_wakes_a_hinted_listener_with_its_database_and_actor(make_store, backend_url):
    here, there = make_store(), make_store()
    heard = []
    got = threading.Event()

    def listener(change):
        heard.append(change)
        if change is None or isinstance(change, Elsewhere):
            got.set()

    here.subscribe(listener, hints=True)
    postgres = backend_url.startswith("postgresql")
    if postgres:
        assert got.wait(10)  # LISTEN is in place: its first wake-up ("anything meanwhile") came
    else:
        time.sleep(0.2)  # the data_version poller has read its first version
    got.clear()
    heard.clear()
    there.put("notes", {"i": 1}, "n1", actor="user:ana")
    assert got.wait(10), "the other store's commit did not wake this one"
    if postgres:
        assert Elsewhere("notes", "user:ana") in heard  # NOTIFY carries the database and the actor


def test_a_skip_own_feed_is_not_woken_by_its_own_actors_commits_elsewhere(store):
    handler, _seen = collector("echo", skip_own=True)
    other, _ = collector("other")
    feed = Feed(store, [handler, other], idle_interval=60.0, clock=SYSTEM)
    feed._on_commit(Elsewhere("notes", "handler:echo"))
    assert not feed._wakes["echo"].is_set() and feed._wakes["other"].is_set()
    feed._on_commit(Elsewhere("other-db", "user:ana"))
    assert not feed._wakes["echo"].is_set()
    feed._on_commit(Elsewhere("notes", "user:ana"))
    assert feed._wakes["echo"].is_set()


# ---- a running feed calls handlers on its own thread, and still enforces their time limit ---
def test_a_running_feeds_handler_past_its_time_limit_is_redelivered_and_the_feed_goes_on(store):
    calls = []
    release = threading.Event()

    def slow_once(change, ctx):
        calls.append((change.doc["i"], ctx.tries))
        if len(calls) == 1:
            release.wait(10)  # hangs past the limit the first time

    handler = Handler("slow", ["notes"], slow_once, timeout=0.2, backoff=0.01)
    put_notes(store, 1)
    feed = Feed(store, [handler], idle_interval=60.0, clock=SYSTEM)
    feed.start()
    try:
        wait_for(lambda: len(calls) >= 2)
        put_notes(store, 1, start=1)  # the runner that took over goes on with the next change
        wait_for(lambda: len(calls) >= 3)
        release.set()  # the abandoned call returns: its thread must do nothing more
        time.sleep(0.3)
        assert calls == [(0, 0), (0, 1), (1, 0)]
        assert sum(t.name == "feed:slow" and t.is_alive() for t in threading.enumerate()) == 1
        position = store.feed_position("slow")
        assert position.done == store.head_seq() and position.leases == []
    finally:
        release.set()
        feed.stop()
    assert not feed.running


def test_a_long_handler_call_keeps_its_batch_lease(make_store):
    stores = [make_store(), make_store()]
    seen = []

    def slow(change, ctx):
        seen.append(change.doc["i"])
        if change.doc["i"] == 0:
            time.sleep(2.5)  # more than twice the lease

    feeds = [
        Feed(s, [Handler("long", ["notes"], slow, group="g")], lease_ms=1_000, idle_interval=0.1, clock=SYSTEM) for s in stores
    ]
    put_notes(stores[0], 3)
    feeds[0].start()
    wait_for(lambda: seen)  # the first feed holds the batch
    feeds[1].start()  # and the second one would take it over if its lease ran out
    try:
        wait_for(lambda: stores[0].feed_position("g").done == stores[0].head_seq())
    finally:
        for f in feeds:
            f.stop()
    assert seen == [0, 1, 2]


def wait_for(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


# ---- a finish that claims the next batch ---------------------------------------------
def test_a_finish_claims_the_next_batch_in_its_transaction(store):
    from ledger.store import NextClaim

    put_notes(store, 5)
    first = store.feed_claim("collect", ["notes"], "me", 30_000, 2)
    assert [c.doc["i"] for c in first.changes] == [0, 1]
    then = NextClaim("collect", ["notes"], "me", 30_000, 2)
    assert store.feed_finish(first, "me", then=then) is True
    assert [c.doc["i"] for c in then.batch.changes] == [2, 3]
    position = store.feed_position("collect")
    assert position.done == first.upto and position.claimed == then.batch.upto
    assert [lease["after"] for lease in position.leases] == [first.upto]  # the next batch's lease alone
    last = NextClaim("collect", ["notes"], "me", 30_000, 2)
    store.feed_finish(then.batch, "me", then=last)
    idle = NextClaim("collect", ["notes"], "me", 30_000, 2)
    store.feed_finish(last.batch, "me", then=idle)
    assert [c.doc["i"] for c in last.batch.changes] == [4] and idle.batch is None  # nothing left: nothing claimed
    position = store.feed_position("collect")
    assert position.done == position.claimed == last.batch.upto and position.leases == []


def test_a_finish_whose_lease_was_lost_claims_nothing(store):
    from ledger.store import NextClaim

    put_notes(store, 4)
    batch = store.feed_claim("collect", ["notes"], "me", 30_000, 2)
    store.feed_renew(batch, "me", -1)  # expired: another consumer takes it over
    taken = store.feed_claim("collect", ["notes"], "other", 30_000, 2)
    assert taken.taken and taken.after == batch.after
    then = NextClaim("collect", ["notes"], "me", 30_000, 2)
    assert store.feed_finish(batch, "me", then=then) is False and then.batch is None
    assert store.feed_position("collect").claimed == batch.upto  # the rest is still there for whoever finishes


def test_a_feed_stopped_with_a_batch_claimed_by_a_finish_delivers_it_before_it_ends(store):
    """A runner's finish claims the next batch (notes that came while it worked); a stop that comes right
    then ends the runner only after that batch, delivered once: nothing left claimed, nothing redelivered."""
    feed_ref = []
    chained = threading.Event()

    class StopAfterChain:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def feed_finish(self, batch, owner, **kw):
            done = self._inner.feed_finish(batch, owner, **kw)
            then = kw.get("then")
            if then is not None and then.batch is not None and not chained.is_set():
                chained.set()
                threading.Thread(target=feed_ref[0].stop, daemon=True).start()
                assert feed_ref[0]._stop.wait(5)  # the stop has begun: the runner must still deliver the batch
            return done

    first = threading.Event()
    seen = []

    def handle(change, ctx):
        if change.doc["i"] == 0 and not first.is_set():
            put_notes(store, 3, start=1)  # arrive while the first batch is in hand
            first.set()
        seen.append(change.doc["i"])

    handler = Handler("collect", ["notes"], handle)
    feed = Feed(StopAfterChain(store), [handler], clock=SYSTEM)
    feed_ref.append(feed)
    put_notes(store, 1)
    feed.start()
    deadline = time.monotonic() + 10
    while feed.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert chained.is_set() and not feed.running
    assert seen == [0, 1, 2, 3]
    position = store.feed_position("collect")
    assert position.done == position.claimed == store.head_seq() and position.leases == []
