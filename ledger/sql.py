"""The SQL base both real backends share: the write path, queries, history, the change log,
feed and tick bookkeeping, field indexes. Subclasses supply the connection pool, transactions
and the few steps that differ (the change append, the schema lock); the statements
themselves are declared once in ``ledger/schema.py``.

The hot path is plain DB-API: one write is a handful of statements in one transaction, with
no ORM in between (an ORM session per write costs an order of magnitude in throughput).
Every operation borrows a connection from a bounded pool for its own duration only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from dataclasses import field as default
from typing import TYPE_CHECKING, Any, ClassVar

from .actor import parse_actor
from .clock import Clock
from .document import (
    ID_MAX,
    check_cursor,
    check_db,
    check_field,
    check_id,
    check_key,
    check_seq,
    decode,
    encode,
    is_unicode,
    new_id,
    next_rev,
    parse_time_cursor,
    split_body,
    time_cursor,
    with_meta,
)
from .errors import BackendError, Conflict, Invalid, LedgerError, NotFound
from .indexes import BUILTIN, IndexCatalog
from .machine import Reader, Rules
from .schema import Dialect, Queries, declared_pairs, drop_index_sql, migrate, time_query
from .search import COUNT_CAP, SearchSQL, parse_search, search_args, search_sql
from .store import (
    MAX_SKIP,
    Batch,
    Change,
    Doc,
    Elsewhere,
    FeedPosition,
    HintedListener,
    Index,
    Listener,
    NextClaim,
    Page,
    SearchPage,
    StatusCount,
    TickRun,
    Want,
    Write,
    Writes,
    Written,
    check_batch,
)

if TYPE_CHECKING:
    from .wake import Lead

log = logging.getLogger(__name__)

MAX_LIMIT = 1000
TICK_RUNS_KEPT = 200
SCAN_ROWS = 10_000  # documents a query on a field without an index examines per page
PENDING_CAP = 10_000  # feed_position counts a handler's pending changes up to this many
SEQ_MAX = 2**63 - 1


Prepared = tuple[int, str, Doc, str, str | None, bool]
"""A batch's write that passed the checks needing no head: (index in the batch, id, body, its JSON, if_rev, create_only)."""
Admitted = tuple[int, str, Doc, str, str]


@dataclass
class _BatchWork:
    """A ``put_many`` in progress: its prepared writes, outcomes by index, and what was written."""

    db: str
    actor: str
    out: list[Written | None]
    now: int
    prepared: list[Prepared] = default(default_factory=list)
    done: list[Admitted] = default(default_factory=list)
    seqs: list[int] = default(default_factory=list)
    # judged before the transaction (``_judge_ahead``), by id: (the head's revision then or None, deleted,
    # the revision the write makes or its refusal); used where the head is still that one
    ahead: dict[str, tuple[str | None, bool, str | LedgerError]] | None = None
"""A batch's write admitted and written: (index in the batch, id, body, revision, its JSON)."""


class Head:
    """A document's head revision as a write sees it."""

    __slots__ = ("rev", "body", "deleted")

    def __init__(self, rev: str, body: Doc, deleted: bool) -> None:
        self.rev, self.body, self.deleted = rev, body, deleted


_UNREAD: Doc = {}  # the body of a head read by its revision alone (``_check_heads``): the write was judged against it


def no_database(db: str) -> str:
    """The sentence for a database nothing was ever written to."""
    return f"no database {db!r}: nothing was ever written to it (a database is made by its first write; check the name)"


