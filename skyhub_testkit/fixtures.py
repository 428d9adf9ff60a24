"""The test kit as pytest fixtures, for your own tests of a hub: name this module in a
conftest.py (``pytest_plugins = ["skyhub_testkit.fixtures"]``).

    fake_clock        a ledger.FakeClock, for the store, the feed and the ticks alike
    memory_database   a MemoryDatabase (skyhub_testkit.memory), closed after the test
    pg_url            a PostgreSQL URL whose search_path is a new schema, dropped after the test
    skyhub_hub        a real ``skyhub run`` on SQLite in the test's folder (skyhub_testkit.hub.Hub)

The rest of the kit works without pytest; this module needs it (``skyhub[test]``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

try:
    import pytest
except ImportError:  # a plain install: one sentence, not a traceback into pytest's absence
    raise ImportError("skyhub_testkit.fixtures needs pytest: install skyhub[test]") from None

from ledger import FakeClock

from .memory import MemoryDatabase
from .postgres import schema


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock that moves only when the test says so."""
    return FakeClock()


@pytest.fixture
def memory_database() -> Iterator[MemoryDatabase]:
    """An in-memory database for the test; open stores on it with ``memory_database.open(rules, clock)``."""
    with MemoryDatabase() as database:
        yield database


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a new, empty schema (dropped afterwards)."""
    with schema() as url:
        yield url


@pytest.fixture
def skyhub_hub(tmp_path: Path) -> Iterator[object]:
    """``skyhub run`` on a SQLite file in the test's folder; ``.url``, ``.token(name)``, ``.admin`` (see Hub)."""
    from .hub import Hub

    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path)
    try:
        yield hub
    finally:
        hub.stop()
