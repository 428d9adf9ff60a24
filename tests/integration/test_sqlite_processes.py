"""SQLite across OS processes: a handler in another process is woken by a socket, not by a
poll interval; the poll still works without the sockets; a writer killed with SIGKILL in the
middle of its checkpoints loses no write it reported committed; the writer lock is dropped by the
kernel when its holder is killed, and a holder that never lets go delays others by its bound only."""

from __future__ import annotations

import fcntl
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger import SYSTEM
from ledger.errors import NotFound
from ledger.sqlite import SQLiteStore
from ledger.wake import wake_folder

CHILD = Path(__file__).with_name("sqlite_child.py")
pytestmark = pytest.mark.slow

PROMPT_S = 5.0  # far below the child's poll (30 s) and its feed's idle re-check (60 s)


def start_feed(db, log, *options, env=None):
    proc = subprocess.Popen([sys.executable, str(CHILD), "feed", str(db), str(log), *options], env=env)
    deadline = time.monotonic() + 60
    while not (log.exists() and "ready" in log.read_text()):
        assert proc.poll() is None, f"the feed process exited with {proc.returncode}"
        assert time.monotonic() < deadline, "the feed process did not start"
        time.sleep(0.05)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(log, doc_id, within):
    deadline = time.monotonic() + within
    while f"got {doc_id}\n" not in log.read_text():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def writer(tmp_path):
    store = SQLiteStore(str(tmp_path / "skyhub.db"), None, SYSTEM)
    yield store
    store.close()


def test_a_handler_in_another_process_is_woken_by_the_commit_not_by_a_poll(tmp_path, writer):
    db, log = tmp_path / "skyhub.db", tmp_path / "feed.log"
    proc = start_feed(db, log, "--poll-s", "30")
    try:
        folder = Path(wake_folder(str(db)))
        assert folder == tmp_path / "skyhub.db.wake"
        files = {p.suffix: p for p in folder.iterdir()}
        assert sorted(files) == [".awake", ".lead", ".sock", ".want"], sorted(files)
        socket = files[".sock"]
        assert socket.name.startswith(f"{proc.pid}-") and socket.is_socket()
        assert files[".want"].name == socket.name.replace(".sock", ".want")  # what its feed wants of others' commits
        assert files[".awake"].name == socket.name.replace(".sock", ".awake")  # whether its feed waits now
        assert files[".lead"].stat().st_size == 16  # its feed group's lead among processes (ledger/wake.py)
        for i in range(3):
            writer.put("notes", {"i": i}, f"n{i}", actor="user:ana")
            assert wait_for(log, f"n{i}", PROMPT_S), f"change {i} not handled within {PROMPT_S:g} s: no wake-up came"
    finally:
        stop(proc)
    assert not folder.exists(), "the socket (and its folder) outlived the process that closed"


def test_without_the_sockets_the_poll_still_wakes_the_other_process(tmp_path, writer):
    db, log = tmp_path / "skyhub.db", tmp_path / "feed.log"
    proc = start_feed(db, log, env={**os.environ, "SKYHUB_SQLITE_WAKE": "poll"})
    try:
        assert not Path(wake_folder(str(db))).exists(), "SKYHUB_SQLITE_WAKE=poll still made a socket"
        writer.put("notes", {"i": 0}, "n0", actor="user:ana")
        assert wait_for(log, "n0", PROMPT_S), "the data_version poll did not wake the other process"
    finally:
        stop(proc)


def test_the_socket_of_a_killed_process_is_removed_by_the_next_commit(tmp_path, writer):
    db, log = tmp_path / "skyhub.db", tmp_path / "feed.log"
    proc = start_feed(db, log, "--poll-s", "30")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    folder = Path(wake_folder(str(db)))
    assert {p.suffix for p in folder.iterdir()} == {".sock", ".want", ".awake", ".lead"}
    left = sorted(p for p in folder.iterdir() if p.suffix != ".lead")  # a group's lead is the group's, kept
    writer.put("notes", {"i": 0}, "n0", actor="user:ana")
    assert not [p for p in left if p.exists()], "the killed process's socket, wants or board outlived the next commit"
    survivor = start_feed(db, tmp_path / "feed2.log", "--poll-s", "30")
    try:
        writer.put("notes", {"i": 1}, "n1", actor="user:ana")
        assert wait_for(tmp_path / "feed2.log", "n1", PROMPT_S)
    finally:
        stop(survivor)


def test_a_writer_killed_during_checkpoints_loses_no_committed_write(tmp_path):
    db = tmp_path / "skyhub.db"
    reported: list[str] = []
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    start = 0
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, str(CHILD), "write", str(db), "--start", str(start)],
                                stdout=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda p=proc, out=lines: out.extend(p.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while len(lines) < 200:  # writing (and checkpointing) for a while
            assert proc.poll() is None, f"the writer exited with {proc.returncode}"
            assert time.monotonic() < deadline, "the writer did not get going"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.5))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join(10)
        proc.stdout.close()
        done = [line.strip() for line in lines if line.endswith("\n")]
        reported += done
        start = int(done[-1][1:]) + 1000  # past anything it may have committed without saying so
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        present = {row[0] for row in conn.execute("SELECT id FROM docs WHERE db = 'notes' AND deleted = 0")}
    finally:
        conn.close()
    missing = [doc_id for doc_id in reported if doc_id not in present]
    assert len(reported) >= 1200 and not missing, f"{len(missing)} of {len(reported)} reported writes are gone: {missing[:5]}"


def held_lock(path):
    """Whether another process holds the writer lock at ``path`` (a non-blocking flock fails)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_a_writer_killed_inside_its_transaction_leaves_no_writer_lock_behind(tmp_path, writer):
    db = tmp_path / "skyhub.db"
    proc = subprocess.Popen([sys.executable, str(CHILD), "hold", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "held\n", f"the holder exited with {proc.poll()}"
        assert held_lock(writer.writer_lock.path), "the holder's transaction did not take the writer lock"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert not held_lock(writer.writer_lock.path), "the kernel did not drop a killed holder's flock"
    writer.put("notes", {"i": 0}, "n0", actor="user:ana")
    assert writer.writer_lock.fallbacks == 0, "the write waited out the bound instead of taking the freed lock"
    assert writer.get("notes", "n0")["i"] == 0
    with pytest.raises(NotFound):
        writer.get("notes", "never")  # the killed transaction's write was rolled back


def test_a_holder_that_never_lets_go_of_the_writer_lock_delays_a_write_by_the_bound_only(tmp_path):
    db = tmp_path / "skyhub.db"
    store = SQLiteStore(str(db), None, SYSTEM, writer_wait=0.2)
    script = (
        "import fcntl, os, sys, threading; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX); "
        "print('held', flush=True); threading.Event().wait()"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, store.writer_lock.path], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "held\n"
        os.kill(proc.pid, signal.SIGSTOP)  # stopped with the lock held, as under a debugger
        store.put("notes", {"i": 0}, "n0", actor="user:ana")  # would wait forever on a blocking flock
        store.put("notes", {"i": 1}, "n1", actor="user:ana")
        assert store.writer_lock.fallbacks == 2, "the writes did not go on after the bound, to SQLite's own lock"
        assert [store.get("notes", f"n{i}")["i"] for i in range(2)] == [0, 1]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        store.close()
    again = SQLiteStore(str(db), None, SYSTEM, writer_wait=0.2)
    try:
        again.put("notes", {"i": 2}, "n2", actor="user:ana")
        assert again.writer_lock.fallbacks == 0, "the lock was not free once its holder was gone"
    finally:
        again.close()
