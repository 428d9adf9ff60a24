"""Shared fixtures. Backends are real: a SQLite file in a temporary folder, and a fresh schema
in the PostgreSQL named by SKYHUB_TEST_PG_URL (started by ./dev test). PostgreSQL being
unreachable is a failure, never a skip."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from ledger import SYSTEM, Clock, Rules, deadletter_machine, open_store
from ledger.jobs import JOBS
from ledger.sql import SQLStore
from skyhub_testkit.memory import SCHEME as MEMORY
from skyhub_testkit.memory import open_memory
from skyhub_testkit.postgres import PG_URL, pg_schema_url, schema  # noqa: F401 - PG_URL and pg_schema_url for other tests

BACKENDS = ["sqlite", "postgres"]
pytest_plugins = ["skyhub_testkit.fixtures"]  # pg_url, memory_database, fake_clock, skyhub_hub


@contextmanager
def database(kind: str, folder: object) -> Iterator[str]:
    """A fresh database of ``kind`` ("sqlite": a file in ``folder``; "postgres": a new schema) for a ``with`` block."""
    if kind == "sqlite":
        yield f"sqlite:///{folder}/hub.db"
    else:
        with schema() as url:
            yield url


@pytest.fixture(params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/skyhub.db"
    else:
        yield request.getfixturevalue("pg_url")


def default_rules() -> Rules:
    return Rules([JOBS, deadletter_machine()])


StoreFactory = Callable[..., SQLStore]


def open_backend(url: str, rules: Rules | None = None, clock: Clock = SYSTEM, **settings: object) -> SQLStore:
    """``open_store``, or for a ``memory://`` URL a store on the test kit's in-memory database of that name."""
    if url.startswith(MEMORY):
        return open_memory(url, rules, clock)
    return open_store(url, rules, clock, **settings)  # type: ignore[arg-type]


def store_factory(url: str, opened: list) -> StoreFactory:
    """``factory(rules=..., clock=...)`` opens a store on ``url`` and remembers it in ``opened``."""

    def factory(rules: Rules | None = None, clock: Clock = SYSTEM) -> SQLStore:
        store = open_backend(url, rules if rules is not None else default_rules(), clock)
        opened.append(store)
        return store

    return factory


@pytest.fixture
def make_store(backend_url: str) -> Iterator[StoreFactory]:
    """Open stores on the test's backend: ``make_store(rules=..., clock=...)``."""
    opened: list[SQLStore] = []
    yield store_factory(backend_url, opened)
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> SQLStore:
    return make_store()


# ---- the remote backend: a real `skyhub run` per database kind, shared by a session -------
REMOTE_BACKENDS = ["remote-sqlite", "remote-postgres"]


def reset_database(url: str) -> None:
    """Empty everything but the credentials, between tests that share one hub."""
    statements = [
        "DELETE FROM docs WHERE db <> 'auth'", "DELETE FROM changes WHERE db <> 'auth'",
        "DELETE FROM feed_cursors", "DELETE FROM feed_leases", "DELETE FROM tick_runs",
    ]
    if url.startswith("sqlite:///"):
        import sqlite3

        conn = sqlite3.connect(url[len("sqlite:///"):], timeout=30)
        with conn:
            for s in statements:
                conn.execute(s)
        conn.close()
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            for s in statements:
                conn.execute(s)


@pytest.fixture(scope="session")
def remote_hubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], object]]:
    from contextlib import ExitStack

    from skyhub_testkit.hub import Hub

    hubs: dict[str, Hub] = {}
    with ExitStack() as databases:

        def get(kind: str) -> Hub:
            if kind not in hubs:
                folder = tmp_path_factory.mktemp(f"hub-{kind}")
                hubs[kind] = Hub(databases.enter_context(database(kind, folder)), folder, jobs=False)
            return hubs[kind]

        yield get
        for hub in hubs.values():
            hub.stop()
