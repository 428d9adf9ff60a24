"""The reference jobs machine end to end, on every backend, with a fake clock."""

from __future__ import annotations

import threading

import pytest

from ledger import Conflict, FakeClock, Feed, Forbidden, Ledger
from ledger.jobs import jobs_handler
from ledger.lease import Sweeper, claim, finish

LEASE = 5_000


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def env(make_store, clock):
    from tests.conftest import default_rules

    rules = default_rules()
    store = make_store(rules=rules, clock=clock)
    return store, rules


def new_job(store, job_id="j1", payload=None):
    return store.put("jobs", {"type": "job", "status": "pending", "input": payload or {"n": 1}}, job_id, actor="user:ana")


def statuses(store, job_id="j1"):
    return [(c.doc["status"], c.actor) for c in store.history("jobs", job_id)]


class Recorder:
    """Wraps a handler to record every delivery (seq, rev, status)."""

    def __init__(self, handler):
        self.handler = handler
        self.deliveries = []
        inner = handler.fn

        def fn(change, ctx):
            self.deliveries.append((change.seq, change.rev, change.doc.get("status")))
            return inner(change, ctx)

        handler.fn = fn


def test_a_job_goes_pending_running_done(env, clock):
    store, _ = env
    keys = []
    feed = Feed(store, [jobs_handler(lambda key, job, ctx: keys.append(key) or {"ok": True}, lease_ms=LEASE)], clock=clock)
    new_job(store)
    feed.drain()
    job = store.get("jobs", "j1")
    assert job["status"] == "done" and job["result"] == {"ok": True} and job["attempts"] == 1
    assert statuses(store) == [("pending", "user:ana"), ("running", "handler:on_change"), ("done", "handler:on_change")]
    assert keys == ["j1:1"]


def test_handler_raising_after_claim_is_redelivered_refused_and_swept_home(env, clock):
    store, rules = env
    calls = []

    def work(key, job, ctx):
        calls.append(key)
        if len(calls) == 1:
            raise RuntimeError("codegen crashed")
        return {"built": key}

    rec = Recorder(jobs_handler(work, lease_ms=LEASE, backoff=0.001, max_tries=3))
    feed = Feed(store, [rec.handler], clock=clock)
    created = new_job(store)
    feed.drain()
    # the same event (original pending doc, same rev) came twice; the second claim was refused
    pending_deliveries = [d for d in rec.deliveries if d[2] == "pending"]
    assert pending_deliveries[0] == pending_deliveries[1] and pending_deliveries[0][1] == created["_rev"]
    assert calls == ["j1:1"]
    assert store.get("jobs", "j1")["status"] == "running"
    assert [s for s, _ in statuses(store)] == ["pending", "running"]

    sweeper = Sweeper(store, rules, clock=clock)
    assert sweeper.sweep_once() == store.get("jobs", "j1")["leaseUntil"]  # lease still held
    clock.advance(LEASE + 1)
    sweeper.sweep_once()
    feed.drain()
    job = store.get("jobs", "j1")
    assert job["status"] == "done" and job["attempts"] == 2 and calls == ["j1:1", "j1:2"]
    history = statuses(store)
    assert [s for s, _ in history] == ["pending", "running", "pending", "running", "done"]
    assert history[2][1] == "tick:sweep"
    assert sum(1 for s, _ in history if s == "done") == 1
    assert store.query("deadletters", "kind", "dead-letter").docs == []


def test_a_claim_never_finished_is_swept_back_then_failed_after_three_attempts(env, clock):
    store, rules = env
    worker = Ledger(store, "handler:on_change", clock)
    sweeper = Sweeper(store, rules, clock=clock)
    new_job(store)
    for attempt in (1, 2, 3):
        held = claim(worker, "jobs", store.get("jobs", "j1"), "running", LEASE, clock.now_ms())
        assert held["attempts"] == attempt
        clock.advance(LEASE - 1)
        sweeper.sweep_once()
        assert store.get("jobs", "j1")["status"] == "running"  # lease still held: nothing taken
        clock.advance(2)
        sweeper.sweep_once()
        if attempt < 3:
            assert store.get("jobs", "j1")["status"] == "pending"
    job = store.get("jobs", "j1")
    assert job["status"] == "failed" and job["attempts"] == 3
    assert "lease expired during attempt 3 of 3" in job["lastError"]
    assert [s for s, _ in statuses(store)] == ["pending", "running", "pending", "running", "pending", "running", "failed"]
    # the worker wakes up late and tries to finish: a stale claim
    with pytest.raises(Forbidden) as err:
        finish(worker, "jobs", held, "done")
    assert "stale claim" in err.value.reason or "no transition" in err.value.reason
    # a fourth claim is refused outright
    with pytest.raises(Forbidden):
        claim(worker, "jobs", store.get("jobs", "j1"), "running", LEASE, clock.now_ms())


