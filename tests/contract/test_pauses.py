"""Pauses (``ledger/pause.py``): documents every process of a hub reads, so a tick paused by one
process is recorded as ``paused`` by the scheduler of another, and runs again once resumed."""

from __future__ import annotations

import pytest

from ledger import FakeClock, Forbidden, Invalid, Ledger, NotFound, Rules, Scheduler, Tick
from ledger.pause import PAUSE, PAUSES, parse_target, pause, pause_of, paused, resume

TICKS = ["publish", "ingest", "sweep"]
SCOPES = {"ig": "Instagram posts wait", "bsky": "Bluesky posts wait"}


def rules(roles=None):
    made = Rules([PAUSE])
    if roles is not None:
        made.roles_from(lambda actor, read: roles.get(actor))
    return made


@pytest.mark.parametrize("text, target", [
    ("publish", "tick:publish"), ("tick:ingest", "tick:ingest"), (" ig ", "ig"), ("ig:17841400000000000", "ig:17841400000000000"),
    ("bsky:shop.bsky.social", "bsky:shop.bsky.social"),
])
def test_targets_are_ticks_platforms_and_accounts(text, target):
    assert parse_target(text, TICKS, SCOPES) == target


@pytest.mark.parametrize("text, says", [
    ("", "name what to pause"), ("publsh", "nothing to pause is named 'publsh'"), ("tick:nope", "no tick named 'nope'"),
    ("x:shop", "no platform named 'x'"), ("ig:", "is not an account"), ("ig:two words", "is not an account"),
    ("sweep", "cannot be paused"), ("tick:sweep", "cannot be paused"),
])
def test_a_bad_target_is_refused_with_what_there_is(text, says):
    with pytest.raises(Invalid, match=says) as err:
        parse_target(text, TICKS, SCOPES)
    if "nothing" in says:
        assert "ticks: ingest, publish; platforms: bsky, ig" in err.value.reason


def test_a_tick_paused_by_one_process_is_recorded_as_paused_by_another_and_runs_again_once_resumed(make_store):
    clock = FakeClock(1_700_000_000_000)
    runs = []
    tick = Tick("publish", "1m", lambda event, ctx: runs.append(event.scheduled_ms))
    operator = Ledger(make_store(rules=rules(), clock=clock), "user:ana", clock)
    hub = Scheduler(make_store(rules=rules(), clock=clock), [tick], clock=clock, owner="hub")
    assert hub.run("publish") == "ok"
    pause(operator, "tick:publish", "Meta's API is down")
    for _ in range(2):
        clock.advance(60_000)
        assert hub.run("publish") == "paused"
    assert hub.run("publish", manual=True) == "paused"  # skyhub tick publish too
    assert len(runs) == 1
    assert [r.outcome for r in hub.store.tick_runs("publish")] == ["paused", "paused", "paused", "ok"]
    resume(operator, "tick:publish")
    clock.advance(60_000)
    assert hub.run("publish") == "ok" and len(runs) == 2
    history = operator.history(PAUSES, "tick:publish")
    assert [(c.doc["status"], c.actor) for c in history] == [("paused", "user:ana"), ("resumed", "user:ana")]
    assert history[0].doc["reason"] == "Meta's API is down"


def test_pause_is_idempotent_resume_says_when_nothing_is_paused_and_a_pause_comes_back(store):
    clock = FakeClock(1_700_000_000_000)
    db = Ledger(make := store, "user:ana", clock)
    with pytest.raises(NotFound, match="ig is not paused"):
        resume(db, "ig")
    first = pause(db, "ig:shop", "checking the token")
    assert pause(db, "ig:shop", "again")["_rev"] == first["_rev"]  # already paused: unchanged
    assert set(paused(make)) == {"ig:shop"}
    resume(db, "ig:shop")
    assert paused(make) == {}
    pause(db, "ig:shop")
    assert paused(make)["ig:shop"]["reason"] is None
    active = paused(make)
    assert pause_of(active, "ig", "shop")["_id"] == "ig:shop" and pause_of(active, "ig", "other") is None
    pause(db, "ig")
    assert pause_of(paused(make), "ig", "other")["_id"] == "ig"
    with pytest.raises(Invalid, match="at most 500"):
        pause(db, "bsky", "x" * 501)


def test_only_an_admin_pauses_or_resumes(make_store):
    clock = FakeClock(1_700_000_000_000)
    store = make_store(rules=rules({"user:ed": "editor", "user:ana": "admin"}), clock=clock)
    with pytest.raises(Forbidden):
        pause(Ledger(store, "user:ed", clock), "tick:publish")
    with pytest.raises(Forbidden):
        pause(Ledger(store, "tick:publish", clock), "tick:publish")
    pause(Ledger(store, "user:ana", clock), "tick:publish")
    with pytest.raises(Forbidden):
        resume(Ledger(store, "user:ed", clock), "tick:publish")
    resume(Ledger(store, "admin", clock), "tick:publish")
