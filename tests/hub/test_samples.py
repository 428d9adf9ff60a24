"""Queue depth samples in the ledger (``hub/samples.py``): the hub's ``sample`` tick writes one a
minute, the Activity reader shows them after the hub restarts, and the ring keeps at most
``activity.samples_kept`` worth of minutes, overwriting the oldest."""

from __future__ import annotations

import pytest

from hub.app import build_app
from hub.console.activity import Activity
from hub.samples import SAMPLES_DB, read_samples
from hub.settings import load_settings
from ledger import FakeClock, Ledger
from ledger.jobs import JOBS


@pytest.fixture
def settings(tmp_path, monkeypatch, key_text):
    monkeypatch.setenv("SKYHUB_VAULT_KEY", key_text)
    monkeypatch.setenv("SKYHUB_ACTIVITY__SAMPLES_KEPT", "1h")
    return load_settings(None, database_url=f"sqlite:///{tmp_path}/x.db")


@pytest.fixture
def key_text():
    from vault import new_key_text

    return new_key_text()


def _sample(app) -> None:
    tick = next(t for t in app.ticks if t.name == "sample")
    assert tick.seconds == 60
    tick.fn(None, None)  # type: ignore[arg-type]


def test_the_depth_history_is_still_there_after_the_hub_restarts(settings):
    clock = FakeClock(1_800_000_000_000)
    first = build_app(settings, clock=clock)
    try:
        ana = Ledger(first.store, "user:ana", clock)
        for i in range(3):
            ana.put("jobs", {"type": "job", "status": "pending", "input": {"n": i}, "attempts": 0}, f"j{i}")
        _sample(first)
        clock.advance(60_000)
        ana.put("jobs", {"type": "job", "status": "pending", "input": {"n": 9}, "attempts": 0}, "j9")
        _sample(first)
    finally:
        first.stop()
    clock.advance(120_000)
    again = build_app(settings, clock=clock)  # a new process on the same database: nothing kept in memory
    try:
        activity = Activity(again.store, again.rules, now=clock.now_ms)
        activity.advance()
        depth = activity.series()["depth"]
        assert [(at, d[JOBS.name]) for at, d in depth] == [(1_800_000_000_000 // 60_000 * 60_000, 3),
                                                           (1_800_000_000_000 // 60_000 * 60_000 + 60_000, 4)]
        assert activity.series()["since"] == depth[0][0]
    finally:
        again.stop()


def test_the_ring_keeps_at_most_the_setting_overwriting_the_oldest(settings):
    clock = FakeClock(1_800_000_000_000)
    app = build_app(settings, clock=clock)
    try:
        for _ in range(75):  # an hour and a quarter, once a minute, with a ring of an hour
            _sample(app)
            clock.advance(60_000)
        kept = app.store.by_time(SAMPLES_DB, "kept", 1000)
        assert len(kept.docs) == 60  # never more documents than the ring
        ats = sorted(d["at"] for d in kept.docs)
        assert ats[-1] - ats[0] == 59 * 60_000 and ats[-1] == (clock.now_ms() - 60_000) // 60_000 * 60_000
        assert len(read_samples(app.store, ats[0])) == 60
        assert app.store.counts(SAMPLES_DB)[0].n == 60
    finally:
        app.stop()
