"""The test kit's in-memory store, beyond the contract suite it passes (tests/contract): its
databases are apart, its stores on one database share it, and what closes says so."""

from __future__ import annotations

import threading

import pytest

from ledger import SYSTEM, BackendError, Invalid, Rules
from skyhub_testkit.memory import MemoryDatabase, memory_store, open_memory


def test_two_databases_share_nothing_and_two_stores_on_one_share_everything():
    with MemoryDatabase() as one, MemoryDatabase() as other:
        a, b = one.open(Rules(), SYSTEM), one.open(Rules(), SYSTEM)
        c = other.open(Rules(), SYSTEM)
        a.put("notes", {"v": 1}, "n", actor="user:ana")
        assert b.get("notes", "n")["v"] == 1
        assert not c.has_db("notes")
        for store in (a, b, c):
            store.close()


def test_a_store_of_its_own_goes_with_its_database():
    store = memory_store(Rules(), SYSTEM)
    store.put("notes", {"v": 1}, "n", actor="user:ana")
    url = store.url
    store.close()
    with pytest.raises(Invalid, match="MemoryDatabase"):
        open_memory(url, None, SYSTEM)
    with pytest.raises(BackendError, match="closed"):
        store.get("notes", "n")


def test_a_closed_database_is_refused_by_every_store_on_it():
    database = MemoryDatabase()
    store = open_memory(database.url, Rules(), SYSTEM)
    database.close()
    with pytest.raises(BackendError, match="was closed"):
        store.put("notes", {"v": 1}, "n", actor="user:ana")


def test_an_operation_begun_inside_another_on_one_thread_is_refused_at_once():
    store = memory_store(Rules(), SYSTEM)
    try:
        with store._tx(), pytest.raises(BackendError, match="inside another one on the same thread"):
            store.head_seq()
        assert store.head_seq() == 0  # the connection came back
    finally:
        store.close()


def test_a_commit_wakes_the_listeners_of_the_other_stores_on_the_database():
    with MemoryDatabase() as database:
        here, there = database.open(Rules(), SYSTEM), database.open(Rules(), SYSTEM)
        woken = threading.Event()
        here.subscribe(lambda change: woken.set() if change is None else None)
        there.put("notes", {"v": 1}, "n", actor="user:ana")
        assert woken.is_set()  # at the commit, in the writer's thread: no poll
        here.close()
        there.close()


def test_a_name_in_use_is_refused():
    with MemoryDatabase("twice"):
        with pytest.raises(Invalid, match="already"):
            MemoryDatabase("twice")
