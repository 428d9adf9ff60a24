"""PostgreSQL backend: the scale-out store. Several processes on several machines share it.

Commit order: every write takes one transaction-scoped advisory lock just before it appends
to the change log and holds it to commit, so sequence numbers are handed out in commit order
and a feed reader can never skip past a change that commits late. The lock is held only for
the append and the commit. LISTEN/NOTIFY wakes the feeds of other processes.

One round trip each: a write, a feed claim, renew and finish are each one statement calling a
server-side function (``ledger/schema.py``, migration 6) in that statement's own transaction.
The machine rules run here, before the call, against the head the write expects; the function
writes only if the head is still there (see ``_write`` and ``ledger/heads.py``). A batch
(``put_many``) takes the same few statements whatever its size: its heads, its documents
from arrays (``unnest``), the append lock, and its changes with one NOTIFY (``_write_docs``).

Fail fast, give back what you take: connections come from a bounded pool and return to it
after each operation. Each has TCP keepalives, a connect timeout and a statement timeout;
an operation that outlives its budget (a database that stalls with its sockets open, where
no server-side timeout can fire) has its connection cut by a watchdog, fails with
BackendError, and the pool replaces the connection.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from .clock import Clock
from .document import decode
from .errors import BackendError, Conflict, Invalid, LedgerError
from .heads import Heads
from .machine import Reader, Rules
from .schema import POSTGRES, POSTGRES_TEXTS, compile_queries
from .sql import MAX_LIMIT, Admitted, Head, Prepared, SQLStore, redact_url
from .store import Batch, Doc, NextClaim, Writes, Written

log = logging.getLogger(__name__)

CHANNEL = "skyhub_changes"
APPEND_LOCK = 0x5C4B_0001
MIGRATE_LOCK = 0x5C4B_0002

POOL_SIZE = 10  # connections per store at most; one is kept open, the others close after MAX_IDLE_S
MAX_IDLE_S = 10.0  # a burst's extra connections are given back this long after it ends
STATEMENT_TIMEOUT = 5.0  # seconds an operation may take, on the server and on the client
CONNECT_TIMEOUT = 5.0
RECONNECT_S = 10.0
LISTEN_CHECK_S = 5.0  # the LISTEN connection, idle, asks for a row this often to notice a stall
WRITE_TRIES = 5  # a head that moves this often under one write: the write takes the row lock instead
_LOCK = POSTGRES.compile("SELECT pg_advisory_xact_lock(:lock)")
# ``put_many``: a batch's documents in two statements (the new ones, then the others) and its changes in
# one, whatever its size; arrays of ids, revisions and bodies, unnested in the server
_BATCH = "unnest(:ids::text[], :revs::text[], :bodies::text[])"


def _batch_sql(text: str) -> str:
    """A batch statement with its arrays sent in binary: the text format escapes every quote of every
    body (a regular-expression substitution each, about a third of a batch's time in Python)."""
    sql = POSTGRES.compile(text)
    for name in ("ids", "revs", "bodies"):
        sql = sql.replace(f"%({name})s", f"%({name})b")
    return sql


_INSERT_DOCS = _batch_sql(
    # in id order, as the heads were locked: two batches creating the same ids wait in one order, never in a circle
    "INSERT INTO docs (db, id, rev, body, deleted, written) SELECT :db, u.id, u.rev, u.body::jsonb, 0, :at "
    f"FROM {_BATCH} AS u(id, rev, body) ORDER BY u.id ON CONFLICT (db, id) DO NOTHING RETURNING id"
)
_UPDATE_DOCS = _batch_sql(
    "UPDATE docs AS d SET rev = u.rev, body = u.body::jsonb, deleted = 0, written = :at "
    f"FROM {_BATCH} AS u(id, rev, body) WHERE d.db = :db AND d.id = u.id"
)
# the changes in the batch's order, whatever order the server makes its rows in: the batch's seqs are drawn
# first (under the append lock, taken by the statement before) and the k-th smallest goes to the k-th
# change; one NOTIFY for the batch, worded as skyhub_write words it (other processes' feeds wake once)
_APPEND_MANY = _batch_sql(
    "WITH s AS (SELECT nextval(pg_get_serial_sequence('changes', 'seq')) AS seq FROM generate_series(1, :count)), "
    "r AS (SELECT seq, row_number() OVER (ORDER BY seq) AS k FROM s), "
    "c AS (INSERT INTO changes (seq, db, id, rev, body, deleted, actor, at) "
    f"SELECT r.seq, :db, u.id, u.rev, u.body, 0, :actor, :at FROM {_BATCH} WITH ORDINALITY AS u(id, rev, body, k) "
    "JOIN r ON r.k = u.k RETURNING seq) "
    "SELECT array_agg(seq ORDER BY seq), pg_notify(:channel, max(seq)::text || ' ' || :db || ' ' || :actor || ' ' || current_schema()) FROM c"
)
_HEADS = POSTGRES.compile(
    "SELECT id, rev, body::text, deleted FROM docs WHERE db = :db AND id = ANY(:ids) ORDER BY id FOR UPDATE"
)
_WRITE = POSTGRES.compile(
    "SELECT o_seq, o_rev, o_body, o_deleted FROM skyhub_write(:db, :id, :expect, :rev, :body, :deleted::smallint, "
    ":actor, :at::bigint, :channel, :lock::bigint)"
)
_CLAIM = POSTGRES.compile(
    "SELECT * FROM skyhub_feed_claim(:handler, :dbs::text[], :owner, :now::bigint, :until::bigint, :n::integer, "
    ":skip, :max::integer)"
)
_RENEW = POSTGRES.compile(
    "SELECT skyhub_feed_renew(:handler, :after::bigint, :owner, :until::bigint, :tries::integer, :pos::bigint)"
)
_FINISH = POSTGRES.compile("SELECT skyhub_feed_finish(:handler, :after::bigint, :owner)")


class PostgresStore(SQLStore):
    """The shared store: PostgreSQL through psycopg 3 and a bounded connection pool."""

    dialect = POSTGRES
    q = compile_queries(POSTGRES, POSTGRES_TEXTS)

    def __init__(
        self, url: str, rules: Rules | None, clock: Clock, *,
        pool_size: int = POOL_SIZE, statement_timeout: float = STATEMENT_TIMEOUT, connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        super().__init__(url, rules, clock)
        if pool_size < 1 or statement_timeout <= 0 or connect_timeout <= 0:
            raise LedgerError("pool_size, statement_timeout and connect_timeout must be positive")
        self.statement_timeout = statement_timeout
        self.listen_check = LISTEN_CHECK_S
        self._kwargs = connection_options(url, connect_timeout)
        self._closed = threading.Event()
        self._pids: weakref.WeakValueDictionary[int, psycopg.Connection[Any]] = weakref.WeakValueDictionary()
        self._last_error: tuple[float, str] | None = None
        self._watchdog = _Watchdog()
        self._listener: threading.Thread | None = None
        self._schema: str | None = None  # the database schema this store writes to (read by the listener)
        self._heads = Heads()
        try:  # first contact on a connection of its own, so that a failure says why
            psycopg.connect(url, **self._kwargs).close()
        except psycopg.Error as exc:
            self._watchdog.stop()
            raise BackendError(f"cannot connect to PostgreSQL at {redact_url(url)}: {_first_line(exc)}") from exc
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url, kwargs=self._kwargs, min_size=1, max_size=pool_size, open=False, configure=self._configure,
            connection_class=_connection_class(self._connect_failed), timeout=statement_timeout,
            max_idle=MAX_IDLE_S, num_workers=2, name=f"skyhub-{id(self):x}",
            # the pool retries a failed connect after 1, 2, 4, ... s: give up on a retry after
            # RECONNECT_S and let demand start a fresh one, so a database that comes back is
            # used within seconds, not after a minute-long backoff
            reconnect_timeout=RECONNECT_S,
        )
        self._pool.open(wait=False)
        try:
            self._open_schema()
        except BaseException:
            self.close()
            raise

    # ---- connections ---------------------------------------------------------------
    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Each new pooled connection: the server-side time limits, and its pid (whose
        NOTIFYs this process has already acted on)."""
        op = self._watchdog.watch(conn, self.statement_timeout)
        try:
            ms = str(int(self.statement_timeout * 1000))
            conn.execute(
                "SELECT set_config('statement_timeout', %s, false), set_config('idle_in_transaction_session_timeout', %s, false)",
                (ms, str(int(self.statement_timeout * 2000))),
            )
        finally:
            self._watchdog.release(op)
        self._pids[conn.info.backend_pid] = conn
        self._last_error = None

    def _connect_failed(self, reason: str) -> None:
        self._last_error = (time.monotonic(), reason)

    def _borrow(self, budget: float) -> psycopg.Connection[Any]:
        try:
            conn: psycopg.Connection[Any] = self._pool.getconn(timeout=budget)
            return conn
        except PoolTimeout as exc:
            why = ""
            if self._last_error and time.monotonic() - self._last_error[0] < 60:
                why = f"; the last attempt to connect failed: {self._last_error[1]}"
            stats = self._pool.get_stats()
            raise BackendError(
                f"PostgreSQL gave no connection within {budget:.3g} s ({stats.get('pool_size', 0)} open, "
                f"{stats.get('pool_available', 0)} free, at most {self._pool.max_size}){why}"
            ) from exc
        except PoolClosed as exc:
            raise BackendError("the store is closed") from exc

    @contextmanager
    def _op(self, budget: float | None = None) -> Iterator[Any]:
        budget = budget if budget is not None else self.statement_timeout
        deadline = time.monotonic() + budget
        conn = self._borrow(budget)
        op = self._watchdog.watch(conn, budget, deadline)
        try:
            yield _Cursor(conn.cursor(), op, self)
        finally:
            self._watchdog.release(op)
            self._pool.putconn(conn)

    def _op_within(self, timeout: float) -> Any:
        return self._op(timeout)

    @contextmanager
    def _tx(self, bookkeeping: bool = False) -> Iterator[Any]:
        with self._op() as cur:
            try:
                with cur.connection.transaction():
                    if bookkeeping:
                        # Feed and tick bookkeeping may be lost in a crash without harm: a lost
                        # lease or cursor move only means a redelivery (at-least-once).
                        cur.execute("SET LOCAL synchronous_commit = off")
                    yield cur
            except psycopg.Error as exc:
                raise self._translate(exc, cur.op) from exc

    @contextmanager
    def _schema_tx(self) -> Iterator[Any]:
        """One process at a time (an advisory lock), and no time limit: an index is built
        while it takes. (CREATE INDEX blocks writes to docs meanwhile.)"""
        conn = self._borrow(self.statement_timeout)
        op = _Op(conn, math.inf)
        try:
            with conn.transaction():
                cur = _Cursor(conn.cursor(), op, self)
                cur.execute("SET LOCAL statement_timeout = 0")
                cur.execute(_LOCK, {"lock": MIGRATE_LOCK})
                yield cur
        except psycopg.Error as exc:
            raise self._translate(exc, op) from exc
        finally:
            self._pool.putconn(conn)

    def _append_change(self, cur: Any, args: dict[str, Any], again: bool = False) -> int:
        if not again:
            cur.execute(_LOCK, {"lock": APPEND_LOCK})
        args["channel"] = CHANNEL
        cur.execute(self.q.append_change, args)
        return int(cur.fetchone()[0])

    def _judge_ahead(self, work: Any) -> None:
        """Nothing: a batch's statement here judges against the heads it locks, held for a round trip alone."""

    def _write_docs(
        self, cur: Any, db: str, actor: str, prepared: list[Prepared], heads: dict[str, Head | None],
        out: list[Written | None], now: int, ahead: Any = None,
    ) -> list[Admitted]:
        """A batch's documents in at most two statements, however many there are (``SQLStore._write_docs``
        writes one at a time). Every write is judged first, in the same order and against the same heads
        as one at a time: the locked head, or the batch's earlier write of that id; the rules' reader sees
        the batch's documents admitted before (as it would if they were written). Then each document's
        last admitted revision is written: one INSERT for the new ones, one UPDATE for the others (their
        rows are locked). A new one that another writer created meanwhile is not written, and that id's
        writes are judged again as the loop judges them: against no document, a Conflict each unless
        refused otherwise. (A rule that read such a document through the batch's reader saw it written.)"""
        last: dict[str, Admitted] = {}  # each id's latest write admitted so far
        admitted: list[Admitted] = []  # every write admitted: each is a revision, in the log
        read = self._batch_reader(cur, db, last)
        order = sorted(prepared, key=lambda p: (p[1], p[0]))  # id order, a repeated id in the batch's order
        for i, doc_id, body, text, if_rev, create_only in order:
            before = last.get(doc_id)
            head = Head(before[3], before[2], False) if before is not None else heads[doc_id]
            try:
                rev = self._admit(db, doc_id, head, body, text, actor, if_rev, create_only, False, now, read=read)
            except LedgerError as exc:
                out[i] = exc
                continue
            last[doc_id] = (i, doc_id, body, rev, text)
            admitted.append(last[doc_id])
        new = [last[k] for k in last if heads[k] is None]
        lost: set[str] = set()
        if new:
            cur.execute(_INSERT_DOCS, {"db": db, "at": now, **_arrays(new)})
            lost = {d[1] for d in new} - {row[0] for row in cur.fetchall()}
        stored = [last[k] for k in last if heads[k] is not None]
        if stored:
            cur.execute(_UPDATE_DOCS, {"db": db, "at": now, **_arrays(stored)})
        for doc_id in lost:  # created by another writer since the heads were read: judged again, against nothing
            del last[doc_id]
        for i, doc_id, body, text, if_rev, create_only in order:
            if doc_id in lost:
                try:
                    self._admit(db, doc_id, None, body, text, actor, if_rev, create_only, False, now, read=read)
                    out[i] = Conflict(f"document {doc_id!r} was created in {db!r} by another writer just now")
                except LedgerError as exc:
                    out[i] = exc
        # the changes in the batch's order
        return sorted((d for d in admitted if d[1] not in lost), key=lambda d: d[0])

    def _batch_reader(self, cur: Any, db: str, last: dict[str, Admitted]) -> Reader:
        """The rules' reader for a batch being judged: the batch's own admitted documents of ``db``
        (``last``) as if written already, anything else read in the transaction."""
        read = self._reader(cur)

        def batch_read(rdb: str, rid: str) -> Doc | None:
            written = last.get(rid) if rdb == db else None
            return decode(written[4]) if written is not None else read(rdb, rid)

        return batch_read

    def _append_changes(self, cur: Any, db: str, actor: str, done: list[Admitted], now: int) -> list[int]:
        # the append lock, then every change and the one NOTIFY in one statement
        cur.execute(_LOCK, {"lock": APPEND_LOCK})
        cur.execute(_APPEND_MANY, {"db": db, "actor": actor, "at": now, "channel": CHANNEL, "count": len(done),
                                   **_arrays(done)})
        seqs = [int(seq) for seq in cur.fetchone()[0]]
        assert len(seqs) == len(done), "a change per written document"
        return seqs

    # ---- one statement per write and per feed operation -----------------------------
    def _seen(self, db: str, id: str, rev: str, text: str, deleted: bool) -> None:
        self._heads.seen(db, id, rev, text, deleted)

    def _lock_heads(self, cur: Any, db: str, ids: list[str]) -> dict[str, Head | None]:
        # one round trip for a batch's heads; rows locked in id order, as every batch locks them
        cur.execute(_HEADS, {"db": db, "ids": ids})
        heads: dict[str, Head | None] = dict.fromkeys(ids)
        for doc_id, rev, text, deleted in cur.fetchall():
            heads[doc_id] = Head(rev, decode(text), bool(deleted))
        return heads

    def _wrote(self, db: str, id: str, rev: str, text: str) -> None:
        self._heads.seen(db, id, rev, text, False, head=True)

    def _read_head(self, db: str, id: str) -> Head | None:
        with self._op() as cur:
            cur.execute(self.q.get, {"db": db, "id": id})
            row = cur.fetchone()
        if row is None:
            self._heads.forget(db, id)
            return None
        self._heads.seen(db, id, row[0], row[1], bool(row[2]), head=True)
        return Head(row[0], decode(row[1]), bool(row[2]))

    def _write(
        self, db: str, id: str, body: Doc, text: str, actor: str,
        if_rev: str | None, create_only: bool, deleted: bool, new: bool = False,
    ) -> Doc:
        """Check against the head this process knows (or reads), then write in one statement
        that commits only if the head is still that one; else check again against the head
        the statement returns. Messages and outcomes are those of the locked write. (``new``:
        an id of this store's making; every write is judged before its statement here.)"""
        now = self._clock.now_ms()
        known = self._heads.get(db, id)
        head: Head | None = None
        sure = False  # whether ``head`` was read from the database (not guessed)
        if known is not None and (if_rev is None or known[0] == if_rev):
            head = Head(known[0], decode(known[1]), known[2])
        elif if_rev is not None:
            head, sure = self._read_head(db, id), True
        # else: no revision and nothing known: guess a new document (most such writes make one)
        for _ in range(WRITE_TRIES):
            try:
                rev = self._admit(db, id, head, body, text, actor, if_rev, create_only, deleted, now)
            except LedgerError:
                if sure:
                    raise
                head, sure = self._read_head(db, id), True
                continue
            args = {
                "db": db, "id": id, "expect": head.rev if head else None, "rev": rev, "body": text,
                "deleted": int(deleted), "actor": actor, "at": now, "channel": CHANNEL, "lock": APPEND_LOCK,
            }
            with self._op() as cur:
                cur.execute(_WRITE, args)
                seq, head_rev, head_text, head_deleted = cur.fetchone()
            if seq is None:  # the head is not the one checked: check against the one there is
                head, sure = (None if head_rev is None else Head(head_rev, decode(head_text), bool(head_deleted))), True
                if head_rev is None:
                    self._heads.forget(db, id)
                else:
                    self._heads.seen(db, id, head_rev, head_text, bool(head_deleted), head=True)
                continue
            if seq == 0:
                raise Conflict(f"document {id!r} was created in {db!r} by another writer just now")
            self._heads.seen(db, id, rev, text, deleted, head=True)
            return self._written(db, id, body, rev, deleted, actor, now, int(seq))
        log.info("postgres: %s/%s kept moving under a write; writing under its row lock", db, id, extra={"db": db, "id": id})
        return super()._write(db, id, body, text, actor, if_rev, create_only, deleted)

    def feed_claim(
        self, handler: str, dbs: Sequence[str], owner: str, lease_ms: int, batch: int = 10, *, skip_actor: str | None = None,
        also: Callable[[Batch], Writes | None] | None = None, woken: bool = False,
    ) -> Batch | None:
        """Lease the next batch of ``handler``'s changes in one statement (see ``SQLStore.feed_claim``; the
        function returns at once, locking nothing, when there is nothing to claim). With ``also``, its writes
        follow in the same transaction, which then commits durably (the function's own commit need not)."""
        args = self._claim_args(handler, dbs, owner, lease_ms, batch, skip_actor)
        if also is None:
            with self._op() as cur:
                cur.execute(_CLAIM, args)
                return self._claimed(handler, cur.fetchall())
        with self._tx() as cur:
            cur.execute(_CLAIM, args)
            claimed = self._claimed(handler, cur.fetchall())
            made = self._claim_writes(claimed, also)
            if made is not None:
                cur.execute("SET LOCAL synchronous_commit = on")  # the function set it off for its bookkeeping
                self._batch_write(cur, made[1])
        self._claim_end(claimed, made)
        return claimed

    def _claim_args(
        self, handler: str, dbs: Sequence[str], owner: str, lease_ms: int, n: int, skip_actor: str | None,
    ) -> dict[str, Any]:
        now = self._clock.now_ms()
        return {
            "handler": handler, "dbs": list(dict.fromkeys(dbs)), "owner": owner, "now": now, "until": now + lease_ms,
            "n": n, "skip": skip_actor or "", "max": MAX_LIMIT,
        }

    def _claimed(self, handler: str, rows: list[Any]) -> Batch | None:
        if not rows:
            return None
        taken, after, upto, tries, pos = rows[0][:5]
        if taken:
            log.info("feed: taking over an expired batch", extra={"handler": handler, "after": after, "upto": upto})
        changes = [self._change(r[5:]) for r in rows if r[5] is not None]
        return Batch(handler, int(after), int(upto), changes, int(tries), int(pos), taken=bool(taken))

    def feed_renew(self, batch: Batch, owner: str, lease_ms: int) -> bool:
        """Extend a batch's lease and record its progress, in one statement."""
        args = {
            "handler": batch.handler, "after": batch.after, "owner": owner, "until": self._clock.now_ms() + lease_ms,
            "tries": batch.tries, "pos": batch.pos,
        }
        with self._op() as cur:
            cur.execute(_RENEW, args)
            return bool(cur.fetchone()[0])

    def feed_finish(self, batch: Batch, owner: str, *, also: Writes | None = None, then: NextClaim | None = None) -> bool:
        """Drop a finished batch's lease and move the cursor, in one statement; with ``also``, its writes follow
        in the same transaction, which then commits durably; with ``then``, the next batch's claim (one
        statement, with its writes) too: one commit for the two."""
        args = {"handler": batch.handler, "after": batch.after, "owner": owner}
        if then is not None:
            then.batch = None
        if also is None and then is None:
            with self._op() as cur:
                cur.execute(_FINISH, args)
                return bool(cur.fetchone()[0])
        work = self._batch_begin(also.db, also.writes, also.actor) if also is not None else None
        nxt: Batch | None = None
        made = None
        with self._tx() as cur:
            # the cursor's row, then the next batch's claim, then every document's row, then the append lock
            # (the order every transaction takes them in: none waits for a row holding the append lock)
            cur.execute(_FINISH, args)
            finished = bool(cur.fetchone()[0])
            if then is not None and finished:
                cur.execute(_CLAIM, self._claim_args(then.handler, then.dbs, then.owner, then.lease_ms, then.n,
                                                     then.skip_actor))
                nxt = self._claimed(then.handler, cur.fetchall())
                made = self._claim_writes(nxt, then.also)
            if work is not None or made is not None:
                cur.execute("SET LOCAL synchronous_commit = on")  # the functions set it off for their bookkeeping
            self._chain_write(cur, work, made[1] if made is not None else None)
        self._chain_end(also, work, then, nxt, made)
        return finished

    def _translate(self, exc: psycopg.Error, op: _Op) -> LedgerError:
        reason = _first_line(exc)
        if op.cut:
            return BackendError(f"PostgreSQL did not answer within {op.budget:.3g} s (stalled or unreachable); the connection was dropped")
        if isinstance(exc, psycopg.errors.QueryCanceled):
            return BackendError(f"PostgreSQL stopped a statement at the {self.statement_timeout:g} s statement timeout: {reason}")
        if isinstance(exc, (psycopg.errors.ProgramLimitExceeded, psycopg.DataError)):
            return Invalid(f"PostgreSQL cannot store this: {reason}")
        if isinstance(exc, psycopg.OperationalError):
            return BackendError(f"PostgreSQL connection failed: {reason}")
        return BackendError(f"PostgreSQL failed: {reason}")

    # ---- wake-ups from other processes ---------------------------------------------
    def _start_wakeups(self) -> None:
        if self._listener is None:
            self._listener = threading.Thread(target=self._listen, name="pg-listen", daemon=True)
            self._listener.start()

    def _listen(self) -> None:
        backoff = 0.1
        while not self._closed.is_set():
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = psycopg.connect(self.url, **self._kwargs)
                row = conn.execute("SELECT current_schema()").fetchone()
                self._schema = str(row[0]) if row else None
                conn.execute(f"LISTEN {CHANNEL}")
                backoff = 0.1
                self._wake(None)  # anything committed while we were not listening
                checked = time.monotonic()
                while not self._closed.is_set():
                    # wake at once for each commit by another process (the generator would
                    # otherwise hold them until its timeout ends)
                    for note in conn.notifies(timeout=0.5):
                        if note.pid not in self._pids:
                            self._notified(note.payload)
                    if time.monotonic() - checked > self.listen_check:
                        op = self._watchdog.watch(conn, self.statement_timeout)
                        try:
                            conn.execute("SELECT 1")
                        finally:
                            self._watchdog.release(op)
                        checked = time.monotonic()
            except psycopg.Error as exc:
                if self._closed.is_set():
                    return
                log.warning("postgres: LISTEN connection lost (%s); reconnecting", _first_line(exc))
                self._closed.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                if conn is not None:
                    conn.close()

    def _notified(self, payload: str) -> None:
        """Another process committed: ``"<seq> <db> <actor> <schema>"``; the channel is the database's,
        so a commit to another schema (another skyhub on the same database) is passed over. An earlier
        version's ``"<seq> <db> <actor>"`` or bare seq wakes as before."""
        parts = payload.split(" ", 3)
        if len(parts) == 4 and parts[3] != self._schema:
            return
        if len(parts) >= 3:
            self._wake_elsewhere(parts[1], parts[2])
        else:
            self._wake(None)

    def close(self) -> None:
        """Stop the LISTEN thread and the watchdog, and close the pool's connections."""
        self._closed.set()
        self._pool.close(timeout=5)
        self._watchdog.stop()
        if self._listener is not None:
            self._listener.join(timeout=3)


def _arrays(writes: list[Admitted]) -> dict[str, list[str]]:
    """A batch's written documents as the arrays its statements unnest."""
    return {"ids": [w[1] for w in writes], "revs": [w[3] for w in writes], "bodies": [w[4] for w in writes]}


def connection_options(url: str, connect_timeout: float) -> dict[str, Any]:
    """What every connection gets, unless the URL says otherwise: a connect timeout, TCP
    keepalives (a dead peer is noticed in about a minute, idle or not) and a name."""
    given = conninfo_to_dict(url)
    options: dict[str, Any] = {"autocommit": True, "connect_timeout": max(2, math.ceil(connect_timeout))}
    defaults = {
        "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3,
        "tcp_user_timeout": 60_000, "application_name": "skyhub",
    }
    options.update({k: v for k, v in defaults.items() if k not in given})
    return options


def _connection_class(on_failure: Any) -> type[psycopg.Connection[Any]]:
    """A connection class that reports why a pool's attempt to connect failed (the pool
    itself only says that no connection came)."""

    class Connection(psycopg.Connection[Any]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
            try:
                return super().connect(conninfo, **kwargs)
            except psycopg.Error as exc:
                on_failure(_first_line(exc))
                raise

    return Connection


class _Op:
    """One operation on one connection, with the time it may take."""

    __slots__ = ("conn", "budget", "deadline", "cut")

    def __init__(self, conn: psycopg.Connection[Any], budget: float, deadline: float | None = None) -> None:
        self.conn = conn
        self.budget = budget
        self.deadline = deadline if deadline is not None else time.monotonic() + budget
        self.cut = False


class _Watchdog:
    """Cuts the connection of an operation that outlives its budget.

    A statement timeout is enforced by the server; when the server (or the network to it)
    stalls with the socket open, nothing answers and a read would wait for TCP to give up
    (about 15 minutes). The watchdog shuts the socket down instead: the waiting call fails at
    once, and the pool discards the broken connection."""

    TICK = 0.05

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: dict[int, _Op] = {}
        self._ids = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-watchdog", daemon=True)
        self._thread.start()

    def watch(self, conn: psycopg.Connection[Any], budget: float, deadline: float | None = None) -> _Op:
        op = _Op(conn, budget, deadline)
        with self._lock:
            self._ops[id(op)] = op
        return op

    def release(self, op: _Op) -> None:
        with self._lock:
            self._ops.pop(id(op), None)

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.TICK):
            now = time.monotonic()
            with self._lock:  # a released operation's connection may be lent again: cut under the lock
                for key, op in list(self._ops.items()):
                    if op.deadline <= now:
                        del self._ops[key]
                        op.cut = True
                        _shutdown(op.conn)


def _shutdown(conn: psycopg.Connection[Any]) -> None:
    try:
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=os.dup(fd))
    except (psycopg.Error, OSError):
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()
    log.warning("postgres: an operation outlived its budget; its connection was cut")


class _Cursor:
    """Translates psycopg errors into ledger errors at the one seam that calls psycopg."""

    __slots__ = ("_cur", "op", "_store")

    def __init__(self, cur: Any, op: _Op, store: PostgresStore) -> None:
        self._cur = cur
        self.op = op
        self._store = store

    def execute(self, sql: str, args: Any = None) -> _Cursor:
        try:
            self._cur.execute(sql, args, prepare=True)
        except psycopg.Error as exc:
            raise self._store._translate(exc, self.op) from exc
        return self

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()  # type: ignore[no-any-return]

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)

    @property
    def connection(self) -> psycopg.Connection[Any]:
        return self._cur.connection  # type: ignore[no-any-return]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
