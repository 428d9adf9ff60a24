"""The SQL base both real backends share: the write path, queries, history, the change log,
feed and tick bookkeeping. Subclasses supply connections, transactions and the few bits of
dialect that differ (JSON field access, locking, notification).

The hot path is plain DB-API: one write is a handful of statements in one transaction, with
no ORM in between (an ORM session per write costs an order of magnitude in throughput).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .actor import parse_actor
from .clock import SYSTEM, Clock
from .document import check_db, check_field, check_id, encode, next_rev, split_body, with_meta
from .errors import Conflict, Invalid, NotFound
from .machine import Rules
from .store import Batch, Change, Doc, FeedPosition, Listener, Page, TickRun

log = logging.getLogger(__name__)

MAX_LIMIT = 1000
TICK_RUNS_KEPT = 200


class Head:
    __slots__ = ("rev", "body", "deleted")

    def __init__(self, rev: str, body: Doc, deleted: bool) -> None:
        self.rev, self.body, self.deleted = rev, body, deleted


class SQLStore:
    """Shared implementation; see ``SQLiteStore`` and ``PostgresStore``."""

    url: str
    param = "?"

    def __init__(self, url: str, rules: Rules | None = None, clock: Clock = SYSTEM) -> None:
        self.url = url
        self.rules = rules if rules is not None else Rules()
        self.clock = clock
        self._listeners: list[Listener] = []
        self._listeners_lock = threading.Lock()
        self._indexed: set[str] = set()

    # ---- dialect hooks -------------------------------------------------------------
    @contextmanager
    def _tx(self, bookkeeping: bool = False) -> Iterator[Any]:  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    def _cursor(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _field_match(self, field: str) -> str:  # pragma: no cover - abstract
        """SQL that compares the top-level ``field`` of ``body`` with one parameter."""
        raise NotImplementedError

    def _field_param(self, key: Any) -> Any:
        return key

    def _load(self, body: Any) -> Doc:
        return json.loads(body) if isinstance(body, (str, bytes)) else body

    def _lock_head(self) -> str:
        return ""

    def _append_change(self, cur: Any, db: str, id: str, rev: str, text: str, deleted: bool, actor: str, at: int) -> int:  # pragma: no cover
        raise NotImplementedError

    def _ensure_index(self, field: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _start_wakeups(self) -> None:
        """Begin telling listeners about other processes' commits (if the backend can)."""

    def _q(self, sql: str) -> str:
        return sql if self.param == "?" else sql.replace("?", self.param)

    # ---- listeners -----------------------------------------------------------------
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._listeners_lock:
            self._listeners.append(listener)
        self._start_wakeups()

        def unsubscribe() -> None:
            with self._listeners_lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def _wake(self, change: Change | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:  # a listener must never break a committed write
                log.exception("commit listener failed")

    # ---- documents -----------------------------------------------------------------
    def get(self, db: str, id: str) -> Doc:
        check_db(db)
        check_id(id)
        cur = self._cursor()
        cur.execute(self._q("SELECT rev, body, deleted FROM docs WHERE db = ? AND id = ?"), (db, id))
        row = cur.fetchone()
        if row is None:
            raise NotFound(f"no document {id!r} in {db!r}")
        if row[2]:
            raise NotFound(f"document {id!r} in {db!r} was deleted (rev {row[0]})")
        return with_meta(self._load(row[1]), id, row[0])

    def put(
        self, db: str, doc: Doc, id: str | None = None, *, actor: str,
        if_rev: str | None = None, create_only: bool = False,
    ) -> Doc:
        check_db(db)
        parse_actor(actor)
        body, body_id, body_rev = split_body(doc)
        if id is None:
            id = body_id or uuid.uuid4().hex
        check_id(id)
        if body_id is not None and body_id != id:
            raise Invalid(f"the document's _id {body_id!r} does not match the id {id!r}")
        if body_rev is not None:
            if if_rev is not None and if_rev != body_rev:
                raise Invalid(f"the document's _rev {body_rev!r} does not match if_rev {if_rev!r}")
            if_rev = body_rev
        if create_only and if_rev is not None:
            raise Invalid("create_only and if_rev cannot be combined: a new document has no revision")
        return self._write(db, id, body, encode(body), actor, if_rev, create_only, deleted=False)

    def delete(self, db: str, id: str, *, actor: str, if_rev: str | None = None) -> Doc:
        check_db(db)
        check_id(id)
        parse_actor(actor)
        return self._write(db, id, {}, "{}", actor, if_rev, False, deleted=True)

    def _write(
        self, db: str, id: str, body: Doc, text: str, actor: str,
        if_rev: str | None, create_only: bool, deleted: bool,
    ) -> Doc:
        now = self.clock.now_ms()
        with self._tx() as cur:
            cur.execute(self._q("SELECT rev, body, deleted FROM docs WHERE db = ? AND id = ?" + self._lock_head()), (db, id))
            row = cur.fetchone()
            head = Head(row[0], self._load(row[1]), bool(row[2])) if row else None
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
            self.rules.check(db, old, None if deleted else body, actor, now, blind=blind)
            rev = next_rev(head.rev if head else None, text, deleted)
            if head is None:
                cur.execute(
                    self._q("INSERT INTO docs (db, id, rev, body, deleted) VALUES (?, ?, ?, ?, ?)" + self._conflict_nothing()),
                    (db, id, rev, text, int(deleted)),
                )
                if cur.rowcount != 1:
                    raise Conflict(f"document {id!r} was created in {db!r} by another writer just now")
            else:
                cur.execute(
                    self._q("UPDATE docs SET rev = ?, body = ?, deleted = ? WHERE db = ? AND id = ?"),
                    (rev, text, int(deleted), db, id),
                )
            seq = self._append_change(cur, db, id, rev, text, deleted, actor, now)
        out = with_meta(body, id, rev, deleted)
        if self._listeners:
            self._wake(Change(seq, db, id, rev, out, deleted, actor, now))
        return out

    def _conflict_nothing(self) -> str:
        return " ON CONFLICT (db, id) DO NOTHING"

    def query(self, db: str, field: str, key: Any, limit: int = 100, after: str | None = None) -> Page:
        check_db(db)
        check_field(field)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise Invalid(f"limit must be between 1 and {MAX_LIMIT}")
        if key is not None and not isinstance(key, (str, int, float, bool)):
            raise Invalid("query key must be a string, number or boolean")
        if field not in self._indexed:
            self._ensure_index(field)
            self._indexed.add(field)
        sql = f"SELECT id, rev, body FROM docs WHERE db = ? AND {self._field_match(field)} AND deleted = 0 AND id > ? ORDER BY id LIMIT ?"
        cur = self._cursor()
        cur.execute(self._q(sql), (db, self._field_param(key), after or "", limit + 1))
        rows = cur.fetchall()
        docs = [with_meta(self._load(b), i, r) for i, r, b in rows[:limit]]
        return Page(docs, docs[-1]["_id"] if len(rows) > limit else None)

    def history(self, db: str, id: str) -> list[Change]:
        check_db(db)
        check_id(id)
        cur = self._cursor()
        cur.execute(
            self._q("SELECT seq, db, id, rev, body, deleted, actor, at FROM changes WHERE db = ? AND id = ? ORDER BY seq"),
            (db, id),
        )
        return [self._change(r) for r in cur.fetchall()]

    def changes(self, since: int = 0, limit: int = 100, dbs: Sequence[str] | None = None) -> list[Change]:
        if not isinstance(since, int) or since < 0:
            raise Invalid("since must be a sequence number >= 0")
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise Invalid(f"limit must be between 1 and {MAX_LIMIT}")
        cur = self._cursor()
        cur.execute(*self._changes_sql(since, None, limit, dbs))
        return [self._change(r) for r in cur.fetchall()]

    def _changes_sql(self, after: int, upto: int | None, limit: int, dbs: Sequence[str] | None) -> tuple[str, tuple[Any, ...]]:
        sql = "SELECT seq, db, id, rev, body, deleted, actor, at FROM changes WHERE seq > ?"
        args: list[Any] = [after]
        if upto is not None:
            sql += " AND seq <= ?"
            args.append(upto)
        if dbs:
            sql += " AND db IN (" + ", ".join("?" for _ in dbs) + ")"
            args.extend(dbs)
        sql += " ORDER BY seq LIMIT ?"
        args.append(limit)
        return self._q(sql), tuple(args)

    def head_seq(self) -> int:
        cur = self._cursor()
        cur.execute("SELECT COALESCE(MAX(seq), 0) FROM changes")
        return int(cur.fetchone()[0])

    def _change(self, row: Sequence[Any]) -> Change:
        seq, db, id, rev, body, deleted, actor, at = row
        return Change(int(seq), db, id, rev, with_meta(self._load(body), id, rev, bool(deleted)), bool(deleted), actor, int(at))

    # ---- feed bookkeeping ----------------------------------------------------------
    def feed_claim(self, handler: str, dbs: Sequence[str], owner: str, lease_ms: int, batch: int = 10) -> Batch | None:
        now = self.clock.now_ms()
        with self._tx(bookkeeping=True) as cur:
            cur.execute(self._q("INSERT INTO feed_cursors (handler, done, claimed) VALUES (?, 0, 0) ON CONFLICT (handler) DO NOTHING"), (handler,))
            cur.execute(self._q("SELECT done, claimed FROM feed_cursors WHERE handler = ?" + self._lock_head()), (handler,))
            _done, claimed = cur.fetchone()
            cur.execute(
                self._q("SELECT after, upto, tries, pos FROM feed_leases WHERE handler = ? AND lease_until < ? ORDER BY after LIMIT 1"),
                (handler, now),
            )
            expired = cur.fetchone()
            if expired:
                after, upto, tries, pos = expired
                cur.execute(
                    self._q("UPDATE feed_leases SET owner = ?, lease_until = ? WHERE handler = ? AND after = ?"),
                    (owner, now + lease_ms, handler, after),
                )
                cur.execute(*self._changes_sql(after, upto, MAX_LIMIT, dbs))
                changes = [self._change(r) for r in cur.fetchall()]
                log.info("feed: taking over an expired batch", extra={"handler": handler, "after": after, "upto": upto})
                return Batch(handler, int(after), int(upto), changes, int(tries), int(pos))
            cur.execute(*self._changes_sql(claimed, None, batch, dbs))
            changes = [self._change(r) for r in cur.fetchall()]
            if not changes:
                return None
            upto = changes[-1].seq
            cur.execute(
                self._q("INSERT INTO feed_leases (handler, after, upto, owner, lease_until, tries, pos) VALUES (?, ?, ?, ?, ?, 0, 0)"),
                (handler, claimed, upto, owner, now + lease_ms),
            )
            cur.execute(self._q("UPDATE feed_cursors SET claimed = ? WHERE handler = ?"), (upto, handler))
            return Batch(handler, int(claimed), upto, changes)

    def feed_renew(self, batch: Batch, owner: str, lease_ms: int) -> bool:
        now = self.clock.now_ms()
        with self._tx(bookkeeping=True) as cur:
            cur.execute(
                self._q("UPDATE feed_leases SET lease_until = ?, tries = ?, pos = ? WHERE handler = ? AND after = ? AND owner = ?"),
                (now + lease_ms, batch.tries, batch.pos, batch.handler, batch.after, owner),
            )
            return cur.rowcount == 1

    def feed_finish(self, batch: Batch, owner: str) -> bool:
        with self._tx(bookkeeping=True) as cur:
            cur.execute(self._q("SELECT claimed FROM feed_cursors WHERE handler = ?" + self._lock_head()), (batch.handler,))
            (claimed,) = cur.fetchone()
            cur.execute(
                self._q("DELETE FROM feed_leases WHERE handler = ? AND after = ? AND owner = ?"),
                (batch.handler, batch.after, owner),
            )
            if cur.rowcount != 1:
                return False
            cur.execute(self._q("SELECT MIN(after) FROM feed_leases WHERE handler = ?"), (batch.handler,))
            (low,) = cur.fetchone()
            cur.execute(self._q("UPDATE feed_cursors SET done = ? WHERE handler = ?"), (low if low is not None else claimed, batch.handler))
            return True

    def feed_position(self, handler: str) -> FeedPosition:
        cur = self._cursor()
        cur.execute(self._q("SELECT done, claimed FROM feed_cursors WHERE handler = ?"), (handler,))
        row = cur.fetchone()
        cur.execute(self._q("SELECT after, upto, owner, lease_until, tries FROM feed_leases WHERE handler = ? ORDER BY after"), (handler,))
        leases = [dict(zip(("after", "upto", "owner", "leaseUntil", "tries"), r)) for r in cur.fetchall()]
        return FeedPosition(handler, int(row[0]) if row else 0, int(row[1]) if row else 0, leases)

    # ---- tick runs -----------------------------------------------------------------
    def claim_tick_run(self, tick: str, scheduled_at: int, owner: str) -> bool:
        now = self.clock.now_ms()
        with self._tx(bookkeeping=True) as cur:
            cur.execute(
                self._q("INSERT INTO tick_runs (tick, scheduled_at, owner, started_at) VALUES (?, ?, ?, ?) ON CONFLICT (tick, scheduled_at) DO NOTHING"),
                (tick, scheduled_at, owner, now),
            )
            won = cur.rowcount == 1
            if won:
                cur.execute(
                    self._q(
                        "DELETE FROM tick_runs WHERE tick = ? AND scheduled_at < "
                        "(SELECT scheduled_at FROM tick_runs WHERE tick = ? ORDER BY scheduled_at DESC LIMIT 1 OFFSET ?)"
                    ),
                    (tick, tick, TICK_RUNS_KEPT),
                )
            return won

    def finish_tick_run(self, tick: str, scheduled_at: int, outcome: str, error: str | None = None) -> None:
        with self._tx(bookkeeping=True) as cur:
            cur.execute(
                self._q("UPDATE tick_runs SET finished_at = ?, outcome = ?, error = ? WHERE tick = ? AND scheduled_at = ?"),
                (self.clock.now_ms(), outcome, error, tick, scheduled_at),
            )

    def tick_runs(self, tick: str | None = None, limit: int = 20) -> list[TickRun]:
        cur = self._cursor()
        sql = "SELECT tick, scheduled_at, owner, started_at, finished_at, outcome, error FROM tick_runs"
        args: tuple[Any, ...] = ()
        if tick is not None:
            sql += " WHERE tick = ?"
            args = (tick,)
        cur.execute(self._q(sql + " ORDER BY scheduled_at DESC, tick LIMIT ?"), (*args, limit))
        return [TickRun(*r) for r in cur.fetchall()]

    # ---- once keys -----------------------------------------------------------------
    def use_once(self, key: str, expires_at: int) -> bool:
        """Record ``key`` until ``expires_at`` (epoch ms); False if it was already recorded.

        Used for request nonces, so that a replayed signature is refused by every process.
        """
        now = self.clock.now_ms()
        with self._tx() as cur:
            cur.execute(self._q("DELETE FROM once_keys WHERE expires_at < ?"), (now,))
            cur.execute(self._q("INSERT INTO once_keys (key, expires_at) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"), (key, expires_at))
            return cur.rowcount == 1

    def __repr__(self) -> str:
        return f"{type(self).__name__}({redact_url(self.url)!r})"


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for logs, reprs and errors)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user, has_pw, _ = creds.partition(":")
    return f"{scheme}://{user}{':***' if has_pw else ''}@{host}"
