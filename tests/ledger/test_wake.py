"""Wake-up sockets between stores on one SQLite file (in one process here; across processes
in tests/integration/test_sqlite_processes.py)."""

from __future__ import annotations

import logging
import os
import socket
import threading

import pytest

from ledger import SYSTEM, Feed, Handler, Invalid, Rules, open_store
from ledger.actor import handler as handlers
from ledger.actor import user
from ledger.sqlite import SQLiteStore
from ledger.store import Elsewhere
from ledger.wake import ADDRESS_MAX, Listener, new_token, wake_folder


@pytest.fixture
def stores(tmp_path):
    opened = []

    def make(rules=None, **options):
        store = SQLiteStore(str(tmp_path / "skyhub.db"), rules, SYSTEM, **options)
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
            assert listener.wait(5) == []  # its own: no wake-up
            sender.sendto(new_token(), listener.path)
            assert listener.wait(5) == [None]  # another store's, without hints: wake every handler
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


def handlers_may_write_notes():
    rules = Rules()
    rules.allow("notes", free=[user(), handlers()])
    return rules


def test_a_wake_up_names_the_database_and_actor_of_the_commit(stores):
    writer, reader = stores(handlers_may_write_notes()), stores(poll_interval=30)
    listener, calls, arrived = waiter()
    reader.subscribe(listener, hints=True)
    writer.put("notes", {"i": 0}, "n0", actor="handler:on_change")
    assert arrived.wait(10)
    assert calls == [Elsewhere("notes", "handler:on_change")]


def test_a_skip_own_feed_is_not_woken_by_its_own_writes_from_another_process(stores):
    writer, reader = stores(handlers_may_write_notes()), stores(poll_interval=30)
    got = []
    handler = Handler("worker", ["notes"], lambda change, ctx: got.append(change.id), skip_own=True)
    claims = []
    claim = reader.feed_claim
    reader.feed_claim = lambda *a, **k: claims.append(1) or claim(*a, **k)  # type: ignore[method-assign]
    feed = Feed(reader, [handler], clock=SYSTEM, idle_interval=60)
    feed.start()
    seen, _calls, seen_one = waiter()
    reader.subscribe(seen, hints=True)  # after the feed's: called after it for each wake-up
    try:
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")
        deadline = threading.Event()
        while "n0" not in got and not deadline.wait(0.01):
            pass
        deadline.wait(0.3)  # (after a short batch the runner may look once more: let it)
        before = len(claims)
        for i in range(1, 4):  # the worker's own writes, as a worker in another process makes them
            seen_one.clear()
            writer.put("notes", {"i": i}, f"n{i}", actor=handler.actor)
            assert seen_one.wait(10), "no wake-up came for the write"
        deadline.wait(0.2)  # a runner woken by them would have claimed by now
        own = len(claims) - before
        writer.put("notes", {"i": 9}, "n9", actor="user:ana")
        while "n9" not in got and not deadline.wait(0.01):
            pass
    finally:
        feed.stop()
    assert got == ["n0", "n9"]
    assert own == 0, f"{own} claims after its own writes alone: woken by them"


def test_a_writer_sends_no_datagram_for_a_commit_no_feed_of_the_listener_wants(stores):
    writer, worker = stores(handlers_may_write_notes()), stores(poll_interval=30)
    handler = Handler("worker", ["notes"], lambda change, ctx: None, skip_own=True)
    feed = Feed(worker, [handler], clock=SYSTEM, idle_interval=60)
    feed.start()
    try:
        assert writer._peers.notify("notes", handler.actor) == 0, "sent the worker a wake-up for its own kind of write"
        assert writer._peers.notify("other", "user:ana") == 0, "sent a wake-up for a database no feed reads"
        assert writer._peers.notify("notes", "user:ana") == 1
        assert writer._peers.notify() == 1  # no hint: always sent
        worker.subscribe(lambda change: None)  # a listener that wants everything widens what the store asks for
        assert writer._peers.notify("notes", handler.actor) == 1
        assert writer._peers.notify("other", "user:ana") == 1
    finally:
        feed.stop()


