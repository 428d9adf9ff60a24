"""Bulk actions through the machines, on every backend: what an operator does to many documents at
once (``ledger.bulk``), each written with its revision as the person, refusals counted and never
forced, recorded in ``audit``; dead letters replayed through the feed (``ledger.replay``)."""

from __future__ import annotations

import pytest

from ledger import (
    SYSTEM,
    Conflict,
    Edge,
    FakeClock,
    Feed,
    Forbidden,
    Handler,
    Ledger,
    Machine,
    Move,
    NotFound,
    Rules,
    Usage,
    deadletter_machine,
    guard,
    tick,
    user,
)
from ledger.bulk import AUDIT, Filter, audit_machine, bulk
from ledger.fingerprint import fingerprint
from ledger.jobs import JOBS
from ledger.replay import replayer

NOW = 1_790_000_000_000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def rules() -> Rules:
    return Rules([JOBS, deadletter_machine(), audit_machine()])


@pytest.fixture
def jobs(make_store, rules, clock):
    return make_store(rules=rules, clock=clock)


def failed(store, n: int, error: str = "boom: job {i} died at 2026-12-02T08:00:{i:02d}Z", first: int = 0) -> list[str]:
    ids = []
    for i in range(first, first + n):
        doc_id = f"j{i:03d}"
        store.put("jobs", {"type": "job", "status": "failed", "input": {"n": i}, "attempts": 3,
                           "lastError": error.format(i=i), "sweptAt": NOW - 60_000 + i}, doc_id, actor="admin")
        ids.append(doc_id)
    return ids


def test_retrying_failed_jobs_moves_each_through_the_person_edge_as_the_operator(jobs, rules, clock):
    ids = failed(jobs, 10)
    jobs.put("jobs", {"type": "job", "status": "done", "input": {"n": 99}}, "done-one", actor="admin")
    out = bulk(Ledger(jobs, "user:ana", clock), rules, "jobs", "retry", Filter(status="failed"))
    assert (out.matched, len(out.written), out.refused, out.conflicts) == (10, 10, [], 0)
    for doc_id in ids:
        doc = jobs.get("jobs", doc_id)
        assert (doc["status"], doc["attempts"], doc["retries"], doc["retriedAt"]) == ("pending", 0, 1, NOW)
        assert "claimId" not in doc and "leaseUntil" not in doc
        assert jobs.history("jobs", doc_id)[-1].actor == "user:ana"
    assert jobs.get("jobs", "done-one")["_rev"].startswith("1-")  # not selected, not touched
    record = jobs.get(AUDIT, out.audit)
    assert (record["kind"], record["action"], record["db"], record["by"], record["at"]) == ("bulk-action", "retry", "jobs", "user:ana", NOW)
    assert record["filter"] == {"status": "failed"}
    assert record["counts"] == {"matched": 10, "written": 10, "refused": 0, "conflicts": 0, "warnings": 0}
    assert record["ids"] == ids


def test_a_dry_run_counts_and_shows_a_sample_and_writes_nothing(jobs, rules, clock):
    failed(jobs, 7)
    head = jobs.head_seq()
    out = bulk(Ledger(jobs, "user:ana", clock), rules, "jobs", "retry", Filter(status="failed"), dry_run=True)
    assert (out.matched, len(out.written), out.audit) == (7, 7, None)
    assert [s["id"] for s in out.sample] == ["j000", "j001", "j002", "j003", "j004"]
    assert out.sample[0]["error"].startswith("boom: job 0 died")
    assert jobs.head_seq() == head  # nothing written, not even an audit record
    assert all(d["status"] == "failed" for d in jobs.query("jobs", "status", "failed").docs)


def test_the_error_filter_takes_words_or_a_group_fingerprint(jobs, rules, clock):
    failed(jobs, 4)
    failed(jobs, 3, error="lease expired during attempt 3 of 3", first=10)
    ana = Ledger(jobs, "user:ana", clock)
    by_words = bulk(ana, rules, "jobs", "retry", Filter(status="failed", error="LEASE EXPIRED"), dry_run=True)
    assert by_words.written == ["j010", "j011", "j012"]
    group = fingerprint("boom: job 1 died at 2026-12-02T08:00:01Z")
    out = bulk(ana, rules, "jobs", "retry", Filter(status="failed", kind="job", error=group))
    assert out.written == ["j000", "j001", "j002", "j003"]
    assert [d["_id"] for d in jobs.query("jobs", "status", "failed").docs] == ["j010", "j011", "j012"]


