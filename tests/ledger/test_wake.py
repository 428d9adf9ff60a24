"""Wake-up sockets between stores on one SQLite file (in one process here; across processes
in tests/integration/test_sqlite_processes.py)."""

from __future__ import annotations

import logging
import os
import socket
import threading

import pytest

from ledger import SYSTEM, Invalid, open_store
from ledger.sqlite import SQLiteStore
from ledger.wake import ADDRESS_MAX, Listener, new_token, wake_folder


@pytest.fixture
def stores(tmp_path):
    opened = []

    def make(**options):
        store = SQLiteStore(str(tmp_path / "skyhub.db"), None, SYSTEM, **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def waiter():
    calls, arrived = [], threading.Event()

    def listener(change):
        calls.append(change)
        arrived.set()

    return listener, calls, arrived


def test_a_listener_ignores_a_datagram_carrying_its_own_token(tmp_path):
    token = new_token()
    listener = Listener(str(tmp_path / "db.wake"), token)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            sender.sendto(token, listener.path)
            assert listener.wait(5) is False  # its own: no wake-up
            sender.sendto(new_token(), listener.path)
            assert listener.wait(5) is True
    finally:
        listener.close()
    assert not (tmp_path / "db.wake").exists()


def test_a_store_does_not_send_its_own_commits_to_its_own_socket(stores):
    mine = stores(poll_interval=30)
    listener, calls, arrived = waiter()
    mine.subscribe(listener)
    assert mine._peers.notify() == 0, "a store sent a wake-up to itself"
    mine.put("notes", {"i": 0}, "n0", actor="user:ana")
    assert [c.id if c else None for c in calls] == ["n0"]  # the write itself, and no wake-up from its own socket
    other = stores()
    other.subscribe(lambda change: None)
    assert mine._peers.notify() == 1  # only the other store


def test_a_store_that_subscribes_after_a_writer_listed_the_folder_gets_the_next_commit(stores):
    writer = stores()
    writer.put("notes", {"i": 0}, "n0", actor="user:ana")  # nobody listens: the writer saw no folder
    assert writer._peers.notify() == 0
    late = stores(poll_interval=30)
    listener, calls, arrived = waiter()
    late.subscribe(listener)
    arrived.clear()
    writer.put("notes", {"i": 1}, "n1", actor="user:ana")
    assert arrived.wait(10), "the new listener was not woken by the next commit"
    late.close()
    assert writer._peers.notify() == 0
    assert not os.path.exists(wake_folder(writer.path))


def test_a_socket_nobody_is_bound_to_is_removed_by_the_writer(stores, tmp_path):
    folder = tmp_path / "skyhub.db.wake"
    folder.mkdir()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(str(folder / "99999-deadbeef.sock"))
    dead.close()  # like a process killed before it could remove its socket
    writer = stores()
    writer.put("notes", {"i": 0}, "n0", actor="user:ana")
    assert list(folder.iterdir()) == []


def test_where_sockets_cannot_be_made_the_store_polls_and_says_so_and_writes_still_work(stores, tmp_path, caplog):
    (tmp_path / "skyhub.db.wake").write_text("not a folder")
    writer = stores()
    reader = stores(poll_interval=0.02)
    listener, calls, arrived = waiter()
    with caplog.at_level(logging.WARNING, logger="ledger.sqlite"):
        reader.subscribe(listener)
        arrived.clear()
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")
        writer.put("notes", {"i": 1}, "n1", actor="user:ana")
    assert writer.get("notes", "n1")["i"] == 1
    assert arrived.wait(10), "the fallback poll did not wake the listener"
    assert any("wake-up sockets unavailable" in r.getMessage() and "polling" in r.getMessage() for r in caplog.records)
    assert sum("could not wake other processes" in r.getMessage() for r in caplog.records) == 1  # once, not per commit


def test_a_path_too_long_for_a_socket_moves_the_folder_to_tmp(tmp_path):
    deep = tmp_path / ("d" * 100)
    folder = wake_folder(str(deep / "skyhub.db"))
    assert folder.startswith("/tmp/skyhub-wake-")
    assert len(os.fsencode(folder)) + 25 <= ADDRESS_MAX
    assert wake_folder(str(deep / "skyhub.db")) == folder  # every process finds the same one
    assert wake_folder(str(tmp_path / "skyhub.db")) == str(tmp_path / "skyhub.db.wake")


def test_a_long_path_store_still_wakes_through_tmp(tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    writer = SQLiteStore(str(deep / "skyhub.db"), None, SYSTEM)
    late = SQLiteStore(str(deep / "skyhub.db"), None, SYSTEM, poll_interval=30)
    try:
        listener, calls, arrived = waiter()
        late.subscribe(listener)
        arrived.clear()
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")
        assert arrived.wait(10)
    finally:
        late.close()
        writer.close()
    assert not os.path.exists(wake_folder(str(deep / "skyhub.db")))


def test_an_unknown_wake_setting_is_refused_with_a_sentence(tmp_path, monkeypatch):
    monkeypatch.setenv("SKYHUB_SQLITE_WAKE", "inotify")
    with pytest.raises(Invalid, match="SKYHUB_SQLITE_WAKE must be one of sockets, poll, not 'inotify'"):
        open_store(f"sqlite:///{tmp_path}/skyhub.db", None, SYSTEM)


def test_poll_mode_makes_no_socket_but_still_delivers(tmp_path, monkeypatch):
    monkeypatch.setenv("SKYHUB_SQLITE_WAKE", "poll")
    url = f"sqlite:///{tmp_path}/skyhub.db"
    writer, reader = open_store(url, None, SYSTEM), open_store(url, None, SYSTEM)
    try:
        listener, calls, arrived = waiter()
        reader.subscribe(listener)
        arrived.clear()
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")
        assert arrived.wait(10)
        assert not (tmp_path / "skyhub.db.wake").exists()
    finally:
        writer.close()
        reader.close()


def test_closing_does_not_hang_when_the_socket_queue_is_full(stores):
    store = stores(poll_interval=30)
    store.subscribe(lambda change: None)
    store._closed.set()  # the watcher stops reading, as if it had died
    store._listener.interrupt()
    store._poller.join(10)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        with pytest.raises(BlockingIOError):
            for _ in range(10_000):
                sender.sendto(b"x", store._listener.path)
    done = threading.Event()
    threading.Thread(target=lambda: (store.close(), done.set()), daemon=True).start()
    assert done.wait(10), "close() hung on a full wake-up socket"
