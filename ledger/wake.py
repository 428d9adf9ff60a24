"""Wake-ups between processes sharing one SQLite file: a Unix datagram socket per listening
store, in a folder beside the database (``skyhub.db.wake/`` for ``skyhub.db``).

- A store that subscribes binds ``<folder>/<pid>-<token>.sock`` and a thread waits on it.
- A store that commits sends a tiny datagram (``<its token> <db> <actor>``, the commit's database
  and actor as hints, as PostgreSQL's NOTIFY carries them) to every *other* socket in the folder,
  after COMMIT: a feed whose handlers skip that actor's writes, or read other databases, is not
  woken for it. A datagram of the token alone (no hint) wakes every handler.
- Beside its socket a store may publish what its feeds want (``<pid>-<token>.want``: JSON, the
  databases and the actor each skips); a sender sends that socket no datagram for a commit none
  of them wants (a jobs worker gets none for the other workers' claims). No file, or one that
  cannot be read, means everything. The file is replaced (rename: the folder's mtime moves, so
  senders read it again) when the store's wants widen; they never narrow while it listens. It never sends to its own socket (it wakes its own listeners
  directly), and a datagram carrying the receiver's own token is ignored.
- Beside its socket a store also keeps a one-byte board (``<pid>-<token>.awake``, shared memory:
  ``mmap``) saying whether any of its feeds waits for a commit. A feed that has a batch in hand
  looks again when it is done, so a sender sends no datagram to a store whose board says none
  waits: on this kind of machine waking a sleeping thread in another process costs the sender
  about 100 us (20 us median, 300 us at p90) and the receiver a thread switch in the middle of
  its batch. A feed marks itself waiting *before* the claim that may find nothing, and a sender
  reads the board *after* its commit, so one of the two always sees the other (SQLite's WAL
  index is read and written behind full memory barriers in between). The first notify after
  each new listing (at least every RELIST_S) sends to every socket whatever the boards say: a
  bounded net for a board that lies (an older version has none: always sent to) and what finds
  the sockets of processes that are gone.
- A socket nobody is bound to any more (its process was killed: ``ECONNREFUSED``) is removed
  by the first sender that finds it; a store that closes removes its own socket, and the
  folder when it is empty. A full receive queue is skipped: that process has wake-ups waiting.
- The sender caches the list of sockets and checks the folder's mtime on each commit (one
  ``stat``); it lists the folder again when the mtime changed, at least every RELIST_S, and
  on every commit while the listing is less than 2 s (RACY_NS; 50 ms, RACY_FINE_NS, when the
  mtime has sub-millisecond digits, a file system with fine timestamps) younger than that mtime
  (a socket bound within the same mtime tick as the listing would not change the mtime: the
  "racy git" rule). So a socket bound before a commit ends is in the list that commit uses.
- A new listener binds before ``subscribe`` returns, so every commit that starts after that
  reaches it; what was committed before is for the subscriber's own first look (subscribe,
  then read, as with NOTIFY), and the poll catches a commit that slipped in during the bind.

- A feed group whose runners live in several processes has a *lead* (``<hash of the group>.lead``
  in the folder; ``Lead``): the hot runner holding it (an ``flock``, released by the kernel when
  its process dies) looks for the group's work, and the others stand by without reading the
  database or being woken while it does. A stand-by looks for itself when the lead is free (and
  takes it), when the leader has been in one batch, or in batches that each found more waiting (a
  backlog), for longer than JOIN_S, or when it has not looked
  for STALE_S (a stopped process). Two workers of a group fed by a third process's stream of
  small jobs otherwise both claim each job as it comes: twice the claims and finishes, each a
  write transaction for the single writer, in batches half as large (docs/benchmarks.md, round 3,
  session 30). The lead decides only who looks: the claim's transaction still decides who gets a
  batch, so a wrong reading of it costs time, never a job.

A path longer than a socket address allows (107 bytes) moves the folder to
``/tmp/skyhub-wake-<uid>-<hash of the database's path>``. Where sockets cannot be used, the
store polls ``PRAGMA data_version`` instead (see ``ledger/sqlite.py``).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import mmap
import os
import secrets
import select
import socket
import stat
import struct
import sys
import threading
import time

log = logging.getLogger(__name__)

SUFFIX = ".wake"
RELIST_S = 1.0  # the peer list is read again at least this often
RACY_NS = 2_000_000_000  # a listing this close to the folder's mtime is not trusted (mtime granularity: up to 2 s)
# An mtime with digits below the millisecond comes from a file system with fine timestamps
# (ext4, xfs, btrfs, tmpfs): Linux stamps them from its coarse clock, a tick (1-10 ms) behind, so
# a listing this much younger than such an mtime is safe. Without it every commit in the 2 s
# after a peer bound its socket listed the folder again (0.13 ms of a 0.7 ms create, session 26).
RACY_FINE_NS = 50_000_000
ADDRESS_MAX = 107  # bytes of a socket path (sun_path holds 108 with the NUL)
NAME_MAX = 24  # "<pid>-<8 hex>.sock"
DATAGRAM_MAX = 512  # a longer hint is not sent (the token alone wakes every handler)

LEAD = ".lead"
LEAD_SIZE = 16  # two little-endian int64: the leader's batch started (monotonic ns; 0: it looks for work), its last look
JOIN_S = 0.05  # a stand-by looks for itself once the leader has been in one batch (or a backlog) this long
STALE_S = 0.01  # ... or once the leader has not looked for this long (a stopped process)

WANTS = ".want"
BOARD = ".awake"  # one byte: 1 while a feed of that store waits for a commit (or it cannot tell), 0 while all are busy
BOARD_SIZE = 8
Wants = list[tuple[frozenset[str], str | None]] | None  # None: every commit

Hint = tuple[str, str] | None
"""What a wake-up says of the commit: (db, actor), or None (anything may have changed)."""

AVAILABLE = hasattr(socket, "AF_UNIX") and sys.platform != "win32"


class WakeUnavailable(Exception):
    """Wake-up sockets cannot be used here; the reason is the message."""


def wake_folder(db_path: str) -> str:
    """The folder holding the wake-up sockets of the processes listening on ``db_path``."""
    real = os.path.realpath(db_path)
    beside = real + SUFFIX
    if len(os.fsencode(beside)) + 1 + NAME_MAX <= ADDRESS_MAX:
        return beside
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    if os.path.isdir("/tmp"):
        tmp = "/tmp"
    else:
        import tempfile  # not at import: it costs a CLI's start ~4 ms

        tmp = tempfile.gettempdir()  # one place for every process, whatever TMPDIR says
    return os.path.join(tmp, f"skyhub-wake-{os.getuid()}-{digest}")


class Peers:
    """The commit side: a datagram to every other store listening on the database."""

    def __init__(self, folder: str, token: bytes) -> None:
        self.folder = folder
        self.token = token
        self.own = ""  # this store's socket name, once it listens
        self._sock: socket.socket | None = None
        self._names: tuple[str, ...] = ()
        self._mtime = -1
        self._trusted = False
        self._expires = 0.0
        self._refused: set[str] = set()
        self._wants: dict[str, Wants] = {}
        self._boards: dict[str, mmap.mmap | None] = {}
        self._fresh = False  # the listing was just read: send to every socket, whatever the boards say
        self._lock = threading.Lock()

    def notify(self, db: str | None = None, actor: str | None = None) -> int:
        """Send the wake-up datagram (with the commit's ``db`` and ``actor`` as hints, when given) to
        every other listening store; how many were sent."""
        names = self._list()
        if not names:
            return 0
        sock = self._sock or self._open()
        data = self.token
        if db is not None and actor is not None:
            hinted = b" ".join((self.token, db.encode(), actor.encode()))
            if len(hinted) <= DATAGRAM_MAX:
                data = hinted
        sent = 0
        every, self._fresh = self._fresh, False
        for name in names:
            wants = self._wants.get(name)
            if wants is not None and db is not None and not any(db in dbs and actor != skip for dbs, skip in wants):
                continue  # none of its feeds acts on this commit
            board = self._boards.get(name)
            if board is not None and not every:
                try:
                    if not board[0]:
                        continue  # every feed there has work in hand and looks again when done
                except ValueError:
                    pass  # closed by another thread's listing just now: send
            try:
                sock.sendto(data, os.path.join(self.folder, name))
                sent += 1
            except BlockingIOError:
                pass  # its queue is full: it has wake-ups waiting already
            except ConnectionRefusedError:
                self._remove(name)  # nobody is bound to it: its process died
            except FileNotFoundError:
                self._mtime = -1  # closed meanwhile: list again
            except OSError as exc:
                if name not in self._refused:
                    self._refused.add(name)
                    log.warning("sqlite: cannot wake the process listening on %s: %s", os.path.join(self.folder, name), exc)
        return sent

    def _open(self) -> socket.socket:
        with self._lock:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.setblocking(False)
                self._sock = sock
            return self._sock

    def _list(self) -> tuple[str, ...]:
        if not os.access(self.folder, os.F_OK):  # nobody listens: 1 us, where a failing stat costs 2
            self._names, self._mtime = (), -1
            return ()
        try:
            mtime = os.stat(self.folder).st_mtime_ns
        except FileNotFoundError:
            self._names, self._mtime = (), -1
            return ()
        if mtime == self._mtime and self._trusted and time.monotonic() < self._expires:
            return self._names
        names = tuple(
            n for n in os.listdir(self.folder)
            if n.endswith(".sock") and n != self.own and n not in self._refused
        )
        self._wants = {n: read_wants(os.path.join(self.folder, n[: -len(".sock")] + WANTS)) for n in names}
        boards = {n: self._boards.pop(n) if n in self._boards else open_board(self._stem(n) + BOARD) for n in names}
        for gone in self._boards.values():
            if gone is not None:
                gone.close()
        self._boards = boards
        self._fresh = True
        self._names, self._mtime = names, mtime
        racy = RACY_FINE_NS if mtime % 1_000_000 else RACY_NS
        self._trusted = time.time_ns() - mtime >= racy
        self._expires = time.monotonic() + RELIST_S
        return names

    def _stem(self, name: str) -> str:
        return os.path.join(self.folder, name[: -len(".sock")])

    def _remove(self, name: str) -> None:
        path = os.path.join(self.folder, name)
        try:
            os.unlink(path)
            log.info("sqlite: removed the wake-up socket of a process that is gone: %s", path)
        except OSError:
            pass
        for suffix in (WANTS, BOARD):
            try:
                os.unlink(path[: -len(".sock")] + suffix)
            except OSError:
                pass
        self._mtime = -1

    def close(self) -> None:
        """Close the sending socket and the boards it read."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            for board in self._boards.values():
                if board is not None:
                    board.close()
            self._boards = {}


class Listener:
    """The listening side: this store's bound socket, and waiting on it."""

    def __init__(self, folder: str, token: bytes) -> None:
        self.folder = folder
        self.token = token
        self.name = f"{os.getpid()}-{token.decode()}.sock"
        self.path = os.path.join(folder, self.name)
        self._board: mmap.mmap | None = None
        self._sock = self._bind()
        self._sock.setblocking(False)
        self._poll = select.poll()
        self._poll.register(self._sock, select.POLLIN)

    def _bind(self) -> socket.socket:
        if not AVAILABLE:
            raise WakeUnavailable("this platform has no Unix datagram sockets")
        for _attempt in range(3):
            try:
                _make_folder(self.folder)
            except OSError as exc:
                raise WakeUnavailable(f"cannot create {self.folder}: {exc.strerror or exc}") from exc
            if self._board is None:  # before the socket: a sender that lists the socket finds its board
                self._board = make_board(self.path[: -len(".sock")] + BOARD)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.bind(self.path)
                return sock
            except FileNotFoundError:
                sock.close()  # the folder was removed by a store closing just now: make it again
            except OSError as exc:
                sock.close()
                raise WakeUnavailable(f"cannot listen on {self.path}: {exc.strerror or exc}") from exc
        raise WakeUnavailable(f"{self.folder} kept disappearing")

    def wait(self, timeout: float) -> list[Hint]:
        """Wait up to ``timeout`` seconds for datagrams; the hints of those from other stores, each
        (db, actor) once, in order (None: a wake-up without one); empty when none came."""
        if not self._poll.poll(max(timeout, 0.0) * 1000):
            return []
        hints: dict[Hint, None] = {}
        while True:  # take every wake-up queued meanwhile: one wake for all of them
            try:
                data = self._sock.recv(DATAGRAM_MAX)
            except BlockingIOError:
                return list(hints)
            parts = data.split(b" ", 2)
            if parts[0] == self.token:
                continue
            hint: Hint = None
            if len(parts) == 3:
                try:
                    hint = (parts[1].decode(), parts[2].decode())
                except UnicodeDecodeError:
                    pass
            hints[hint] = None

    def publish(self, wants: list[tuple[tuple[str, ...], str | None]] | None) -> None:
        """Tell senders which commits this store's feeds want (None: all), replacing what it said."""
        path = self.path[: -len(".sock")] + WANTS
        body = {"all": True} if wants is None else {"wants": [[list(dbs), skip] for dbs, skip in wants]}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(body, f)
        os.replace(tmp, path)

    def set_waiting(self, waiting: bool) -> None:
        """Say on the board whether any feed of this store waits for a commit (senders skip it while none does)."""
        board = self._board
        if board is not None:
            board[0] = 1 if waiting else 0

    def interrupt(self) -> None:
        """Make a ``wait`` in another thread return now (with a datagram of our own)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)  # a full queue (a watcher that stopped reading) must not hang close()
            try:
                sock.sendto(self.token, self.path)
            except OSError:
                pass  # full: the wait returns anyway

    def close(self) -> None:
        """Close the socket and remove its file, and the folder when no one else listens."""
        self._sock.close()
        stem = self.path[: -len(".sock")]
        if self._board is not None:
            self._board.close()
            self._board = None
        for path in (self.path, stem + WANTS, stem + BOARD):
            try:
                os.unlink(path)
            except OSError:
                pass  # already gone
        _remove_folder(self.folder)


class Lead:
    """One runner's handle on its feed group's lead (see the module's docstring). ``take`` before
    looking, ``busy`` around each batch, ``looked`` after each look, ``release`` when it stops
    looking and waits for a wake-up; a runner that cannot take it asks ``covered``."""

    def __init__(self, folder: str, group: str) -> None:
        name = hashlib.sha256(group.encode()).hexdigest()[:16] + LEAD
        self.path = os.path.join(folder, name)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if os.fstat(fd).st_size < LEAD_SIZE:
                os.ftruncate(fd, LEAD_SIZE)  # zeros: nobody leads (another process doing the same writes the same)
            self._map = mmap.mmap(fd, LEAD_SIZE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.held = False

    def take(self) -> bool:
        """Lead the group if nobody does; whether this runner leads now."""
        if not self.held:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
            self.held = True
            struct.pack_into("<qq", self._map, 0, 0, time.monotonic_ns())
        return True

    def busy(self, busy: bool) -> None:
        """The leader starts a batch (True: since the first of a run of batches that found more waiting,
        a backlog) or looks for work again (False)."""
        if self.held:
            now = time.monotonic_ns()
            since = struct.unpack_from("<q", self._map, 0)[0] or now if busy else 0
            struct.pack_into("<qq", self._map, 0, since, now)

    def looked(self) -> None:
        """The leader looked for work just now (it did not find any)."""
        if self.held:
            struct.pack_into("<q", self._map, 8, time.monotonic_ns())

    def covered(self) -> bool:
        """For a runner that does not lead: whether the leader is looking for the group's work (it looked
        less than STALE_S ago and has not been in its batch for JOIN_S), so this one need not."""
        busy, looked = struct.unpack_from("<qq", self._map, 0)
        now = time.monotonic_ns()
        if not looked or now - looked > STALE_S * 1e9:
            return False
        return not busy or now - busy < JOIN_S * 1e9

    def release(self) -> None:
        """Stop leading: the others look for themselves from now on."""
        if self.held:
            struct.pack_into("<qq", self._map, 0, 0, 0)
            self.held = False
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            except OSError:
                pass

    def close(self) -> None:
        """Release the lead and close the file (it stays, for the group's other processes)."""
        self.release()
        self._map.close()
        os.close(self._fd)


def read_wants(path: str) -> Wants:
    """What a listening store published (``Listener.publish``); None (everything) when there is
    no such file or it cannot be read."""
    try:
        with open(path) as f:
            body = json.load(f)
        return [(frozenset(str(d) for d in dbs), None if skip is None else str(skip)) for dbs, skip in body["wants"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def make_board(path: str) -> mmap.mmap | None:
    """This store's board, saying "waiting" (None where it cannot be made: senders then always send)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    try:
        os.write(fd, b"\x01" + bytes(BOARD_SIZE - 1))
        return mmap.mmap(fd, BOARD_SIZE)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def open_board(path: str) -> mmap.mmap | None:
    """Another store's board, read-only; None when it has none (an older version) or it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size < BOARD_SIZE:
            return None
        return mmap.mmap(fd, BOARD_SIZE, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def _remove_folder(folder: str) -> None:
    """Remove the folder if no other store listens there (groups' leads left over are removed with it)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    if any(not n.endswith(LEAD) for n in names):
        return  # another process still listens (or is binding)
    for name in names:
        try:
            os.unlink(os.path.join(folder, name))  # a stand-by still holding it open keeps its own: only slower
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass  # a store bound meanwhile


def new_token() -> bytes:
    """A random name for one store's socket, also the payload of its datagrams."""
    return secrets.token_hex(4).encode()


def _make_folder(folder: str) -> None:
    private = not folder.endswith(SUFFIX)  # the /tmp fallback: ours alone, checked
    try:
        os.mkdir(folder, 0o700 if private else 0o777)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(errno.ENOTDIR, "not a folder")
    if private and (st.st_uid != os.getuid() or st.st_mode & 0o077):
        raise OSError(errno.EPERM, "the folder belongs to someone else or is open to others")