def test_a_document_the_move_does_not_leave_is_refused_and_listed_never_forced(jobs, rules, clock):
    failed(jobs, 2)
    jobs.put("jobs", {"type": "job", "status": "done", "input": {"n": 5}}, "d5", actor="admin")
    jobs.put("jobs", {"type": "job", "status": "done", "input": {"n": 6}, "batch": "b1"}, "d6", actor="admin")
    jobs.put("jobs", {"type": "job", "status": "failed", "input": {"n": 7}, "batch": "b1", "attempts": 3}, "f7", actor="admin")
    out = bulk(Ledger(jobs, "user:ana", clock), rules, "jobs", "retry", Filter(field="batch", key="b1"))
    assert out.written == ["f7"]
    assert out.refused == [{"id": "d6", "status": "done", "reason": "a job that is done cannot be retried (only one that is failed)"}]
    assert jobs.get("jobs", "d6")["_rev"].startswith("1-")
    assert jobs.get(AUDIT, out.audit)["refusals"] == out.refused


@guard
def not_quarantined(old, new, ctx):
    return "a quarantined task is retried by an admin only" if (old or {}).get("quarantined") and ctx.actor != "admin" else None


TASKS = Machine("tasks", type="task", start=["failed"], edges=[
    Edge("failed", "pending", by=user(), guards=[not_quarantined]), Edge("pending", "failed", by=tick("work")),
], moves=[Move("retry", "failed", "pending", count="retries")])


def test_a_write_the_machine_refuses_is_counted_with_its_reason(make_store, clock):
    """The machine's guard judges each write: a task it refuses is listed with its reason, the others go ahead."""
    rules = Rules([TASKS, audit_machine()])
    store = make_store(rules=rules, clock=clock)
    for i, quarantined in enumerate([False, True, False]):
        store.put("tasks", {"type": "task", "status": "failed", "quarantined": quarantined}, f"t{i}", actor="user:ana")
    out = bulk(Ledger(store, "user:ana", clock), rules, "tasks", "retry", Filter(status="failed"))
    assert out.written == ["t0", "t2"]
    assert out.refused == [{"id": "t1", "status": "failed", "reason": "a quarantined task is retried by an admin only"}]
    assert store.get("tasks", "t1")["_rev"].startswith("1-")
    assert store.get(AUDIT, out.audit)["counts"]["refused"] == 1


def test_only_a_person_makes_a_bulk_action(jobs, rules, clock):
    failed(jobs, 1)
    with pytest.raises(Forbidden, match="bulk actions are a person's: device:builder may not make them"):
        bulk(Ledger(jobs, "device:builder", clock), rules, "jobs", "retry", Filter())
    assert jobs.get("jobs", "j000")["status"] == "failed"


def test_a_concurrent_change_to_one_document_is_refused_for_that_document_only(jobs, rules, clock, backend_url, make_store):
    """Another person retries j003 (through a second store: its own connection) after the bulk action
    has read the documents and before it writes: that one is refused as changed, the others are moved."""
    ids = failed(jobs, 8)
    other = make_store(rules=rules, clock=clock)
    bo = Ledger(other, "user:bo", clock)

    class Racing:  # the store the bulk action reads through: the race starts once the last page is read
        def __init__(self, store):
            self.store = store

        def __getattr__(self, name):
            return getattr(self.store, name)

        def query(self, *args, **kwargs):
            page = self.store.query(*args, **kwargs)
            if page.next is None:
                j3 = other.get("jobs", "j003")
                bo.put("jobs", JOBS.moves["retry"].body(j3, NOW), "j003", if_rev=j3["_rev"])  # the operator's own move
            return page

    out = bulk(Ledger(Racing(jobs), "user:ana", clock), rules, "jobs", "retry", Filter(status="failed"))  # type: ignore[arg-type]
    assert out.conflicts == 1
    assert out.refused == [{"id": "j003", "status": "failed", "reason": "changed by another writer since it was read: left as it is now"}]
    assert out.written == [i for i in ids if i != "j003"]
    j3 = jobs.get("jobs", "j003")
    assert (j3["retries"], j3["_rev"][:2], jobs.history("jobs", "j003")[-1].actor) == (1, "2-", "user:bo")
    assert {jobs.history("jobs", i)[-1].actor for i in out.written} == {"user:ana"}
    assert jobs.get(AUDIT, out.audit)["counts"]["conflicts"] == 1


