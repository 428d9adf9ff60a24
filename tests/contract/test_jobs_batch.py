"""Quick jobs a batch at a time: the jobs handler claims a feed batch's pending jobs with the batch's own
claim and finishes them with its finish (``Handler.prepare``, ``ctx.later``: two transactions for the
batch), and each job still walks pending -> running -> done exactly once, on its own revision, on every
backend."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from ledger import FakeClock, Feed, Handler, Ledger, NotFound, Rules
from ledger.actor import handler, user
from ledger.jobs import QUICK_WORK_S, jobs_handler
from ledger.lease import claim
from ledger.store import Write

LEASE = 5_000
ACTOR = "handler:on_change"


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store(make_store, clock):
    from tests.conftest import default_rules

    return make_store(rules=default_rules(), clock=clock)


@pytest.fixture
def quick(monkeypatch):
    """Work counts as quick however loaded the machine is (a busy machine may stretch a no-op past 5 ms)."""
    import ledger.jobs

    monkeypatch.setattr(ledger.jobs, "QUICK_WORK_S", 60.0)


@pytest.fixture
def free(make_store, clock):
    """A store whose handler may write free-form notes."""
    rules = Rules()
    rules.allow("notes", free=[handler(), user()])
    rules.allow("inbox", free=[handler(), user()])
    return make_store(rules=rules, clock=clock)


def count_writes(store):
    """The store's single and batched writes, by actor, from now on."""
    calls: Counter[tuple[str, str]] = Counter()
    put, put_many = store.put, store.put_many

    def one(db, doc, id=None, *, actor, **kw):
        calls["put", actor] += 1
        return put(db, doc, id, actor=actor, **kw)

    def many(db, writes, *, actor):
        calls["put_many", actor] += 1
        calls["put_many writes", actor] += len(writes)
        return put_many(db, writes, actor=actor)

    claim, finish = store.feed_claim, store.feed_finish

    def claimed(*args, **kw):
        batch = claim(*args, **kw)
        if batch is not None:
            calls["feed_claim", len(batch.made.writes) if batch.made else 0] += 1
        return batch

    def finished(batch, owner, *, also=None, then=None):
        calls["feed_finish", len(also.writes) if also else 0] += 1
        done = finish(batch, owner, also=also, then=then)
        if then is not None and then.batch is not None:  # the next batch, claimed in the finish's transaction
            calls["feed_claim", len(then.batch.made.writes) if then.batch.made else 0] += 1
        return done

    store.put, store.put_many, store.feed_claim, store.feed_finish = one, many, claimed, finished
    return calls


def written(store, id):
    try:
        store.get("notes", id)
    except NotFound:
        return False
    return True


def new_jobs(store, ids):
    for job_id in ids:
        store.put("jobs", {"type": "job", "status": "pending", "input": {"id": job_id}}, job_id, actor="user:ana")


def statuses(store, job_id):
    return [c.doc["status"] for c in store.history("jobs", job_id)]


def test_quick_jobs_of_a_batch_are_claimed_in_one_write_and_finished_in_one_more(store, clock, quick):
    feed = Feed(store, [jobs_handler(lease_ms=LEASE)], clock=clock)
    new_jobs(store, ["warm"])
    feed.drain()  # the handler has seen how long its work takes
    ids = [f"j{i}" for i in range(10)]
    new_jobs(store, ids)
    calls = count_writes(store)
    feed.drain()
    # the claims made with the batch's claim, the finishes together with the batch's finish (on a loaded machine
    # some sooner, in a batch of their own, when a call was still running at the keeper's look): no job alone
    assert calls["feed_claim", 10] == 1 and ("put", ACTOR) not in calls
    finishes = [n for (kind, n) in calls if kind == "feed_finish"]
    assert len(finishes) == 1 and finishes[0] + calls["put_many writes", ACTOR] == 10
    if calls["put_many", ACTOR] == 0:  # the usual case: two transactions for the ten jobs
        assert calls == {("feed_claim", 10): 1, ("feed_finish", 10): 1}
    for job_id in ids:
        assert statuses(store, job_id) == ["pending", "running", "done"]
        job = store.get("jobs", job_id)
        running = store.history("jobs", job_id)[1].doc
        assert job["attempts"] == 1 and job["claimId"] == running["claimId"] and job["result"]["key"] == f"{job_id}:1"