def _until(condition, seconds=5.0):
    deadline = threading.Event()
    for _ in range(int(seconds / 0.01)):
        if condition():
            return True
        deadline.wait(0.01)
    return condition()


def test_a_writer_does_not_wake_a_process_whose_feeds_all_have_work_in_hand_and_loses_nothing(stores):
    writer, worker = stores(handlers_may_write_notes()), stores(poll_interval=30)
    inside, release, got = threading.Event(), threading.Event(), []

    def work(change, ctx):
        got.append(change.id)
        inside.set()
        release.wait(10)

    handler = Handler("worker", ["notes"], work, skip_own=True)
    feed = Feed(worker, [handler], clock=SYSTEM, idle_interval=60)
    feed.start()
    try:
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")
        assert inside.wait(10), "the first change was not delivered"
        # the feed has a batch in hand: after the listing's first send (sent to every socket whatever the
        # boards say), the writer sends it nothing
        assert _until(lambda: writer._peers.notify("notes", "user:ana") == 0), "a busy feed was still woken"
        threading.Event().wait(0.2)  # the wake-ups those looks sent have reached the feed; forget them
        feed._wakes[handler.cursor].clear()
        writer.put("notes", {"i": 1}, "n1", actor="user:ana")  # made while it is busy, with no wake-up
        release.set()
        assert _until(lambda: "n1" in got), "a change committed while the feed was busy was never delivered"
        assert _until(lambda: writer._peers.notify("notes", "user:ana") == 1), "an idle feed is not woken"
        writer.put("notes", {"i": 2}, "n2", actor="user:ana")
        assert _until(lambda: "n2" in got), "the idle feed was not woken by the next commit"
    finally:
        release.set()
        feed.stop()
    assert got == ["n0", "n1", "n2"]


def test_a_process_with_a_listener_that_does_not_say_when_it_waits_is_always_woken(stores):
    writer, worker = stores(handlers_may_write_notes()), stores(poll_interval=30)
    inside, release = threading.Event(), threading.Event()
    feed = Feed(worker, [Handler("worker", ["notes"], lambda c, ctx: (inside.set(), release.wait(10)))],
                clock=SYSTEM, idle_interval=60)
    feed.start()
    worker.subscribe(lambda change: None, hints=True)  # the console's live view, say: not paced
    try:
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")
        assert inside.wait(10)
        for _ in range(3):
            assert writer._peers.notify("notes", "user:ana") == 1
    finally:
        release.set()
        feed.stop()


def test_a_board_that_cannot_be_read_means_send(tmp_path):
    from ledger.wake import BOARD, Peers, open_board

    listener = Listener(str(tmp_path / "db.wake"), new_token())
    try:
        board = listener.path[: -len(".sock")] + BOARD
        assert open_board(board) is not None
        listener.set_waiting(False)
        peers = Peers(listener.folder, new_token())
        assert peers.notify() == 1  # the first after a listing: every socket
        os.truncate(board, 0)  # a board that lies about its size (or an older version's missing one)
        assert open_board(board) is None
        peers.close()
    finally:
        listener.close()
    assert not (tmp_path / "db.wake").exists(), "the board outlived its listener"


def test_a_steady_stream_from_another_process_costs_its_writer_almost_no_wake_ups(stores):
    writer, worker = stores(handlers_may_write_notes()), stores(poll_interval=30)
    got = []
    feed = Feed(worker, [Handler("worker", ["notes"], lambda change, ctx: got.append(change.id), skip_own=True)],
                clock=SYSTEM, idle_interval=60)
    feed.start()
    sent = []
    notify = writer._peers.notify
    writer._peers.notify = lambda *a: sent.append(notify(*a)) or sent[-1]  # type: ignore[method-assign]
    try:
        pause = threading.Event()
        pause.wait(0.2)  # past the time a new socket makes every commit list the folder again (RACY_FINE_NS)
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")
        assert _until(lambda: got == ["n0"])
        for i in range(1, 41):  # one every 2 ms: within HOT_S of the last batch, the worker looks for itself
            writer.put("notes", {"i": i}, f"n{i}", actor="user:ana")
            pause.wait(0.002)
        assert _until(lambda: len(got) == 41), f"{len(got)} of 41 changes delivered"
    finally:
        feed.stop()
    assert got == [f"n{i}" for i in range(41)]
    # the first commit wakes it; a listing's first send goes to every socket (at most a few in the run)
    assert sum(sent[1:]) <= 3, f"{sum(sent[1:])} wake-ups sent for 40 commits to a worker that was looking anyway"


