"""One clock: the composition root makes it and hands it to every part (the store, the feed,
the scheduler, the sweep, the gate's signature times, the console's sessions and activity), so
a fake clock in a test moves them all at once; no part of the hub reaches past it."""

from __future__ import annotations

from pathlib import Path

from hub.app import build_app
from hub.auth import add_user
from hub.console.overview import overview
from hub.console.web import Console
from hub.settings import load_settings
from ledger import FakeClock, Ledger

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_900_000_000_000


def test_a_fake_clock_moves_every_part_of_the_hub(tmp_path):
    clock = FakeClock(NOW)
    app = build_app(load_settings(database_url=f"sqlite:///{tmp_path}/hub.db"), clock=clock)
    try:
        for part in (app.store, app.feed, app.scheduler, app.sweeper):
            assert part.clock is clock, part
        console = Console.make(app)
        assert console.sessions.clock is clock and console.started_at == NOW
        doc = Ledger(app.store, "user:ana").put("notes", {"v": 1})
        assert app.store.history("notes", doc["_id"])[0].at == NOW  # the store writes the clock's time
        clock.advance(90_000)
        assert overview(app)["at"] == NOW + 90_000 and app.context("vault", "tick:vault").now() == NOW + 90_000
        token = add_user(app.store, "ana")
        cookie, session = console.sessions.sign_in(token)
        assert session.expires_at > NOW + 90_000  # sessions live on the same clock
    finally:
        app.stop()


def test_no_module_of_the_hub_reads_the_stores_clock():
    for path in (ROOT / "hub").rglob("*.py"):
        assert "store.clock" not in path.read_text(), f"{path.relative_to(ROOT)} reaches the store's clock; use the hub's"