def test_slow_work_claims_and_finishes_each_job_by_itself(store, clock):
    def work(key, job, ctx):
        time.sleep(QUICK_WORK_S * 1.5)
        return {"key": key}

    feed = Feed(store, [jobs_handler(work, lease_ms=LEASE)], clock=clock)
    new_jobs(store, ["warm"])
    feed.drain()
    new_jobs(store, ["a", "b", "c"])
    calls = count_writes(store)
    feed.drain()
    assert calls["put", ACTOR] == 6  # a claim and a finish of each job's own
    assert {k for k in calls if k[0] != "put"} <= {("feed_claim", 0), ("feed_finish", 0)}  # nothing with the batch
    assert all(statuses(store, j) == ["pending", "running", "done"] for j in "abc")


def test_a_job_of_the_batch_claimed_elsewhere_first_is_left_to_that_claim(store, clock, quick):
    ran = []
    feed = Feed(store, [jobs_handler(lambda key, job, ctx: ran.append(key) or {}, lease_ms=LEASE)], clock=clock)
    new_jobs(store, ["warm"])
    feed.drain()
    new_jobs(store, ["a", "b", "c"])
    other = claim(Ledger(store, ACTOR, clock), "jobs", store.get("jobs", "b"), "running", LEASE, clock.now_ms())
    feed.drain()
    assert ran == ["warm:1", "a:1", "c:1"]
    assert store.get("jobs", "b")["claimId"] == other["claimId"] and statuses(store, "b") == ["pending", "running"]
    assert statuses(store, "a") == statuses(store, "c") == ["pending", "running", "done"]