def test_a_feed_group_has_one_lead_until_it_is_let_go_or_its_process_dies(tmp_path):
    import subprocess
    import sys

    from ledger.wake import Lead

    folder = tmp_path / "db.wake"
    folder.mkdir()
    a, b, mail = Lead(str(folder), "jobs"), Lead(str(folder), "jobs"), Lead(str(folder), "mail")
    try:
        assert a.take() and not b.take(), "two runners of one group lead it at once"
        assert mail.take(), "another group's lead is its own"
        assert b.covered(), "the leader just took the lead: it looks for the group's work"
        a.busy(True)  # the leader's batch runs long: the others look for themselves
        assert _until(lambda: not b.covered())
        a.busy(False)
        assert b.covered()
        assert _until(lambda: not b.covered()), "a leader that stopped looking (a stopped process) still covers"
        a.release()
        assert not b.covered() and b.take(), "a lead let go is not taken by the next runner"
        b.release()
        code = (f"import sys, time; sys.path.insert(0, {os.getcwd()!r}); from ledger.wake import Lead; "
                f"lead = Lead({str(folder)!r}, 'jobs'); assert lead.take(); print('taken', flush=True); time.sleep(60)")
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "taken"
            assert not b.take(), "a lead held by another process was taken"
            child.kill()  # kill -9: the kernel lets go of its lock
            child.wait(10)
            assert b.take(), "the lead of a process that died was not let go"
        finally:
            child.kill()
            child.wait(10)
            child.stdout.close()  # type: ignore[union-attr]
    finally:
        for lead in (a, b, mail):
            lead.close()


def test_a_runner_stands_by_while_another_process_leads_its_group_and_looks_once_the_leader_is_stuck(stores, monkeypatch):
    from ledger import wake
    from ledger.wake import Lead

    monkeypatch.setattr(wake, "STALE_S", 3600.0)  # the leader here is this test: it never looks, and is never stale
    monkeypatch.setattr(wake, "JOIN_S", 0.05)
    writer, worker = stores(handlers_may_write_notes()), stores(poll_interval=30)
    got = []
    feed = Feed(worker, [Handler("worker", ["notes"], lambda change, ctx: got.append(change.id))],
                clock=SYSTEM, idle_interval=60)
    feed.start()
    leader = Lead(wake_folder(worker.path), "worker")
    try:
        assert leader.take()
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")  # the runner is woken, delivers it, and stands by
        assert _until(lambda: got == ["n0"])
        writer.put("notes", {"i": 1}, "n1", actor="user:ana")
        writer.put("notes", {"i": 2}, "n2", actor="user:ana")
        threading.Event().wait(0.3)
        assert got == ["n0"], "a runner looked for work while another process's leader was looking"
        leader.busy(True)  # the leader's batch runs past JOIN_S: the runner looks for itself
        assert _until(lambda: got == ["n0", "n1", "n2"], 10), f"stuck leader: {got}"
        leader.release()  # the runner takes the lead, and its work
        writer.put("notes", {"i": 3}, "n3", actor="user:ana")
        assert _until(lambda: got == ["n0", "n1", "n2", "n3"], 10), f"lead let go: {got}"
        assert not leader.take(), "the runner did not take the lead that was let go"
    finally:
        feed.stop()
        leader.close()
