"""Scheduled ticks: one run per (tick, scheduled time), whichever process gets there first."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from ledger import SYSTEM, FakeClock, Invalid, Scheduler, Tick, parse_interval


@pytest.mark.parametrize("text,seconds", [("5s", 5), ("30s", 30), ("1m", 60), ("250ms", 0.25), ("2h", 7200), (1.5, 1.5)])
def test_intervals(text, seconds):
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "soon", "-1s", "0s", "1w"])
def test_bad_intervals_are_refused_with_a_reason(text):
    with pytest.raises(Invalid) as err:
        parse_interval(text)
    assert "interval" in err.value.reason


def test_two_processes_never_run_the_same_tick_instance(make_store):
    clock = FakeClock(1_700_000_000_000)
    runs = []
    tick = Tick("ingest", "30s", lambda event, ctx: runs.append((event.scheduled_time, ctx.db.actor)))
    a = Scheduler(make_store(clock=clock), [tick], clock=clock, owner="a")
    b = Scheduler(make_store(clock=clock), [tick], clock=clock, owner="b")
    slot = a.scheduled_time(tick)
    assert slot == b.scheduled_time(tick)  # every process agrees on the slot
    assert a.run("ingest") == "ok"
    assert b.run("ingest") == "skipped"
    clock.advance(30_000)
    assert b.run("ingest") == "ok" and a.run("ingest") == "skipped"
    assert len(runs) == 2 and runs[0][1] == "tick:ingest"
    assert runs[1][0] > runs[0][0]
    recorded = a.store.tick_runs("ingest")
    assert [(r.owner, r.outcome) for r in recorded] == [("b", "ok"), ("a", "ok")]


def test_runs_asked_for_by_a_person_in_the_same_millisecond_both_run(make_store):
    clock = FakeClock(1_700_000_000_000)  # the clock stands still: both runs begin in the same millisecond
    runs = []
    tick = Tick("publish", "1m", lambda event, ctx: runs.append(event.scheduled_ms))
    a = Scheduler(make_store(clock=clock), [tick], clock=clock, owner="a")
    b = Scheduler(make_store(clock=clock), [tick], clock=clock, owner="b")
    assert a.run("publish", manual=True) == "ok" and b.run("publish", manual=True) == "ok"
    assert len(runs) == 2 and runs[1] == runs[0] + 1
    assert sorted(r.owner for r in a.store.tick_runs("publish")) == ["a", "b"]


def test_a_failing_tick_is_recorded_with_its_error(store):
    def boom(event, ctx):
        raise RuntimeError("upstream said no")

    scheduler = Scheduler(store, [Tick("probe", "1m", boom)], clock=SYSTEM)
    assert scheduler.run("probe") == "error"
    (run,) = store.tick_runs("probe")
    assert run.outcome == "error" and "upstream said no" in run.error and run.finished_at is not None


def test_unknown_tick_names_the_known_ones(store):
    scheduler = Scheduler(store, [Tick("sweep", "30s", lambda e, c: None)], clock=SYSTEM)
    with pytest.raises(Invalid) as err:
        scheduler.run("swept")
    assert "sweep" in err.value.reason


def test_apscheduler_runs_ticks_and_two_schedulers_share_the_slots(make_store):
    lock = threading.Lock()
    runs: list[tuple[str, datetime]] = []

    def record(owner):
        def fn(event, ctx):
            with lock:
                runs.append((owner, event.scheduled_time))
        return fn

    schedulers = [
        Scheduler(make_store(), [Tick("beat", "200ms", record(owner))], owner=owner, clock=SYSTEM) for owner in ("a", "b")
    ]
    for s in schedulers:
        s.start()
    time.sleep(1.5)
    for s in schedulers:
        s.stop()
    slots = [t for _, t in runs]
    assert len(slots) >= 3, runs
    assert len(slots) == len(set(slots)), "a slot ran twice"
    assert all(t.tzinfo == UTC for t in slots)
    recorded = schedulers[0].store.tick_runs("beat", limit=100)
    assert len(recorded) == len(slots)
    assert {r.outcome for r in recorded} == {"ok"}