class SQLStore:
    """Shared implementation; see ``SQLiteStore`` and ``PostgresStore``."""

    url: str
    dialect: ClassVar[Dialect]
    q: ClassVar[Queries]

    def __init__(self, url: str, rules: Rules | None, clock: Clock) -> None:
        self.url = url
        self.rules = rules if rules is not None else Rules()
        self._clock = clock  # its own: revisions' and leases' times (nobody reads the time through a store)
        self._listeners: list[tuple[Callable[[Any], None], bool]] = []
        self._listeners_lock = threading.Lock()
        self._wants: list[Want] | None = []  # what this store's listeners want of others' commits (None: all)
        self._unpaced = 0  # listeners that do not say when they wait (see waiting()): other processes always wake them
        self._waiters: set[str] = set()  # the paced listeners' runners that wait for a commit now
        self._said_waiting: bool | None = None  # what this store last told other processes
        self.skips_wakeups = False  # other processes may send no wake-up while no runner waits (see waiting())
        self._publish_lock = threading.Lock()
        self.catalog = IndexCatalog(self.dialect, self.q)
        self._search_sql: dict[bool, SearchSQL] = {}
        self._time_sql: dict[bool, str] = {}

    # ---- dialect hooks -------------------------------------------------------------
    def _op(self) -> AbstractContextManager[Any]:  # pragma: no cover - abstract
        """A cursor on a pooled connection for one operation outside a transaction."""
        raise NotImplementedError

    def _tx(self, bookkeeping: bool = False) -> AbstractContextManager[Any]:  # pragma: no cover - abstract
        """A cursor in one transaction, committed when the block ends without an exception."""
        raise NotImplementedError

    def _schema_tx(self) -> AbstractContextManager[Any]:  # pragma: no cover - abstract
        """A transaction for schema changes: one process at a time, no statement time limit."""
        raise NotImplementedError

    def _append_change(self, cur: Any, args: dict[str, Any], again: bool = False) -> int:
        """Append a change in the write's transaction; its seq. ``again``: this transaction appended before
        (a backend that locks the log for an append has the lock already)."""
        cur.execute(self.q.append_change, args)
        return int(cur.fetchone()[0])

    def _missing_index(self, exc: BackendError) -> bool:
        """Whether ``exc`` says a query named an index that is gone (dropped by another process)."""
        return False

    def close(self) -> None:  # pragma: no cover - abstract
        """Give back connections and stop background threads."""
        raise NotImplementedError

    def _start_wakeups(self) -> None:
        """Begin telling listeners about other processes' commits (if the backend can)."""

    def _publish_wants(self, wants: list[Want] | None) -> None:
        """Tell other processes which of their commits this store's listeners act on (None: all)."""

    def _publish_waiting(self, waiting: bool) -> None:
        """Tell other processes whether any listener here waits for a commit (see ``waiting``); a backend
        that acts on it sets ``skips_wakeups``."""

    def _committed(self, db: str, actor: str) -> None:
        """A write of ``actor`` to ``db`` just committed (called after COMMIT, in the writer's thread; must not raise)."""

    # ---- schema and field indexes --------------------------------------------------
    def _open_schema(self) -> None:
        """Bring the schema to the current version and make the declared indexes."""
        with self._schema_tx() as cur:
            migrate(cur, self.dialect, self.q)
            self.catalog.read(cur)
        for db, field in declared_pairs(self.rules.indexes):
            if self.catalog.has(db, field):
                continue
            try:  # each in its own transaction: a document that cannot be indexed must not stop a start
                with self._schema_tx() as cur:
                    self.catalog.create(cur, db, field, "declared", self._clock.now_ms())
            except LedgerError as exc:
                log.error("index on %s.%s could not be made (queries on it scan): %s", db, field, exc.reason,
                          extra={"db": db, "field": field})
        self._read_indexes()

    def _read_indexes(self) -> None:
        with self._op() as cur:
            self.catalog.read(cur)

    def indexes(self) -> list[Index]:
        """Every field index: status for every database, then each (db, field) one."""
        self._read_indexes()
        return self.catalog.listing(set(self.rules.indexes))

    def add_index(self, db: str, field: str) -> Index:
        """Index ``field`` of ``db``'s documents (for every process, from now on). Idempotent."""
        check_db(db)
        check_field(field)
        if field == "status":
            return BUILTIN
        with self._schema_tx() as cur:
            self.catalog.create(cur, db, field, "admin", self._clock.now_ms())
        return next(i for i in self.indexes() if (i.db, i.field) == (db, field))

    def drop_index(self, db: str, field: str) -> None:
        """Drop the index on ``field`` of ``db``; queries on it become bounded scans."""
        check_db(db)
        check_field(field)
        if field == "status":
            raise Invalid("status is indexed for every database and cannot be dropped")
        if (db, field) in set(self.rules.indexes):
            raise Invalid(
                f"the index on {db}.{field} is declared by the code (Rules.index) and would come back at the "
                "next start: remove the declaration instead"
            )
        with self._schema_tx() as cur:
            cur.execute(self.q.index_drop, {"db": db, "field": field})
            if cur.rowcount != 1:
                raise NotFound(f"there is no index on {db}.{field}")
            cur.execute(drop_index_sql(db, field), {})
        log.info("index on %s.%s dropped", db, field, extra={"db": db, "field": field})
        self._read_indexes()

    # ---- listeners -----------------------------------------------------------------
    def subscribe(
        self, listener: Listener | HintedListener, *, hints: bool = False, wants: Sequence[Want] | None = None,
        paced: bool = False,
    ) -> Callable[[], None]:
        """Call ``listener`` after every commit (see ``Listener``); with ``hints``, a commit by
        another process comes as an ``Elsewhere`` when the backend can say which (``HintedListener``).
        ``wants`` (with ``hints``): what of other processes' commits it acts on (``Want``); the store
        tells other processes the union of its listeners' (``_publish_wants``), widened, never narrowed.
        ``paced``: the listener's runners say when they wait for a commit (``waiting``); other processes need
        not wake this one while none does."""
        entry: tuple[Callable[[Any], None], bool] = (listener, hints)
        with self._listeners_lock:
            self._listeners.append(entry)
            if not paced:
                self._unpaced += 1
            if wants is None or not hints:
                self._wants = None
            elif self._wants is not None:
                self._wants = sorted(set(self._wants) | {(tuple(dbs), skip) for dbs, skip in wants}, key=lambda w: (w[0], w[1] or ""))
        self._start_wakeups()
        with self._publish_lock:  # what is published is always the latest union (two subscribers at once)
            with self._listeners_lock:
                published = self._wants
            self._publish_wants(published)
        with self._listeners_lock:
            self._said_waiting = None  # (the board may be new)
            self._tell_waiting()

        def unsubscribe() -> None:
            with self._listeners_lock:
                if entry in self._listeners:
                    self._listeners.remove(entry)
                    if not paced:
                        self._unpaced -= 1

        return unsubscribe

    def waiting(self, runner: str, waiting: bool) -> None:
        """A paced listener's ``runner`` (``subscribe(paced=True)``) is about to look for work and then wait
        for a commit (True: before its claim, so that a commit after that claim's read wakes it), or has work
        in hand and looks again when it is done (False; also when it stops). Other processes wake this one
        only while some runner waits, or a listener is not paced: a wake-up costs both sides a thread switch."""
        with self._listeners_lock:
            if waiting:
                self._waiters.add(runner)
            else:
                self._waiters.discard(runner)
            self._tell_waiting()

    def lead(self, group: str) -> Lead | None:
        """A handle on feed group ``group``'s lead among the processes on this database (``ledger.wake.Lead``),
        for a runner that looks for work without being woken; None where there is none (every runner looks)."""
        return None

    def _tell_waiting(self) -> None:  # with _listeners_lock held
        now = self._unpaced > 0 or bool(self._waiters)
        if now != self._said_waiting:
            self._said_waiting = now
            self._publish_waiting(now)

    def _wake(self, change: Change | None) -> None:
        for listener, _hints in list(self._listeners):
            try:
                listener(change)
            except Exception:  # a listener must never break a committed write
                log.exception("commit listener failed")

    def _wake_elsewhere(self, db: str, actor: str) -> None:
        """Another process committed a write of ``actor`` to ``db``."""
        hint = Elsewhere(db, actor)
        for listener, hints in list(self._listeners):
            try:
                listener(hint if hints else None)
            except Exception:
                log.exception("commit listener failed")

    # ---- documents -----------------------------------------------------------------
    def get(self, db: str, id: str) -> Doc:
        """The head of ``db``/``id`` with ``_id`` and ``_rev``; NotFound if missing or deleted."""
        check_db(db)
        check_id(id)
        with self._op() as cur:
            cur.execute(self.q.get, {"db": db, "id": id})
            row = cur.fetchone()
        if row is None:
            if not self.has_db(db):
                raise NotFound(no_database(db))
            raise NotFound(f"no document {id!r} in {db!r}")
        self._seen(db, id, row[0], row[1], bool(row[2]))
        if row[2]:
            raise NotFound(f"document {id!r} in {db!r} was deleted (rev {row[0]})")
        return with_meta(decode(row[1]), id, row[0])

    def has_db(self, db: str) -> bool:
        """Whether anything was ever written to ``db`` (a database is made by its first write)."""
        check_db(db)
        with self._op() as cur:
            cur.execute(self.q.has_db, {"db": db})
            return cur.fetchone() is not None

    def put(
        self, db: str, doc: Doc, id: str | None = None, *, actor: str,
        if_rev: str | None = None, create_only: bool = False,
    ) -> Doc:
        """Write ``doc`` as ``actor``; ``if_rev`` or ``create_only`` make the write conditional (Conflict when stale)."""
        check_db(db)
        parse_actor(actor)
        new = id is None and doc.get("_id") is None  # an id made here: no document has it yet
        id, body, text, if_rev = self._prepare(db, doc, id, if_rev, create_only)
        return self._write(db, id, body, text, actor, if_rev, create_only, deleted=False, new=new)

    def _prepare(
        self, db: str, doc: Doc, id: str | None, if_rev: str | None, create_only: bool,
    ) -> tuple[str, Doc, str, str | None]:
        """A write's checks that need no head: (id, body, its JSON, the revision it is conditional on)."""
        body, body_id, body_rev = split_body(doc)
        if id is None:
            id = body_id or new_id()
        check_id(id)
        if body_id is not None and body_id != id:
            raise Invalid(f"the document's _id {body_id!r} does not match the id {id!r}")
        if body_rev is not None:
            if if_rev is not None and if_rev != body_rev:
                raise Invalid(f"the document's _rev {body_rev!r} does not match if_rev {if_rev!r}")
            if_rev = body_rev
        if if_rev is not None and (not isinstance(if_rev, str) or len(if_rev) > ID_MAX or not if_rev.isascii()):
            raise Invalid("if_rev must be a revision like '3-ab12cd34ef56ab78'")
        if create_only and if_rev is not None:
            raise Invalid("create_only and if_rev cannot be combined: a new document has no revision")
        text = encode(body)
        self.catalog.check_values(db, body)
        return id, body, text, if_rev

    def put_many(self, db: str, writes: Sequence[Write], *, actor: str) -> list[Written]:
        """Write a batch in one transaction (see ``Documents.put_many``).

        The heads are read and locked first (in id order), every write is judged and its document
        written, and only then are the changes appended: the same order of locks as a single write
        (the document's row, then the change log), so a batch and single writers never wait on each
        other in a circle on PostgreSQL, and the log's append lock is taken once and held for the
        appends alone. A refusal is judged before anything of its write is written, so it rolls
        nothing back. A database error fails the whole batch (nothing of it is written)."""
        work = self._batch_begin(db, writes, actor)
        if work.prepared:
            self._judge_ahead(work)
            with self._tx() as cur:
                self._batch_write(cur, work)
        return self._batch_end(work)

    def _batch_begin(self, db: str, writes: Sequence[Write], actor: str) -> _BatchWork:
        """A batch's writes checked and prepared (a refusal here is that write's outcome), before any transaction."""
        check_db(db)
        parse_actor(actor)
        batch = check_batch(writes)
        work = _BatchWork(db, actor, [None] * len(batch), self._clock.now_ms())
        for i, w in enumerate(batch):
            try:
                work.prepared.append((i, *self._prepare(db, w.doc, w.id, w.if_rev, w.create_only), w.create_only))
            except LedgerError as exc:
                work.out[i] = exc
        return work

    def _judge_ahead(self, work: _BatchWork) -> None:
        """Judge a batch's writes against the heads as committed now, before its transaction (SQLite: the
        writer lock is then held for the writes alone); the transaction uses a judgment where the head is
        still the one judged against (one revision read), and judges again where it moved. A judgment whose
        rules read other documents (a person's role) is left to the transaction, where the reads see the
        batch's earlier writes; so is every write of a batch that writes one id twice."""
        ids = [p[1] for p in work.prepared]
        if len(set(ids)) != len(ids):
            return
        db, actor, now = work.db, work.actor, work.now
        with self._op() as cur:
            heads = {}
            for doc_id in ids:
                cur.execute(self.q.head, {"db": db, "id": doc_id})
                row = cur.fetchone()
                heads[doc_id] = Head(row[0], decode(row[1]), bool(row[2])) if row else None
        reads = 0

        def read(db: str, id: str) -> Doc | None:
            nonlocal reads
            reads += 1
            return None

        ahead: dict[str, tuple[str | None, bool, str | LedgerError]] = {}
        for _, doc_id, body, text, if_rev, create_only in work.prepared:
            head = heads[doc_id]
            outcome: str | LedgerError
            before = reads
            try:
                outcome = self._admit(db, doc_id, head, body, text, actor, if_rev, create_only, False, now, read=read)
            except LedgerError as exc:
                outcome = exc
            if reads == before:  # a judgment that read other documents (a role) is made again in the transaction
                ahead[doc_id] = (head.rev if head else None, bool(head and head.deleted), outcome)
        work.ahead = ahead

    def _batch_write(self, cur: Any, work: _BatchWork) -> None:
        """The batch's part of a transaction (``put_many``'s own, or a feed operation's): heads locked, writes
        judged, documents written, changes appended."""
        self._batch_rows(cur, work)
        self._batch_append(cur, work)

    def _batch_append(self, cur: Any, work: _BatchWork) -> None:
        """The changes of a batch whose documents ``_batch_rows`` wrote. A transaction with several batches writes
        every batch's rows before it appends (PostgreSQL: no row lock is waited for with the append lock held)."""
        work.seqs = self._append_changes(cur, work.db, work.actor, work.done, work.now) if work.done else []

    def _batch_rows(self, cur: Any, work: _BatchWork) -> None:
        """Heads locked, writes judged, documents written (``work.done``)."""
        if not work.prepared:
            return
        ids = sorted({p[1] for p in work.prepared})
        if work.ahead is not None:
            heads = self._check_heads(cur, work.db, ids, work.ahead)
            work.done = self._write_docs(cur, work.db, work.actor, work.prepared, heads, work.out, work.now,
                                         ahead=work.ahead)
        else:
            heads = self._lock_heads(cur, work.db, ids)
            work.done = self._write_docs(cur, work.db, work.actor, work.prepared, heads, work.out, work.now)

    def _batch_end(self, work: _BatchWork) -> list[Written]:
        """After the commit: heads remembered, listeners told; the outcomes in the batch's order."""
        db, actor = work.db, work.actor
        for (i, doc_id, body, rev, text), seq in zip(work.done, work.seqs, strict=True):
            self._wrote(db, doc_id, rev, text)
            work.out[i] = self._written(db, doc_id, body, rev, False, actor, work.now, seq, committed=False)
        if work.done:
            self._committed(db, actor)
        outcomes = [o for o in work.out if o is not None]
        assert len(outcomes) == len(work.out), "every write of a batch has an outcome"
        return outcomes

    def _write_docs(
        self, cur: Any, db: str, actor: str, prepared: list[Prepared], heads: dict[str, Head | None],
        out: list[Written | None], now: int, ahead: dict[str, tuple[str | None, bool, str | LedgerError]] | None = None,
    ) -> list[Admitted]:
        """Judge a batch's writes against the locked ``heads`` and write their documents, in ``cur``'s
        transaction; each refusal goes to ``out`` at its write's index. The writes admitted and written,
        in the batch's order (their changes are appended in that order). One statement per document here;
        a backend may write them all at once (``PostgresStore._write_docs``)."""
        done: list[Admitted] = []
        stored = {k for k, v in heads.items() if v is not None}  # rows that exist in the database
        # documents in id order (as their heads were locked: two batches that create the same new ids
        # wait for each other in one order, never in a circle), a repeated id in the batch's order
        for i, doc_id, body, text, if_rev, create_only in sorted(prepared, key=lambda p: (p[1], p[0])):
            head = heads[doc_id]
            judged = ahead.get(doc_id) if ahead is not None else None  # kept only where the head did not move
            if judged is not None:
                if isinstance(judged[2], LedgerError):  # judged before the transaction, against this same head
                    out[i] = judged[2]
                    continue
                rev = judged[2]
            else:
                try:
                    rev = self._admit(db, doc_id, head, body, text, actor, if_rev, create_only, False, now, cur)
                except LedgerError as exc:
                    out[i] = exc
                    continue
            args = {"db": db, "id": doc_id, "rev": rev, "body": text, "deleted": 0, "at": now}
            if doc_id not in stored:
                cur.execute(self.q.insert_doc, args)
                if cur.rowcount != 1:
                    out[i] = Conflict(f"document {doc_id!r} was created in {db!r} by another writer just now")
                    heads[doc_id] = None
                    continue
                stored.add(doc_id)
            else:
                cur.execute(self.q.update_doc, args)
            heads[doc_id] = Head(rev, body, False)
            done.append((i, doc_id, body, rev, text))
        done.sort(key=lambda d: d[0])  # the changes in the batch's order
        return done

    def _append_changes(self, cur: Any, db: str, actor: str, done: list[Admitted], now: int) -> list[int]:
        """Append the changes of a batch's written documents (``done``, not empty) in that order, in ``cur``'s
        transaction, under the log's append lock taken once; their seqs. One statement per change here
        (SQLite's, where a statement costs no round trip); ``PostgresStore._append_changes`` makes one."""
        seqs: list[int] = []
        for _, doc_id, _, rev, text in done:
            args = {"db": db, "id": doc_id, "rev": rev, "body": text, "deleted": 0, "at": now, "actor": actor}
            seqs.append(self._append_change(cur, args, again=bool(seqs)))
        return seqs

    def _check_heads(
        self, cur: Any, db: str, ids: list[str], ahead: dict[str, tuple[str | None, bool, str | LedgerError]],
    ) -> dict[str, Head | None]:
        """``_lock_heads`` for a batch judged ahead: a head still at the revision judged against is read by its
        revision alone (its body ``_UNREAD``), one that moved in full."""
        heads: dict[str, Head | None] = {}
        for doc_id in ids:
            cur.execute(self.q.head_rev, {"db": db, "id": doc_id})
            row = cur.fetchone()
            rev, deleted = (row[0], bool(row[1])) if row else (None, False)
            judged = ahead.get(doc_id)
            if judged is not None and judged[0] == rev and judged[1] == deleted:
                heads[doc_id] = Head(rev, _UNREAD, deleted) if rev is not None else None
            elif rev is None:
                heads[doc_id] = None
                ahead.pop(doc_id, None)
            else:
                cur.execute(self.q.head, {"db": db, "id": doc_id})
                row = cur.fetchone()
                heads[doc_id] = Head(row[0], decode(row[1]), bool(row[2]))
                ahead.pop(doc_id, None)
        return heads

    def _lock_heads(self, cur: Any, db: str, ids: list[str]) -> dict[str, Head | None]:
        """The heads of ``ids`` (sorted) in the write's transaction, each locked for the write (None: no such row)."""
        heads: dict[str, Head | None] = {}
        for doc_id in ids:
            cur.execute(self.q.head, {"db": db, "id": doc_id})
            row = cur.fetchone()
            heads[doc_id] = Head(row[0], decode(row[1]), bool(row[2])) if row else None
        return heads

    def _wrote(self, db: str, id: str, rev: str, text: str) -> None:
        """A revision this process just wrote and committed: the document's head."""
        self._seen(db, id, rev, text, False)

    def delete(self, db: str, id: str, *, actor: str, if_rev: str | None = None) -> Doc:
        """Delete a document as ``actor``: a tombstone revision, kept in its history."""
        check_db(db)
        check_id(id)
        parse_actor(actor)
        return self._write(db, id, {}, "{}", actor, if_rev, False, deleted=True)

    def _write(
        self, db: str, id: str, body: Doc, text: str, actor: str,
        if_rev: str | None, create_only: bool, deleted: bool, new: bool = False,
    ) -> Doc:
        now = self._clock.now_ms()
        if new:
            # a new id of this store's making has no head: the write is judged before the transaction, so the
            # writer lock is held for the insert and the append alone (unless its rules read other documents,
            # a person's role: those reads are the transaction's)
            reads: list[str] = []

            def read(d: str, i: str) -> Doc | None:
                reads.append(i)
                return None

            try:
                rev = self._admit(db, id, None, body, text, actor, if_rev, create_only, deleted, now, read=read)
            except LedgerError:
                if not reads:
                    raise
            new = not reads
        if new:
            args = {"db": db, "id": id, "rev": rev, "body": text, "deleted": int(deleted), "at": now}
            with self._tx() as cur:
                cur.execute(self.q.insert_doc, args)
                if cur.rowcount != 1:
                    raise Conflict(f"document {id!r} was created in {db!r} by another writer just now")
                args["actor"] = actor
                seq = self._append_change(cur, args)
            return self._written(db, id, body, rev, deleted, actor, now, seq)
        key = {"db": db, "id": id}
        with self._tx() as cur:
            cur.execute(self.q.head, key)
            row = cur.fetchone()
            head = Head(row[0], decode(row[1]), bool(row[2])) if row else None
            rev = self._admit(db, id, head, body, text, actor, if_rev, create_only, deleted, now, cur)
            args = {"db": db, "id": id, "rev": rev, "body": text, "deleted": int(deleted), "at": now}
            if head is None:
                cur.execute(self.q.insert_doc, args)
                if cur.rowcount != 1:
                    raise Conflict(f"document {id!r} was created in {db!r} by another writer just now")
            else:
                cur.execute(self.q.update_doc, args)
            args["actor"] = actor
            seq = self._append_change(cur, args)
        return self._written(db, id, body, rev, deleted, actor, now, seq)

    def _admit(
        self, db: str, id: str, head: Head | None, body: Doc, text: str, actor: str,
        if_rev: str | None, create_only: bool, deleted: bool, now: int, cur: Any = None, read: Reader | None = None,
    ) -> str:
        """Check a write against the head (``if_rev``, ``create_only``, the machine rules); the new revision.
        ``cur``: the write's transaction, where the rules read what they need (a person's role); ``read``:
        how they read instead (a batch's reader that sees the batch's own writes judged before this one)."""
        live = head is not None and not head.deleted
        if create_only and live:
            raise Conflict(f"document {id!r} already exists in {db!r} (rev {head.rev})")  # type: ignore[union-attr]
        if if_rev is not None and (not live or head.rev != if_rev):  # type: ignore[union-attr]
            now_at = f"is at {head.rev}" if live else "does not exist"  # type: ignore[union-attr]
            raise Conflict(f"stale revision: {db}/{id} {now_at}, not {if_rev}; read it again and retry")
        if deleted and not live:
            raise NotFound(f"no document {id!r} in {db!r}")
        old = head.body if live else None  # type: ignore[union-attr]
        blind = if_rev is None and not create_only
        self.rules.check(db, old, None if deleted else body, actor, now, blind=blind, doc_id=id,
                         read=read if read is not None else self._reader(cur))
        return next_rev(head.rev if head else None, text, deleted)

    def _reader(self, cur: Any = None) -> Reader:
        """``read(db, id)`` for the rules: a head body, on ``cur`` (the write's transaction) when given,
        else on a pooled connection of its own (PostgreSQL judges a write before the one statement
        that makes it; see ``PostgresStore._write``)."""

        def read(db: str, id: str) -> Doc | None:
            if cur is not None:
                cur.execute(self.q.get, {"db": db, "id": id})
                row = cur.fetchone()
            else:
                with self._op() as c:
                    c.execute(self.q.get, {"db": db, "id": id})
                    row = c.fetchone()
            return decode(row[1]) if row is not None and not row[2] else None

        return read

    def role_of(self, actor: str) -> str | None:
        """The role ``actor`` holds now, as the rules' role source says (None: none, or no source)."""
        return self.rules.role(actor, self._reader())

    def _written(
        self, db: str, id: str, body: Doc, rev: str, deleted: bool, actor: str, now: int, seq: int, *, committed: bool = True,
    ) -> Doc:
        """The document as written; listeners hear of the commit (``committed``: and other processes; a batch
        tells them once, after its last document)."""
        out = with_meta(body, id, rev, deleted)
        if self._listeners:
            self._wake(Change(seq, db, id, rev, out, deleted, actor, now))
        if committed:
            self._committed(db, actor)
        return out

    def query(self, db: str, field: str, key: Any, limit: int = 100, after: str | None = None) -> Page:
        """Documents of ``db`` whose ``field`` equals ``key``, in id order, a page at a time.

        A declared field is answered by its index. Any other field is answered by a bounded
        scan: the page examines at most SCAN_ROWS documents after ``after`` (it may hold fewer
        than ``limit`` documents, even none, and still have a ``next``) and says ``scanned``.
        """
        check_db(db)
        check_field(field)
        _check_limit(limit)
        args = {"db": db, "after": check_cursor(after), "n": limit + 1, **self.dialect.key_args(field, check_key(key))}
        if field != "status" and self.catalog.stale:
            self._read_indexes()
        if not self.catalog.has(db, field):
            return self._scan(db, field, args, limit)
        sql = self.catalog.page_sql(db, field)
        try:
            with self._op() as cur:
                cur.execute(sql, args)
                rows = cur.fetchall()
        except BackendError as exc:
            if not self._missing_index(exc):
                raise
            log.info("index on %s.%s was dropped elsewhere: scanning", db, field)
            self._read_indexes()
            return self._scan(db, field, args, limit)
        docs = [with_meta(decode(b), i, r) for i, r, b in rows[:limit]]
        return Page(docs, docs[-1]["_id"] if len(rows) > limit else None)

    def _scan(self, db: str, field: str, args: dict[str, Any], limit: int) -> Page:
        sql = self.catalog.scan_sql(field)
        with self._op() as cur:
            cur.execute(self.q.scan_window, {"db": db, "after": args["after"], "n": SCAN_ROWS})
            last, count = cur.fetchone()
            if not count:
                return Page([], None, scanned=True)
            cur.execute(sql, {**args, "last": last})
            rows = cur.fetchall()
        docs = [with_meta(decode(b), i, r) for i, r, b in rows[:limit]]
        if len(rows) > limit:
            after = docs[-1]["_id"]
        else:
            after = last if count >= SCAN_ROWS else None
        return Page(docs, after, scanned=True)

    def by_time(self, db: str, status: str, limit: int = 100, after: str | None = None, *, newest: bool = True,
                skip: int = 0) -> Page:
        """Live documents of ``db`` in ``status`` by when they were last written (the ``written`` column, set by
        every write in its transaction), newest first or oldest first, ties by id.

        Keyset paging: ``next`` is ``"<written>:<id>"`` of the page's last document, and the next page
        starts right after it on the index ``(db, status, written, id)``, so page 1,800 of 90,000 costs
        what page 1 does and a write meanwhile neither repeats nor skips a document that did not move.
        A jump to page N of the console's list has no cursor to start from: ``skip`` reads past that
        many documents (an OFFSET on the same index, from ``after`` or the start), bounded by ``MAX_SKIP``
        (10,000: page 200 at 50 a page) so that no request walks 100,000 rows; a jump further than
        that is refused with a sentence saying to sort the other way or to follow ``next``. The
        index's rows are small (no body), so the 10,000 skipped cost about a millisecond.
        """
        check_db(db)
        _check_limit(limit)
        if not isinstance(status, str):
            raise Invalid("status must be a text")
        if not isinstance(skip, int) or isinstance(skip, bool) or not 0 <= skip <= MAX_SKIP:
            raise Invalid(f"skip must be between 0 and {MAX_SKIP} (further: sort the other way, or follow next)")
        written, last = parse_time_cursor(after, newest)
        sql = self._time_sql.get(newest)
        if sql is None:
            sql = self._time_sql[newest] = time_query(self.dialect, newest)
        args = {"db": db, "written": written, "after": last, "n": limit + 1, "skip": skip,
                **self.dialect.key_args("status", check_key(status))}
        with self._op() as cur:
            cur.execute(sql, args)
            rows = cur.fetchall()
        docs = [with_meta(decode(b), i, r) for i, r, b, _ in rows[:limit]]
        times = tuple(int(w) for *_, w in rows[:limit])
        nxt = time_cursor(times[-1], docs[-1]["_id"]) if len(rows) > limit else None
        return Page(docs, nxt, written=times)

    def search(self, db: str, text: str, limit: int = 50, after: str | None = None) -> SearchPage:
        """Live documents of ``db`` whose id starts with ``text`` or whose text, caption or lastError holds
        its words (``ledger/search.py``), in id order, with the number of all matches (up to COUNT_CAP)."""
        check_db(db)
        _check_limit(limit)
        found = parse_search(text)
        sql = self._search_sql.get(bool(found.words))
        if sql is None:
            sql = self._search_sql[bool(found.words)] = search_sql(self.dialect, bool(found.words))
        args = {**search_args(db, found, self.dialect), "after": check_cursor(after), "n": limit + 1}
        with self._op() as cur:
            cur.execute(sql.count, args)  # bounded (COUNT_CAP + 1 each), and it picks how the page is read
            by_id, by_text = (int(n) for n in cur.fetchone())
            total = by_id + by_text
            cur.execute(sql.page_dense if by_text > COUNT_CAP else sql.page, args)
            rows = cur.fetchall()
        if not rows and after is None and not self.has_db(db):
            raise NotFound(no_database(db))
        docs = [with_meta(decode(b), i, r) for i, r, b in rows[:limit]]
        capped = total > COUNT_CAP
        return SearchPage(docs, min(total, COUNT_CAP), docs[-1]["_id"] if len(rows) > limit else None, capped)

    def history(self, db: str, id: str) -> list[Change]:
        """Every revision of a document, oldest first."""
        check_db(db)
        check_id(id)
        with self._op() as cur:
            cur.execute(self.q.history, {"db": db, "id": id})
            rows = cur.fetchall()
        return [self._change(r) for r in rows]

    def changes(self, since: int = 0, limit: int = 100, dbs: Sequence[str] | None = None) -> list[Change]:
        """Committed writes after ``since``, in commit order (of ``dbs`` only, if given)."""
        since = check_seq(since)
        _check_limit(limit)
        for db in dbs or ():
            check_db(db)
        with self._op() as cur:
            self._read_changes(cur, since, limit, dbs)
            rows = cur.fetchall()
        return [self._change(r) for r in rows]

    def _read_changes(self, cur: Any, after: int, limit: int, dbs: Sequence[str] | None) -> None:
        args: dict[str, Any] = {"after": after, "n": limit}
        if not dbs:
            cur.execute(self.q.changes, args)
        elif len(dbs) == 1:
            args["db"] = dbs[0]
            cur.execute(self.q.changes_of, args)
        else:
            args["dbs"] = self._db_list(dbs)
            cur.execute(self.q.changes_in, args)

    def _db_list(self, dbs: Sequence[str]) -> Any:
        """The parameter for ``db IN`` a list (a JSON array for SQLite's json_each)."""
        return list(dbs)

    def head_seq(self) -> int:
        """The change log's last sequence number (0 when empty)."""
        with self._op() as cur:
            cur.execute(self.q.head_seq, {})
            return int(cur.fetchone()[0])

    def _seen(self, db: str, id: str, rev: str, text: str, deleted: bool) -> None:
        """A revision this process read or wrote (a backend may remember it; see ``ledger/heads.py``)."""

    def _change(self, row: Sequence[Any]) -> Change:
        seq, db, id, rev, body, deleted, actor, at = row
        self._seen(db, id, rev, body, bool(deleted))
        return Change(int(seq), db, id, rev, with_meta(decode(body), id, rev, bool(deleted)), bool(deleted), actor, int(at))

    def ping(self, timeout: float = 1.0) -> float:
        """Ask the database for one row within ``timeout`` seconds; the seconds it took.

        Raises BackendError with the reason (unreachable, stalled, no free connection).
        Connections that broke while idle (the database restarted) fail at once: the next
        one is tried while half the budget is left."""
        started = time.monotonic()
        while True:
            try:
                with self._op_within(timeout - (time.monotonic() - started)) as cur:
                    cur.execute(self.q.ping, {})
                    cur.fetchone()
                return time.monotonic() - started
            except BackendError:
                if time.monotonic() - started > timeout / 2:
                    raise
                time.sleep(0.01)

    def _op_within(self, timeout: float) -> AbstractContextManager[Any]:
        return self._op()

    def counts(self, db: str | None = None) -> list[StatusCount]:
        """Live documents by database, kind and status (of ``db`` only, if given), sorted.

        Read from counters that every write keeps in its own transaction: the cost is the
        number of (db, kind, status) combinations, not the number of documents."""
        with self._op() as cur:
            if db is None:
                cur.execute(self.q.counts, {})
            else:
                cur.execute(self.q.counts_of, {"db": check_db(db)})
            return [StatusCount(d, k, s, int(n)) for d, k, s, n in cur.fetchall()]

    # ---- feed bookkeeping ----------------------------------------------------------
    def feed_claim(
        self, handler: str, dbs: Sequence[str], owner: str, lease_ms: int, batch: int = 10, *, skip_actor: str | None = None,
        also: Callable[[Batch], Writes | None] | None = None, woken: bool = False,
    ) -> Batch | None:
        """Lease the next batch of ``handler``'s changes (or a dead consumer's expired batch).

        With ``skip_actor``, changes written by that actor are not delivered and the cursor
        moves past them (a claim that finds only such changes passes them and returns None).
        Idle (nothing after the cursor but, when ``woken``, the skipped actor's own changes, and no
        expired batch), it returns None after a read alone: no write transaction, so the loser of a
        wake-up race does not queue for the writer. The claim that follows the idle interval passes them.
        ``also``: writes made in the claim's transaction (see ``Coordination.feed_claim``)."""
        now = self._clock.now_ms()
        skip = skip_actor or ""
        if self._idle(handler, dbs, now, skip if woken else ""):
            return None
        if also is not None:
            with self._tx() as cur:  # the writes with it need a durable commit
                claimed_batch = self._claim_in(cur, handler, dbs, owner, lease_ms, batch, skip, now)
                made = self._claim_writes(claimed_batch, also)
                if made is not None:
                    self._batch_write(cur, made[1])
            self._claim_end(claimed_batch, made)
            return claimed_batch
        with self._tx(bookkeeping=True) as cur:
            return self._claim_in(cur, handler, dbs, owner, lease_ms, batch, skip, now)

    def _idle(self, handler: str, dbs: Sequence[str], now: int, skip: str) -> bool:
        """Whether a claim would find nothing: the cursor exists, no batch of it expired, and no change after
        it in ``dbs`` (but ``skip``'s). Reads only."""
        with self._op() as cur:
            cur.execute(self.q.cursor_get, {"handler": handler})
            row = cur.fetchone()
            if row is None:
                return False
            claimed = int(row[1])
            cur.execute(self.q.lease_expired, {"handler": handler, "now": now})
            if cur.fetchone() is not None:
                return False
            for db in dict.fromkeys(dbs):
                cur.execute(self.q.feed_next_of, {"db": db, "after": claimed, "skip": skip})
                if cur.fetchone() is not None:
                    return False
        return True

    def _claim_in(
        self, cur: Any, handler: str, dbs: Sequence[str], owner: str, lease_ms: int, batch: int, skip: str, now: int,
    ) -> Batch | None:
        h = {"handler": handler}
        cur.execute(self.q.cursor_make, h)
        cur.execute(self.q.cursor_lock, h)
        _done, claimed = cur.fetchone()
        cur.execute(self.q.lease_expired, {"handler": handler, "now": now})
        expired = cur.fetchone()
        if expired:
            after, upto, tries, pos = expired
            cur.execute(self.q.lease_take, {"owner": owner, "until": now + lease_ms, "handler": handler, "after": after})
            self._read_feed(cur, after, upto, MAX_LIMIT, dbs, skip)
            changes = [self._change(r) for r in cur.fetchall()]
            log.info("feed: taking over an expired batch", extra={"handler": handler, "after": after, "upto": upto})
            return Batch(handler, int(after), int(upto), changes, int(tries), int(pos), taken=True)
        top = None
        if skip:
            # the end of the handler's changes now: skipped ones up to it can be passed
            for db in dict.fromkeys(dbs):
                cur.execute(self.q.feed_top_of, {"db": db, "after": claimed})
                end = cur.fetchone()[0]
                if end is not None and (top is None or end > top):
                    top = int(end)
            if top is None:
                return None
        self._read_feed(cur, claimed, top, batch, dbs, skip)
        changes = [self._change(r) for r in cur.fetchall()]
        if not changes:
            if top is not None:
                cur.execute(self.q.cursor_pass, {"upto": top, "handler": handler})
            return None
        upto = top if top is not None and len(changes) < batch else changes[-1].seq
        cur.execute(self.q.lease_make, {"handler": handler, "after": claimed, "upto": upto, "owner": owner, "until": now + lease_ms})
        cur.execute(self.q.cursor_claimed, {"upto": upto, "handler": handler})
        return Batch(handler, int(claimed), upto, changes)

    def _read_feed(self, cur: Any, after: int, upto: int | None, limit: int, dbs: Sequence[str], skip: str) -> None:
        args: dict[str, Any] = {"after": after, "upto": SEQ_MAX if upto is None else upto, "n": limit, "skip": skip}
        if len(dbs) == 1:
            args["db"] = dbs[0]
            cur.execute(self.q.feed_of, args)
        else:
            args["dbs"] = self._db_list(dbs)
            cur.execute(self.q.feed_in, args)

    def feed_renew(self, batch: Batch, owner: str, lease_ms: int) -> bool:
        """Extend the batch's lease and record its progress (``pos``, ``tries``); False if the lease was lost."""
        now = self._clock.now_ms()
        with self._tx(bookkeeping=True) as cur:
            cur.execute(self.q.lease_renew, {
                "until": now + lease_ms, "tries": batch.tries, "pos": batch.pos,
                "handler": batch.handler, "after": batch.after, "owner": owner,
            })
            return bool(cur.rowcount == 1)

    def feed_finish(self, batch: Batch, owner: str, *, also: Writes | None = None, then: NextClaim | None = None) -> bool:
        """Release the batch and move the handler's cursor as far as no batch in flight holds it; False if the lease was lost.
        ``also``: writes made in the same transaction (the cursor's row first, then the documents' and the log).
        ``then``: the handler's next batch claimed in that transaction too (``then.batch``), with its own writes;
        looked for first with reads alone, and not claimed where there is nothing (see ``feed_claim``)."""
        now = self._clock.now_ms()
        if then is not None:
            then.batch = None
            if self._idle(then.handler, then.dbs, now, then.skip_actor or ""):
                then = None
        if also is None and then is None:
            with self._tx(bookkeeping=True) as cur:
                return self._finish_in(cur, batch, owner)
        work = None
        if also is not None:
            work = self._batch_begin(also.db, also.writes, also.actor)
            if work.prepared:
                self._judge_ahead(work)
        durable = also is not None or (then is not None and then.also is not None)
        nxt: Batch | None = None
        made = None
        with self._tx(bookkeeping=not durable) as cur:  # writes with it need a durable commit
            finished = self._finish_in(cur, batch, owner)
            if then is not None and finished:
                nxt = self._claim_in(cur, then.handler, then.dbs, then.owner, then.lease_ms, then.n,
                                     then.skip_actor or "", now)
                made = self._claim_writes(nxt, then.also)
            self._chain_write(cur, work, made[1] if made is not None else None)
        self._chain_end(also, work, then, nxt, made)
        return finished

    def _claim_writes(
        self, batch: Batch | None, also: Callable[[Batch], Writes | None] | None,
    ) -> tuple[Writes, _BatchWork] | None:
        """A claimed batch's own writes (``also(batch)``), prepared inside the claim's transaction."""
        made = also(batch) if batch is not None and also is not None else None
        return (made, self._batch_begin(made.db, made.writes, made.actor)) if made is not None else None

    def _claim_end(self, batch: Batch | None, made: tuple[Writes, _BatchWork] | None) -> None:
        """After the claim's commit: its writes' outcomes, on the batch (``batch.made``)."""
        if batch is not None and made is not None:
            made[0].outcomes = self._batch_end(made[1])
            batch.made = made[0]

    def _chain_end(
        self, also: Writes | None, work: _BatchWork | None, then: NextClaim | None, nxt: Batch | None,
        made: tuple[Writes, _BatchWork] | None,
    ) -> None:
        """After a finish's commit: its writes' outcomes, and the next batch (with its claim's writes) in ``then``."""
        if also is not None and work is not None:
            also.outcomes = self._batch_end(work)
        self._claim_end(nxt, made)
        if then is not None:
            then.batch = nxt

    def _chain_write(self, cur: Any, *works: _BatchWork | None) -> None:
        """A finish's writes and the next claim's, in one transaction: every document first, then the changes."""
        for w in works:
            if w is not None:
                self._batch_rows(cur, w)
        for w in works:
            if w is not None:
                self._batch_append(cur, w)

    def _finish_in(self, cur: Any, batch: Batch, owner: str) -> bool:
        h = {"handler": batch.handler}
        cur.execute(self.q.cursor_lock, h)
        (claimed,) = cur.fetchone()[1:]
        cur.execute(self.q.lease_drop, {"handler": batch.handler, "after": batch.after, "owner": owner})
        if cur.rowcount != 1:
            return False
        cur.execute(self.q.lease_low, h)
        (low,) = cur.fetchone()
        cur.execute(self.q.cursor_done, {"done": low if low is not None else claimed, "handler": batch.handler})
        return True

    def feed_position(self, handler: str, dbs: Sequence[str] | None = None) -> FeedPosition:
        """A handler's cursor, its batches in flight and the log's head: index lookups only.
        With ``dbs`` (the handler's databases), also how many of their changes are not done
        yet, counted up to PENDING_CAP along the (db, seq) index."""
        h = {"handler": handler}
        for db in dbs or ():
            check_db(db)
        with self._op() as cur:
            cur.execute(self.q.cursor_get, h)
            row = cur.fetchone()
            cur.execute(self.q.leases, h)
            leases = [dict(zip(("after", "upto", "owner", "leaseUntil", "tries"), r)) for r in cur.fetchall()]
            cur.execute(self.q.head_seq, {})
            head = int(cur.fetchone()[0])
            done = int(row[0]) if row else 0
            pending = None
            if dbs:
                pending = 0
                for db in dict.fromkeys(dbs):
                    cur.execute(self.q.pending_of, {"db": db, "after": done, "n": PENDING_CAP - pending})
                    pending += int(cur.fetchone()[0])
                    if pending >= PENDING_CAP:
                        break
        return FeedPosition(handler, done, int(row[1]) if row else 0, leases, head, pending)

    # ---- tick runs -----------------------------------------------------------------
    def claim_tick_run(self, tick: str, scheduled_at: int, owner: str) -> bool:
        """Claim one slot of a tick for ``owner``; False if another process has it."""
        now = self._clock.now_ms()
        with self._tx(bookkeeping=True) as cur:
            cur.execute(self.q.tick_claim, {"tick": tick, "at": scheduled_at, "owner": owner, "now": now})
            won = cur.rowcount == 1
            if won:
                cur.execute(self.q.tick_trim, {"tick": tick, "kept": TICK_RUNS_KEPT})
            return bool(won)

    def finish_tick_run(self, tick: str, scheduled_at: int, outcome: str, error: str | None = None) -> None:
        """Record how a tick run ended (``ok`` or ``error`` with the reason)."""
        with self._tx(bookkeeping=True) as cur:
            cur.execute(self.q.tick_finish, {"now": self._clock.now_ms(), "outcome": outcome, "error": error, "tick": tick, "at": scheduled_at})

    def tick_runs(self, tick: str | None = None, limit: int = 20) -> list[TickRun]:
        """The latest tick runs (of ``tick`` only, if given), newest first."""
        with self._op() as cur:
            if tick is None:
                cur.execute(self.q.tick_runs, {"n": limit})
            else:
                cur.execute(self.q.tick_runs_of, {"tick": tick, "n": limit})
            return [TickRun(*r) for r in cur.fetchall()]

    # ---- once keys -----------------------------------------------------------------
    def use_once(self, key: str, expires_at: int) -> bool:
        """Record ``key`` until ``expires_at`` (epoch ms); False if it was already recorded.

        Used for request nonces, so that a replayed signature is refused by every process.
        """
        if not isinstance(key, str) or not key or len(key) > ID_MAX or "\x00" in key or not (key.isascii() or is_unicode(key)):
            raise Invalid(f"a once-key must be valid text of 1-{ID_MAX} characters without NUL")
        now = self._clock.now_ms()
        with self._tx() as cur:
            cur.execute(self.q.once_purge, {"now": now})
            cur.execute(self.q.once_use, {"key": key, "expires": expires_at})
            return bool(cur.rowcount == 1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redact_url(self.url)!r})"


def _check_limit(limit: object) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise Invalid(f"limit must be between 1 and {MAX_LIMIT}")


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for logs, reprs and errors)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user, has_pw, _ = creds.partition(":")
    return f"{scheme}://{user}{':***' if has_pw else ''}@{host}"

