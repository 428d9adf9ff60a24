"""The store interface every backend implements, and the actor-bound view of it.

A backend provides documents with revisions, conditional writes checked against the
machines (``Rules``) in the write's transaction, an audit history, the change log, and the
small amount of bookkeeping the change feed and the scheduler need (cursors, batch leases,
tick runs). Everything above the backend sees plain dict documents.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .clock import Clock
from .errors import BackendError, Invalid, LedgerError

if TYPE_CHECKING:
    from .wake import Lead

Doc = dict[str, Any]
Listener = Callable[["Change | None"], None]
"""Called after a commit: with the change for writes made by this process, ``None`` for a
wake-up from another process (PostgreSQL NOTIFY, a SQLite wake-up socket or data_version poll)."""
HintedListener = Callable[["Change | Elsewhere | None"], None]
"""A listener that also takes an ``Elsewhere``: another process's commit, when the backend
can tell its database and actor (PostgreSQL); ``None`` when it cannot."""


@dataclass(frozen=True)
class Elsewhere:
    """A commit by another process, known by its database and actor only."""

    db: str
    actor: str


@dataclass(frozen=True)
class Change:
    """One committed write, as the feed and ``history`` see it."""

    seq: int
    db: str
    id: str
    rev: str
    doc: Doc  # the body with _id, _rev (and _deleted) at this revision
    deleted: bool
    actor: str
    at: int  # epoch ms

    def as_dict(self) -> Doc:
        """The change as JSON (the API's and the CLI's form)."""
        return {
            "seq": self.seq, "db": self.db, "id": self.id, "rev": self.rev,
            "deleted": self.deleted, "actor": self.actor, "at": self.at, "doc": self.doc,
        }


MAX_SKIP = 10_000  # the most documents ``by_time`` reads past to jump to a page (see ledger/sql.py's by_time)


@dataclass(frozen=True)
class Page:
    """One page of a query. ``scanned``: no index covers the field, so the page came from
    examining a bounded window of the database in id order; it may hold fewer documents than
    asked for (even none) and still have a ``next``: follow it to continue."""

    docs: list[Doc]
    next: str | None  # pass as ``after`` for the next page; None at the end
    scanned: bool = False
    written: tuple[int, ...] = ()  # a page of ``by_time``: when each document was last written (epoch ms)


@dataclass(frozen=True)
class SearchPage:
    """One page of a search (``ledger/search.py``): its documents in id order, how many match in all
    (``total``, counted up to a cap; ``capped`` when there are more) and the next page's cursor (None: the last)."""

    docs: list[Doc]
    total: int
    next: str | None
    capped: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The page as JSON (the API's and the CLI's form)."""
        return {"docs": self.docs, "total": self.total, "capped": self.capped, "next": self.next}


@dataclass(frozen=True)
class Index:
    """An index on one top-level field of one database's documents (``db`` "*": every database)."""

    db: str
    field: str
    name: str
    origin: str  # "builtin" (status, every database), "declared" (Rules.index), "admin" (add_index)
    created_at: int | None = None  # epoch ms

    def as_dict(self) -> dict[str, Any]:
        """The index as JSON."""
        return {"db": self.db, "field": self.field, "name": self.name, "origin": self.origin, "createdAt": self.created_at}


@dataclass
class Batch:
    """A range of the change log leased to one feed consumer: changes in (after, upto]."""

    handler: str
    after: int
    upto: int
    changes: list[Change]
    tries: int = 0  # failed deliveries so far of the change at ``pos``
    pos: int = 0
    taken: bool = False  # a dead consumer's expired batch, taken over
    made: Writes | None = None  # the writes made in the claim's own transaction (feed_claim's ``also``)


@dataclass(frozen=True)
class TickRun:
    """One run of a tick's slot: who ran it, when, and how it ended."""

    tick: str
    scheduled_at: int
    owner: str
    started_at: int
    finished_at: int | None
    outcome: str | None  # "ok" | "error" | "paused" (not run: ledger/pause.py) | None while running
    error: str | None = None


@dataclass(frozen=True)
class StatusCount:
    """How many live documents of one database have one kind and one status.

    ``kind`` is the document's ``kind`` field, else its ``type``, else "" (text values only);
    ``status`` its ``status`` text, else "". Kept in every write's transaction: reading the
    counts scans no documents."""

    db: str
    kind: str
    status: str
    n: int

    def as_dict(self) -> dict[str, Any]:
        """The count as JSON."""
        return {"db": self.db, "kind": self.kind, "status": self.status, "n": self.n}


