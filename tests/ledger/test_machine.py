"""Machines as data: declaration checks, readable refusals, diagrams."""

from __future__ import annotations

import pytest

from ledger import (
    ADMIN,
    Edge,
    Forbidden,
    InvalidMachine,
    Machine,
    Rules,
    attempts_left,
    claim,
    device,
    fresh,
    handler,
    lease_expired,
    same_claim,
    tick,
    user,
)
from ledger.jobs import JOBS

NOW = 1_700_000_000_000


def job(status, **fields):
    return {"type": "job", "status": status, "input": {"n": 1}, **fields}


def test_terminal_states_have_no_exits():
    with pytest.raises(InvalidMachine) as err:
        Machine("x", type="t", start=["a"], edges=[Edge("a", "b", by=user()), Edge("b", "a", by=user())], terminal=["b"])
    assert "terminal state 'b' has an exit" in err.value.reason


def test_every_state_must_be_reachable():
    with pytest.raises(InvalidMachine) as err:
        Machine("x", type="t", start=["a"], edges=[Edge("a", "b", by=user()), Edge("c", "d", by=user())])
    assert "c, d cannot be reached" in err.value.reason


def test_every_edge_needs_an_actor():
    with pytest.raises(InvalidMachine) as err:
        Machine("x", type="t", start=["a"], edges=[Edge("a", "b", by=[])])
    assert "has no actor" in err.value.reason


def test_type_or_kind_exactly_once_and_no_duplicates():
    with pytest.raises(InvalidMachine):
        Machine("x", start=["a"], edges=[])
    rules = Rules([JOBS])
    with pytest.raises(InvalidMachine):
        rules.declare(JOBS)


def test_new_documents_must_start_in_a_start_state_and_pass_its_check():
    with pytest.raises(Forbidden) as err:
        JOBS.check(None, job("running"), "user:ana", NOW)
    assert err.value.reason == "a new job must start in pending, not running"
    with pytest.raises(Forbidden) as err:
        JOBS.check(None, job("pending", attempts=2), "user:ana", NOW)
    assert "starts with no attempts" in err.value.reason
    JOBS.check(None, job("pending"), "user:ana", NOW)


def test_claim_guard_reasons():
    old = job("pending", attempts=0)
    cases = [
        (job("running", attempts=2, claimId="c", leaseUntil=NOW + 1), "claim must bump attempts by one"),
        (job("running", attempts=1, leaseUntil=NOW + 1), "claim needs a claimId"),
        (job("running", attempts=1, claimId="c", leaseUntil=NOW - 1), "leaseUntil"),
    ]
    for new, reason in cases:
        with pytest.raises(Forbidden) as err:
            JOBS.check(old, new, "handler:on_change", NOW)
        assert reason in err.value.reason
    JOBS.check(old, job("running", attempts=1, claimId="c", leaseUntil=NOW + 1), "handler:on_change", NOW)
    with pytest.raises(Forbidden) as err:
        JOBS.check(job("pending", attempts=3), job("running", attempts=4, claimId="c", leaseUntil=NOW + 1), "handler:on_change", NOW)
    assert "no attempts left: 3 of 3 used" in err.value.reason


def test_actor_and_transition_reasons():
    running = job("running", attempts=1, claimId="c1", leaseUntil=NOW + 1000)
    with pytest.raises(Forbidden) as err:
        JOBS.check(running, {**running, "status": "done"}, "device:builder", NOW)
    assert err.value.reason == "device:builder may not move a job from running to done (only handler:on_change)"
    with pytest.raises(Forbidden) as err:
        JOBS.check(job("done"), job("pending"), "handler:on_change", NOW)
    assert err.value.reason == "no transition done -> pending for a job"
    with pytest.raises(Forbidden) as err:
        JOBS.check(running, {**running, "status": "done", "claimId": "c2"}, "handler:on_change", NOW)
    assert "stale claim" in err.value.reason
    with pytest.raises(Forbidden) as err:
        JOBS.check(running, {**running, "status": "pending"}, "tick:sweep", NOW)
    assert "lease still held" in err.value.reason


def test_fixed_fields_cannot_change():
    running = job("running", attempts=1, claimId="c1", leaseUntil=NOW + 1000)
    with pytest.raises(Forbidden) as err:
        JOBS.check(running, {**running, "status": "done", "input": {"n": 2}}, "handler:on_change", NOW)
    assert "field 'input' of a job is fixed" in err.value.reason


