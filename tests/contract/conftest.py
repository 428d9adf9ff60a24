"""The contract suite's backends: each test runs on SQLite, PostgreSQL and the test kit's
in-memory store (``skyhub_testkit.memory``); a test marked ``durable`` needs a database that
outlives this process (other processes open it, or an earlier version made it) and runs on
SQLite and PostgreSQL only. ``test_store.py`` adds the remote backend, a hub over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import BACKENDS

STORE_BACKENDS = [*BACKENDS, "memory"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        kinds = BACKENDS if metafunc.definition.get_closest_marker("durable") else STORE_BACKENDS
        metafunc.parametrize("backend", kinds, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend_url(backend: str, request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    """A fresh database of the test's backend: a SQLite file, a PostgreSQL schema, or an in-memory database."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path}/skyhub.db"
    elif backend == "postgres":
        yield request.getfixturevalue("pg_url")
    else:
        yield request.getfixturevalue("memory_database").url