@dataclass
class FeedPosition:
    """Where a handler's cursor is: every change up to ``done`` is handled, changes up to
    ``claimed`` are leased (``leases``: the batches in flight). ``head`` is the change log's
    last seq when read; ``pending`` (when asked for with ``dbs``) counts the changes of the
    handler's databases after ``done``, up to ``PENDING_CAP``."""

    handler: str
    done: int
    claimed: int
    leases: list[dict[str, Any]] = field(default_factory=list)
    head: int = 0
    pending: int | None = None

    @property
    def behind(self) -> int:
        """Sequence numbers between the cursor and the log's head (changes of every database)."""
        return max(0, self.head - self.done)


MAX_BATCH = 500
"""Writes one ``put_many`` takes: a batch holds the database's writer lock (SQLite) or the change log's
append lock (PostgreSQL) for its whole transaction, so it is kept to a fraction of a second."""


@dataclass
class Writes:
    """Writes to one database made as one actor inside a feed operation's own transaction (``feed_claim``'s
    and ``feed_finish``'s ``also``): ``put_many(db, writes, actor=actor)`` there, at no transaction of its
    own. ``outcomes``: filled in by the store, one per write, as ``put_many`` gives them."""

    db: str
    writes: list[Write]
    actor: str
    outcomes: list[Written] = field(default_factory=list)


@dataclass
class NextClaim:
    """The next batch to claim in a finishing batch's transaction (``feed_finish``'s ``then``): what
    ``feed_claim`` takes. ``batch``: filled in by the store, None when there was nothing to claim."""

    handler: str
    dbs: Sequence[str]
    owner: str
    lease_ms: int
    n: int = 10
    skip_actor: str | None = None
    also: Callable[[Batch], Writes | None] | None = None
    batch: Batch | None = None


@dataclass(frozen=True)
class Write:
    """One write of a batch (``Documents.put_many``): what ``put`` takes, without the database and actor."""

    doc: Doc
    id: str | None = None
    if_rev: str | None = None
    create_only: bool = False


Written = Doc | LedgerError
"""A batch write's outcome: the document as written, or the refusal ``put`` would have raised."""


def check_batch(writes: Sequence[Write]) -> list[Write]:
    """The writes of a batch as a list; Invalid when there are more than ``MAX_BATCH`` or one is not a ``Write``."""
    out = list(writes)
    if len(out) > MAX_BATCH:
        raise Invalid(f"a batch holds at most {MAX_BATCH} writes, not {len(out)}: split it")
    for w in out:
        if not isinstance(w, Write):
            raise Invalid(f"a batch holds Write items, not {type(w).__name__}")
    return out


def put_each(store: Documents, db: str, writes: Sequence[Write], actor: str) -> list[Written]:
    """``put_many`` for a store without a batch of its own (a hub over HTTP): one ``put`` per write, each
    its own transaction; the outcomes as ``put_many`` gives them. A BackendError (the store did not answer)
    is raised: the writes before it stand, the rest were not tried."""
    out: list[Written] = []
    for w in check_batch(writes):
        try:
            out.append(store.put(db, w.doc, w.id, actor=actor, if_rev=w.if_rev, create_only=w.create_only))
        except BackendError:
            raise
        except LedgerError as exc:
            out.append(exc)
    return out