def test_admin_may_repair_but_only_into_known_states():
    JOBS.check(job("failed"), job("pending"), "admin", NOW)
    with pytest.raises(Forbidden) as err:
        JOBS.check(job("failed"), job("limbo"), "admin", NOW)
    assert "is not a state" in err.value.reason


def test_rules_route_by_discriminator_and_refuse_devices_elsewhere():
    rules = Rules([JOBS])
    rules.check("jobs", None, {"type": "note", "text": "free-form"}, "user:ana", NOW, blind=True)
    with pytest.raises(Forbidden):
        rules.check("jobs", None, {"type": "note"}, "device:builder", NOW, blind=False)
    with pytest.raises(Forbidden) as err:
        rules.check("jobs", {"type": "note"}, job("done"), "user:ana", NOW, blind=False)
    assert "cannot become a job" in err.value.reason


def test_rules_allow_widens_who_writes_free_form():
    rules = Rules()
    rules.allow("checkpoints", free=[tick("ingest")])
    rules.check("checkpoints", None, {"cursor": "abc"}, "tick:ingest", NOW, blind=False)
    with pytest.raises(Forbidden):
        rules.check("checkpoints", None, {"cursor": "abc"}, "user:ana", NOW, blind=False)


def test_mermaid_lists_every_edge_with_actor_and_guards():
    text = JOBS.mermaid()
    assert text.splitlines()[0] == "stateDiagram-v2"
    assert "    [*] --> pending" in text
    assert "    pending --> running: handler:on_change [claim]" in text
    assert "    running --> pending: tick:sweep [lease_expired, attempts_left]" in text
    assert "    done --> [*]" in text and "    cancelled --> [*]" in text
    assert "    failed --> pending: user:*, admin [started_over]" in text  # a person retries a failed job


def test_mermaid_aliases_states_with_dashes():
    m = Machine(
        "requests", kind="mention", start=["pending-build"],
        edges=[
            Edge("pending-build", "building", by=device("builder"), guards=[claim]),
            Edge("building", "built", by=device("builder"), guards=[same_claim]),
            Edge("building", "pending-build", by=tick("sweep"), guards=[lease_expired, attempts_left]),
        ],
    )
    text = m.mermaid()
    assert 'state "pending-build" as pending_build' in text
    assert "pending_build --> building: device:builder [claim]" in text


def test_patterns_and_admin():
    assert handler("on_change").matches("handler:on_change")
    assert not handler("on_change").matches("handler:other")
    assert user().matches("user:ana") and not user().matches("device:ana")
    assert ADMIN.matches("admin") and str(ADMIN) == "admin"
    assert str(fresh) == "fresh"


def test_invariants_hold_on_every_edge_of_an_existing_document():
    from ledger import Guard

    frozen = Guard("body", lambda old, new, ctx: "the body is fixed once sent" if (old or {}).get("sent") and
                   old.get("body") != new.get("body") else None)
    m = Machine("mail", type="mail", start=["draft"], edges=[Edge("draft", "draft", by=user()), Edge("draft", "sent", by=user())],
                invariants=[frozen])
    m.check({"type": "mail", "status": "draft", "body": "a"}, {"type": "mail", "status": "draft", "body": "b"}, "user:ana", NOW)
    with pytest.raises(Forbidden) as err:
        m.check({"type": "mail", "status": "draft", "body": "a", "sent": True},
                {"type": "mail", "status": "sent", "body": "b", "sent": True}, "user:ana", NOW)
    assert err.value.reason == "the body is fixed once sent"
    assert "Every write of an existing document also holds: `body`." in m.markdown()


def test_settled_states_are_ends_and_a_state_reached_only_from_them_is_a_follow_up():
    m = Machine("posts", type="post", start=["pending"],
                edges=[Edge("pending", "done", by=tick("t")), Edge("pending", "error", by=tick("t")),
                       Edge("done", "commented", by=tick("t"))], settled=["done"])
    assert m.terminal == {"error", "commented"} and m.ends == {"done", "error", "commented"}
    assert m.follow_ups == {"commented"}
    with pytest.raises(InvalidMachine):
        Machine("posts", type="post", start=["a"], edges=[Edge("a", "b", by=user())], settled=["nope"])


def test_a_pattern_with_roles_asks_the_role_only_for_its_kind():
    asked = []

    def role():
        asked.append(1)
        return "editor"

    approvers = user(roles=("approver",))
    assert not approvers.matches("user:ed", role) and asked == [1]
    assert not approvers.matches("device:ed", role) and asked == [1]
    assert approvers.matches("user:ed")  # no role known: every person
    assert str(approvers) == "user:* (approver)"