def test_cancelling_pending_jobs(jobs, rules, clock):
    for i in range(3):
        jobs.put("jobs", {"type": "job", "status": "pending", "input": {"n": i}}, f"p{i}", actor="user:ana")
    out = bulk(Ledger(jobs, "user:ana", clock), rules, "jobs", "cancel", Filter())
    assert out.written == ["p0", "p1", "p2"]
    assert {d["status"] for d in (jobs.get("jobs", f"p{i}") for i in range(3))} == {"cancelled"}


def test_an_action_a_database_has_no_move_for_is_refused_whole(jobs, rules, clock):
    ana = Ledger(jobs, "user:ana", clock)
    with pytest.raises(NotFound, match="nothing in 'jobs' can be dismissed: dismiss applies to deadletters"):
        bulk(ana, rules, "jobs", "dismiss", Filter())
    with pytest.raises(Usage, match="no bulk action 'rerun'"):
        bulk(ana, rules, "jobs", "rerun", Filter())
    with pytest.raises(Usage, match="--field and --key"):
        Filter(field="batch")


def test_audit_records_cannot_be_changed_by_a_person(jobs, rules, clock):
    failed(jobs, 1)
    out = bulk(Ledger(jobs, "user:ana", clock), rules, "jobs", "retry", Filter())
    record = jobs.get(AUDIT, out.audit)
    with pytest.raises(Forbidden):
        jobs.put(AUDIT, {**{k: v for k, v in record.items() if k != "_rev"}, "by": "user:someone-else"}, out.audit,
                 actor="user:ana", if_rev=record["_rev"])
    with pytest.raises(Conflict):
        jobs.put(AUDIT, {"kind": "bulk-action", "status": "recorded"}, out.audit, actor="user:ana", create_only=True)


def test_dead_letters_are_replayed_through_the_handler_that_gave_up_or_dismissed(jobs, rules, clock):
    broken = {"n001"}
    seen = []

    def picky(change, ctx):
        if change.id in broken:
            raise RuntimeError(f"cannot handle {change.id}")
        seen.append((change.id, ctx.db.actor))

    handler = Handler("picky", ["notes"], picky, backoff=0.001, max_tries=2)
    for i in range(3):
        jobs.put("notes", {"i": i}, f"n{i:03d}", actor="user:ana")
    feed = Feed(jobs, [handler, replayer([handler])], clock=SYSTEM)
    feed.drain()
    assert [s[0] for s in seen] == ["n000", "n002"]
    [letter] = jobs.query("deadletters", "status", "open").docs
    ana = Ledger(jobs, "user:ana", clock)

    out = bulk(ana, rules, "deadletters", "retry", Filter())  # still broken: it fails again and is open once more
    assert out.written == [letter["_id"]]
    feed.drain()
    again = jobs.get("deadletters", letter["_id"])
    assert (again["status"], again["replays"]) == ("open", 1)
    assert again["error"] == "replayed and failed again: RuntimeError: cannot handle n001"

    broken.clear()  # fixed: the replay goes through, as the handler itself
    bulk(ana, rules, "deadletters", "retry", Filter(error="cannot handle"))
    feed.drain()
    done = jobs.get("deadletters", letter["_id"])
    assert (done["status"], done["replays"]) == ("replayed", 2)
    assert seen[-1] == ("n001", "handler:picky")

    jobs.put("notes", {"i": 9}, "n001", actor="user:ana")  # a second letter, dismissed this time
    broken.add("n001")
    feed.drain()
    out = bulk(ana, rules, "deadletters", "dismiss", Filter(status="open"))
    assert len(out.written) == 1 and jobs.get("deadletters", out.written[0])["status"] == "dismissed"


def test_a_confirmed_set_that_changed_meanwhile_is_shown_again_and_nothing_is_written(jobs, rules, clock):
    failed(jobs, 3)
    seen = bulk(Ledger(jobs, "user:ana", clock), rules, "jobs", "retry", Filter(status="failed"), dry_run=True)
    failed(jobs, 1, first=3)  # a fourth job fails the same way before the person confirms the three they saw
    head = jobs.head_seq()
    out = bulk(Ledger(jobs, "user:ana", clock), rules, "jobs", "retry", Filter(status="failed"), expect=seen.digest)
    assert (out.changed, out.matched, out.audit, jobs.head_seq()) == (True, 4, None, head)
    again = bulk(Ledger(jobs, "user:ana", clock), rules, "jobs", "retry", Filter(status="failed"), expect=out.digest)
    assert (again.changed, len(again.written)) == (False, 4) and again.audit is not None