class Documents(Protocol):
    """Documents with revisions, the audit history and the change log.

    Everything a product, a CLI command or a remote client needs; the remote backend (the
    hub's API over HTTP) implements all of it. Writes take the acting actor explicitly: use
    ``Ledger`` to bind one. A local store times its revisions and leases on the clock it was
    opened with, and keeps it to itself: whoever needs the time is given the clock (a
    ``Ledger``, a ``Context``), never the store's.
    """

    url: str

    def get(self, db: str, id: str) -> Doc:
        """The live document; NotFound if it does not exist or was deleted."""

    def put(
        self, db: str, doc: Doc, id: str | None = None, *, actor: str,
        if_rev: str | None = None, create_only: bool = False,
    ) -> Doc:
        """Write ``doc`` as ``actor``; ``if_rev``/``create_only`` make it conditional (Conflict when stale)."""

    def put_many(self, db: str, writes: Sequence[Write], *, actor: str) -> list[Written]:
        """Write up to ``MAX_BATCH`` documents of ``db`` as ``actor`` in one transaction, each judged as ``put``
        judges it; a refused write is that write's outcome only (the others are written). Outcomes in the
        order of ``writes``; history, change log and listeners as for one ``put`` per write, in that order.
        A later write to the same id is judged against the earlier one of the batch."""

    def delete(self, db: str, id: str, *, actor: str, if_rev: str | None = None) -> Doc:
        """Delete a document (a tombstone revision in its history)."""

    def query(self, db: str, field: str, key: Any, limit: int = 100, after: str | None = None) -> Page:
        """Documents whose ``field`` equals ``key``, in id order, one page at a time."""

    def by_time(self, db: str, status: str, limit: int = 100, after: str | None = None, *, newest: bool = True,
                skip: int = 0) -> Page:
        """Live documents of ``db`` in ``status`` by when they were last written, newest (or oldest) first,
        one page at a time (``ledger/sql.py``: keyset paging on an index; ``skip`` jumps ahead a bounded
        number of documents, at most ``MAX_SKIP``)."""

    def search(self, db: str, text: str, limit: int = 50, after: str | None = None) -> SearchPage:
        """Live documents of ``db`` whose id starts with ``text`` or whose text holds its words
        (``ledger/search.py``), in id order, a page at a time, with the number of all matches."""

    def history(self, db: str, id: str) -> list[Change]:
        """Every revision of a document, oldest first: who wrote what, when."""

    def changes(self, since: int = 0, limit: int = 100, dbs: Sequence[str] | None = None) -> list[Change]:
        """Committed writes after ``since`` in commit order (of ``dbs`` only, if given)."""

    def head_seq(self) -> int:
        """The change log's last sequence number."""

    def close(self) -> None:
        """Give back connections and stop background threads."""


Want = tuple[tuple[str, ...], str | None]
"""Commits a listener acts on: to one of these databases, by any actor but this one (None: any)."""


class Coordination(Protocol):
    """What only a process that owns the database uses: commit wake-ups, the feed's cursors
    and batch leases, tick runs, and once-keys (request nonces)."""

    def subscribe(
        self, listener: Listener | HintedListener, *, hints: bool = False, wants: Sequence[Want] | None = None,
        paced: bool = False,
    ) -> Callable[[], None]:
        """Call ``listener`` after each commit (None, or an ``Elsewhere`` hint with ``hints``: another process
        committed); returns an unsubscribe function. ``wants`` (with ``hints``): the other processes'
        commits the listener acts on, as (databases, actor it skips or None); a backend may leave
        the others out (SQLite then sends this process no datagram for them). ``paced``: the listener's
        runners say when they wait for a commit (``waiting``), and a backend may leave out other processes'
        wake-ups while none does."""

    skips_wakeups: bool
    """Whether other processes may send this store no wake-up while no paced runner waits: a runner
    then looks once more after a short batch instead of waiting at once."""

    def waiting(self, runner: str, waiting: bool) -> None:
        """A paced listener's ``runner`` is about to claim and then wait for a commit (True, said before the
        claim), or has work in hand and claims again when done (False; also when it stops)."""

    def lead(self, group: str) -> Lead | None:
        """A handle on feed group ``group``'s lead among the processes sharing the database (``ledger.wake.Lead``:
        while the hot runner holding it looks for the group's work, the others need not); None where there is
        none, and every runner looks for itself."""

    def feed_claim(
        self, handler: str, dbs: Sequence[str], owner: str, lease_ms: int, batch: int = 10, *, skip_actor: str | None = None,
        also: Callable[[Batch], Writes | None] | None = None, woken: bool = False,
    ) -> Batch | None:
        """Lease the handler's next batch (or an expired one) to ``owner``, passing changes by ``skip_actor``;
        None when there is nothing to do. ``also(batch)``: writes to make with the claim (``batch.made``); it
        runs inside the claim's transaction and must not use the store. ``woken``: the claim follows a
        commit; one that finds only ``skip_actor``'s changes may leave them for the next claim to pass."""

    def feed_renew(self, batch: Batch, owner: str, lease_ms: int) -> bool:
        """Extend the batch's lease and record its progress; False if the lease was lost."""

    def feed_finish(self, batch: Batch, owner: str, *, also: Writes | None = None, then: NextClaim | None = None) -> bool:
        """Release the batch and move the handler's cursor; False if the lease was lost. ``also``: writes made
        in the same transaction (their outcomes in ``also.outcomes``), whether the lease was still held or not.
        ``then``: claim the handler's next batch in that transaction too, as ``feed_claim`` would (into
        ``then.batch``; None when there is nothing, or the lease was lost): one commit where there would be two."""

    def feed_position(self, handler: str, dbs: Sequence[str] | None = None) -> FeedPosition:
        """Where the handler's cursor is, its batches in flight and the log's head."""

    def claim_tick_run(self, tick: str, scheduled_at: int, owner: str) -> bool:
        """Claim one slot of a tick; False if another process has it."""

    def finish_tick_run(self, tick: str, scheduled_at: int, outcome: str, error: str | None = None) -> None:
        """Record how a tick run ended."""

    def tick_runs(self, tick: str | None = None, limit: int = 20) -> list[TickRun]:
        """The latest tick runs, newest first."""

    def use_once(self, key: str, expires_at: int) -> bool:
        """Record ``key`` until ``expires_at``; False if it was already recorded (a replay)."""