def test_a_finish_after_the_sweep_took_the_job_back_is_a_stale_claim(env, clock):
    store, rules = env
    worker = Ledger(store, "handler:on_change", clock)
    new_job(store)
    held = claim(worker, "jobs", store.get("jobs", "j1"), "running", LEASE, clock.now_ms())
    clock.advance(LEASE + 1)
    Sweeper(store, rules, clock=clock).sweep_once()
    again = claim(worker, "jobs", store.get("jobs", "j1"), "running", LEASE, clock.now_ms())
    with pytest.raises(Forbidden) as err:
        finish(worker, "jobs", held, "done")
    assert "stale claim" in err.value.reason
    finish(worker, "jobs", again, "done")
    assert store.get("jobs", "j1")["status"] == "done"


def test_two_claims_race_and_only_one_commits_before_any_work(make_store, clock):
    from tests.conftest import default_rules

    stores = [make_store(rules=default_rules(), clock=clock) for _ in range(2)]
    new_job(stores[0])
    snapshot = stores[0].get("jobs", "j1")
    barrier = threading.Barrier(2)
    won, lost, work = [], [], []

    def race(i):
        barrier.wait()
        try:
            held = claim(Ledger(stores[i], "handler:on_change", clock), "jobs", snapshot, "running", LEASE, clock.now_ms())
        except Conflict as exc:
            lost.append(exc.code)
            return
        won.append(i)
        work.append(held["claimId"])

    threads = [threading.Thread(target=race, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and lost == ["conflict"] and len(work) == 1
    assert [s for s, _ in statuses(stores[0])] == ["pending", "running"]


def test_heartbeat_keeps_the_lease_and_the_finish_uses_its_revision(env, clock):
    from ledger.lease import heartbeat

    store, rules = env
    worker = Ledger(store, "handler:on_change", clock)
    sweeper = Sweeper(store, rules, clock=clock)
    new_job(store)
    held = claim(worker, "jobs", store.get("jobs", "j1"), "running", LEASE, clock.now_ms())
    for _ in range(3):
        clock.advance(LEASE - 100)
        held = heartbeat(worker, "jobs", held, LEASE, clock.now_ms())
        sweeper.sweep_once()
        assert store.get("jobs", "j1")["status"] == "running"
    finish(worker, "jobs", held, "done")
    assert store.get("jobs", "j1")["status"] == "done"


@pytest.mark.parametrize("skip_own", [False, True], ids=["own-writes-delivered", "skip-own"])
def test_own_writes_fire_the_feed_and_every_chain_ends_after_one_step(env, clock, skip_own):
    store, rules = env
    rec = Recorder(jobs_handler(lease_ms=LEASE, skip_own=skip_own))
    feed = Feed(store, [rec.handler], clock=clock)
    for i in range(3):
        new_job(store, f"j{i}")
    # one job is claimed by a worker that dies; the sweep's write must be picked up by the feed
    Sweeper(store, rules, clock=clock)
    claim(Ledger(store, "handler:on_change", clock), "jobs", store.get("jobs", "j0"), "running", LEASE, clock.now_ms())
    feed.drain()
    clock.advance(LEASE + 1)
    Sweeper(store, rules, clock=clock).sweep_once()
    feed.drain()
    head = store.head_seq()
    assert feed.drain() == 0 and store.head_seq() == head  # nothing left, nothing more written
    for i in range(3):
        assert store.get("jobs", f"j{i}")["status"] == "done"
    # every delivered handler/sweep write (running, done, swept pending) caused at most one write
    delivered = {seq: status for seq, _, status in rec.deliveries}
    changes = store.changes(0, 1000, dbs=["jobs"])
    if skip_own:  # the feed passed over the handler's own writes, and saw every other one
        assert set(delivered) == {c.seq for c in changes if c.actor != "handler:on_change"}
        assert store.feed_position("on_change", ["jobs"]).pending == 0
    else:
        assert set(delivered) == {c.seq for c in changes}  # the feed saw every write, its own included
    writes_by_handler = [c for c in changes if c.actor == "handler:on_change"]
    # j0: running (dead worker) + running + done; j1, j2: running + done
    assert len(writes_by_handler) == 3 + 2 + 2
    assert [c.doc["status"] for c in changes if c.actor == "tick:sweep"] == ["pending"]