def test_jobs_claimed_with_a_batch_that_turns_slow_are_renewed_before_their_work(store, clock, quick):
    def work(key, job, ctx):
        if key.startswith("a:"):
            clock.advance(LEASE * 6 // 10)  # the first job took most of the lease (on the fake clock)
        return {}

    feed = Feed(store, [jobs_handler(work, lease_ms=LEASE)], clock=clock)
    new_jobs(store, ["warm"])
    feed.drain()
    new_jobs(store, ["a", "b"])
    feed.drain()
    assert statuses(store, "a") == ["pending", "running", "done"]
    assert statuses(store, "b") == ["pending", "running", "running", "done"]  # a heartbeat, then the work
    history = store.history("jobs", "b")
    assert history[2].doc["leaseUntil"] > history[1].doc["leaseUntil"]
    assert len({c.doc["claimId"] for c in history[1:]}) == 1


def test_a_failed_call_s_later_writes_are_dropped_and_its_retry_s_are_made(free, clock):
    calls = []

    def fn(change, ctx):
        calls.append(change.id)
        ctx.later("notes", Write({"seen": change.id, "try": ctx.tries}, f"seen-{change.id}", create_only=True))
        if len(calls) == 1:
            raise RuntimeError("failed after its later write")

    feed = Feed(free, [Handler("watch", ["inbox"], fn, backoff=0.001)], clock=clock)
    free.put("inbox", {"i": 1}, "m1", actor="user:ana")
    feed.drain()
    assert calls == ["m1", "m1"]
    assert [(c.doc["seen"], c.doc["try"]) for c in free.history("notes", "seen-m1")] == [("m1", 1)]
    assert free.history("notes", "seen-m1")[0].actor == "handler:watch"


def test_a_refused_later_write_is_logged_and_the_batch_goes_on(free, clock, caplog):
    free.put("notes", {"taken": True}, "seen-m1", actor="user:ana")

    def fn(change, ctx):
        ctx.later("notes", Write({"seen": change.id}, f"seen-{change.id}", create_only=True))

    feed = Feed(free, [Handler("watch", ["inbox"], fn)], clock=clock)
    free.put("inbox", {"i": 1}, "m1", actor="user:ana")
    free.put("inbox", {"i": 2}, "m2", actor="user:ana")
    feed.drain()
    assert free.get("notes", "seen-m1")["taken"] is True and len(free.history("notes", "seen-m1")) == 1
    assert free.get("notes", "seen-m2")["seen"] == "m2"
    assert "its later write of notes/seen-m1 was refused" in caplog.text
    assert free.feed_position("watch", ["inbox"]).pending == 0  # the batch was finished


def test_outside_a_feed_a_later_write_is_made_at_once(free, clock):
    from ledger.context import make_context

    ctx = make_context(Ledger(free, "handler:watch", clock), "watch", None)
    ctx.later("notes", Write({"now": True}, "n1"))
    assert free.get("notes", "n1")["now"] is True


def test_a_slow_call_does_not_hold_back_the_later_writes_of_the_quick_ones_before_it(free, clock):
    seen_while_slow = []

    def fn(change, ctx):
        if change.id == "m2":  # the slow one: the first call's later write is made while it runs
            for _ in range(400):
                if written(free, "seen-m1"):
                    break
                time.sleep(0.025)
            seen_while_slow.append(written(free, "seen-m1"))
        ctx.later("notes", Write({"seen": change.id}, f"seen-{change.id}"))

    feed = Feed(free, [Handler("watch", ["inbox"], fn)], clock=clock)
    free.put("inbox", {"i": 1}, "m1", actor="user:ana")
    free.put("inbox", {"i": 2}, "m2", actor="user:ana")
    feed.drain()
    assert seen_while_slow == [True]
    assert free.get("notes", "seen-m2")["seen"] == "m2"


def test_an_idle_sqlite_claim_takes_no_write_transaction(tmp_path):
    import sqlite3
    import threading

    from ledger import SYSTEM, open_store

    store = open_store(f"sqlite:///{tmp_path}/idle.db", Rules(), SYSTEM)
    try:
        store.put("jobs", {"n": 1}, "j1", actor="user:ana")
        batch = store.feed_claim("worker", ["jobs"], "me", 10_000)
        assert batch is not None and store.feed_finish(batch, "me")
        writer = sqlite3.connect(f"{tmp_path}/idle.db", isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        got: list[object] = []
        t = threading.Thread(target=lambda: got.append(store.feed_claim("worker", ["jobs"], "me", 10_000)))
        t.start()
        t.join(60)
        waited = t.is_alive()
        writer.execute("ROLLBACK")
        writer.close()
        t.join()
        assert not waited and got == [None], "an idle claim waited for the writer"
    finally:
        store.close()


def test_a_woken_claim_leaves_the_handler_s_own_changes_and_the_idle_one_passes_them(free):
    free.put("inbox", {"i": 1}, "m1", actor="user:ana")
    batch = free.feed_claim("watch", ["inbox"], "me", 10_000, skip_actor="handler:watch")
    assert batch is not None and free.feed_finish(batch, "me")
    free.put("inbox", {"i": 2}, "m2", actor="handler:watch")  # the handler's own write: skipped
    head = free.head_seq()
    assert free.feed_claim("watch", ["inbox"], "me", 10_000, skip_actor="handler:watch", woken=True) is None
    if free.dialect.name != "postgres":  # (PostgreSQL's claim function passes them at once, in its statement)
        assert free.feed_position("watch").done < head  # left for later: no write for it
    assert free.feed_claim("watch", ["inbox"], "me", 10_000, skip_actor="handler:watch") is None
    assert free.feed_position("watch").done == head  # the idle interval's claim passed it