class Administration(Protocol):
    """What the operator of a local database uses: its health, document counts and field indexes."""

    def ping(self, timeout: float = 1.0) -> float:
        """Seconds the database took to answer one row; BackendError saying why it did not."""

    def counts(self, db: str | None = None) -> list[StatusCount]:
        """Live documents by database, kind and status."""

    def has_db(self, db: str) -> bool:
        """Whether anything was ever written to ``db`` (a database is made by its first write)."""

    def indexes(self) -> list[Index]:
        """Every field index."""

    def add_index(self, db: str, field: str) -> Index:
        """Index a field of a database's documents (idempotent)."""

    def drop_index(self, db: str, field: str) -> None:
        """Drop a field index; queries on the field become bounded scans."""


class Store(Documents, Coordination, Administration, Protocol):
    """A local backend (SQLite, PostgreSQL): documents, coordination and administration over one database."""


class Ledger:
    """Documents bound to one actor, on the one clock: what ticks and handlers get as ``ctx.db``
    (made by the hub's parts, the console's pages, the API's routes and the CLI, each with the
    clock the composition root gave them)."""

    def __init__(self, store: Documents, actor: str, clock: Clock) -> None:
        self.store = store
        self.actor = actor
        self.clock = clock

    def now(self) -> int:
        """Epoch milliseconds from this ledger's clock (the composition root's)."""
        return self.clock.now_ms()

    def role(self) -> str | None:
        """The role this ledger's actor holds, as the store's rules find it (``Rules.roles_from``); None when
        it holds none or the store cannot say (a hub over HTTP judges its writes itself)."""
        role_of = getattr(self.store, "role_of", None)
        return role_of(self.actor) if callable(role_of) else None

    def get(self, db: str, id: str) -> Doc:
        """The live document (see Documents.get)."""
        return self.store.get(db, id)

    def put(self, db: str, doc: Doc, id: str | None = None, *, if_rev: str | None = None, create_only: bool = False) -> Doc:
        """Write as this ledger's actor."""
        return self.store.put(db, doc, id, actor=self.actor, if_rev=if_rev, create_only=create_only)

    def put_many(self, db: str, writes: Sequence[Write]) -> list[Written]:
        """Write a batch as this ledger's actor (see Documents.put_many)."""
        return self.store.put_many(db, writes, actor=self.actor)

    def delete(self, db: str, id: str, *, if_rev: str | None = None) -> Doc:
        """Delete as this ledger's actor."""
        return self.store.delete(db, id, actor=self.actor, if_rev=if_rev)

    def query(self, db: str, field: str, key: Any, limit: int = 100, after: str | None = None) -> Page:
        """One page of a query (see Documents.query)."""
        return self.store.query(db, field, key, limit, after)

    def query_all(self, db: str, field: str, key: Any, page_size: int = 200) -> Iterator[Doc]:
        """Every document of a query, following the pages."""
        after = None
        while True:
            page = self.store.query(db, field, key, page_size, after)
            yield from page.docs
            if page.next is None:
                return
            after = page.next

    def by_time(self, db: str, status: str, limit: int = 100, after: str | None = None, *, newest: bool = True,
                skip: int = 0) -> Page:
        """See ``Documents.by_time``."""
        return self.store.by_time(db, status, limit, after, newest=newest, skip=skip)

    def search(self, db: str, text: str, limit: int = 50, after: str | None = None) -> SearchPage:
        """One page of a search (see Documents.search)."""
        return self.store.search(db, text, limit, after)

    def history(self, db: str, id: str) -> list[Change]:
        """Every revision of a document, oldest first."""
        return self.store.history(db, id)

    def __repr__(self) -> str:
        return f"Ledger({self.store.url!r}, actor={self.actor!r})"
