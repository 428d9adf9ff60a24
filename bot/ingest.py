"""The ingest tick: Bluesky mentions -> ``pending-build`` (or ``skipped``) documents.

Reads the bot's mention notifications back to ``max_age``, writes one document per new mention
with ``create_only`` and an ``_id`` from the post's at-uri (so re-ingesting is a no-op),
applies the guardrails, and marks the notifications seen. ``bot/ingest-checkpoint`` records
what the last pass saw.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger import Conflict, Context, Doc, Ledger, LedgerError, NotFound, TickEvent, Write
from platforms.bluesky import Bluesky

from .guardrails import Guardrails
from .machine import DB, STATE_DB
from .session import bluesky

log = logging.getLogger(__name__)
CHECKPOINT = "ingest-checkpoint"
WRITE_PAGE = 200  # new mentions written per transaction (on SQLite each commit also merges a search-index segment)


def mention_id(uri: str) -> str:
    """``at://did:plc:abc/app.bsky.feed.post/3k...`` -> ``did:plc:abc:3k...``."""
    parts = uri.removeprefix("at://").split("/")
    if len(parts) != 3:
        raise ValueError(f"not a post uri: {uri}")
    return f"{parts[0]}:{parts[2]}"


def _ms(stamp: str | None) -> int | None:
    if not stamp:
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _day(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")


LOOKBACK_SLACK_MS = 10 * 60_000  # beyond max_age: clocks that disagree by a few minutes lose nothing
PAGE_SIZE = 100  # listNotifications' maximum
MAX_PAGES = 500  # a bound on one tick's walk (50,000 notifications)
QUERY_PAGE = 1000  # the store's largest query page


def ingest(event: TickEvent, ctx: Context) -> dict[str, int]:
    """The ``ingest`` tick: new mentions of the bot become ``pending-build`` or ``skipped``."""
    guardrails = Guardrails.load(ctx.settings.guardrails or None)
    bsky = bluesky(ctx)
    try:
        return Ingester(ctx.db, guardrails).run(bsky)
    finally:
        bsky.close()


class Ingester:
    """One pass over the bot's mention notifications.

    **No mention within ``max_age`` is ever missed.** The AppView sorts notifications by, and
    reports as ``indexedAt``, the earlier of a post's ``createdAt`` and the time it was
    indexed, so a mention from a client whose clock is behind, or one delayed on the way,
    appears *below* newer mentions that were already ingested. The walk therefore does not
    stop at a checkpoint: it reads every notification back to ``max_age`` (plus a slack), and
    the ids (from the post's at-uri) tell what is new. Older mentions would be skipped as too
    old anyway, so that is where the walk ends, unless the last pass was longer ago (after
    downtime): then it reads back to the last pass, recording each missed mention as skipped.

    **Linear cost.** Each notification costs one point read; the caps are counted once per
    pass (the queue with bounded queries, today's accepted builds through the indexed
    ``capDay`` field) and then kept up to date in the pass, never by scanning the day's
    documents per mention.
    """

    def __init__(self, db: Ledger, guardrails: Guardrails) -> None:
        self.db = db  # bound to tick:ingest
        self.guardrails = guardrails

    def now(self) -> int:
        """Epoch milliseconds from the store's clock."""
        return self.db.now()

    def run(self, bsky: Bluesky) -> dict[str, int]:
        """One pass (see the class docstring): each new mention written as ``pending-build`` or ``skipped``, the
        checkpoint saved, the notifications marked seen. Returns how many mentions ended in each outcome
        ("pending-build", "skipped", "duplicate")."""
        now = self.now()
        horizon = now - self.guardrails.max_age_ms - LOOKBACK_SLACK_MS
        checkpoint = _ms(self._checkpoint().get("indexedAt"))
        if checkpoint is not None:
            # after downtime, also everything since the last pass: too old to build, but each
            # one is recorded as skipped ("too old"), so the gap is visible
            horizon = min(horizon, checkpoint)
        fresh: list[dict[str, Any]] = []
        newest = ""
        for note in bsky.walk_notifications(reasons=("mention",), limit=PAGE_SIZE, max_pages=MAX_PAGES):
            stamp = note.get("indexedAt") or ""
            newest = max(newest, stamp)
            if (_ms(stamp) or 0) < horizon:
                break  # sorted newest first: everything from here on is older than max_age and the last pass
            if note.get("reason") != "mention" or not _is_post(note.get("uri")):
                continue
            if not self._known(mention_id(note["uri"])):
                fresh.append(note)
        counts: dict[str, int] = {}
        if fresh:
            fresh.sort(key=lambda n: (_ms(n.get("indexedAt")) or 0, n["uri"]))  # oldest first
            viewer = bsky.get_posts([n["uri"] for n in fresh])
            caps = Caps.count(self.db, self.guardrails, _day(now))
            page: list[tuple[str, Doc, bool]] = []  # (id, document, counted toward the caps), written WRITE_PAGE at a time
            for note in fresh:
                page.append(self._judge(note, viewer.get(note["uri"], {}), bsky.did, caps))
                if len(page) >= WRITE_PAGE:
                    self._write(page, caps, counts)
            self._write(page, caps, counts)
            log.info("ingest: %s", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        if newest:
            self._save_checkpoint(newest, counts)
            bsky.update_seen(datetime.fromisoformat(newest.replace("Z", "+00:00")))
        return counts

    def _known(self, doc_id: str) -> bool:
        try:
            self.db.get(DB, doc_id)
        except NotFound:
            return False
        return True

    def _judge(self, note: dict[str, Any], post: dict[str, Any], bot_did: str, caps: Caps) -> tuple[str, Doc, bool]:
        """A new mention's document, ``pending-build`` or ``skipped`` by the guardrails: (id, document, whether it
        was counted toward the caps; ``_write`` takes the count back if another ingest wrote it first)."""
        uri = note["uri"]
        doc_id = mention_id(uri)
        record = note.get("record", {})
        author = note.get("author", {})
        text = str(record.get("text", ""))
        labels = {lab.get("val") for lab in note.get("labels", []) + author.get("labels", []) + post.get("labels", []) if lab.get("val")}
        now = self.now()
        created = _ms(record.get("createdAt")) or _ms(note.get("indexedAt")) or now
        reply = record.get("reply") or {}
        root = reply.get("root") or {"uri": uri, "cid": note["cid"]}
        doc = {
            "kind": "mention", "uri": uri, "cid": note["cid"], "text": text,
            "authorDid": author.get("did", ""), "authorHandle": author.get("handle", ""),
            "root": {"uri": root["uri"], "cid": root["cid"]}, "parent": {"uri": uri, "cid": note["cid"]},
            "postedAt": created, "ingestedAt": now, "day": _day(now), "attempts": 0,
        }
        reason = self.guardrails.static_reason(
            author_did=doc["authorDid"], author_handle=doc["authorHandle"], bot_did=bot_did, text=text,
            labels=labels, age_ms=now - created,
        )
        viewer = post.get("viewer", {})
        if reason is None and viewer.get("threadMuted"):
            reason = "muted thread"
        if reason is None and viewer.get("replyDisabled"):
            reason = "replies disabled"
        if reason is None:
            reason = caps.refuse(doc["authorDid"])
        doc["status"] = "skipped" if reason else "pending-build"
        if reason:
            doc["skipReason"] = reason
        else:
            doc["capDay"] = doc["day"]  # counts toward today's caps (an indexed field)
            caps.accept(doc["authorDid"])  # now: the next mention of this page is judged with it counted
        return doc_id, doc, not reason

    def _write(self, page: list[tuple[str, Doc, bool]], caps: Caps, counts: dict[str, int]) -> None:
        """Write a page of new mentions in one transaction (``create_only``: one another ingest wrote first is a
        duplicate); count the outcomes; empty ``page``. Another refusal fails the pass (the checkpoint is not saved,
        so the next pass writes what is missing)."""
        if not page:
            return
        results = self.db.put_many(DB, [Write(doc, doc_id, create_only=True) for doc_id, doc, _ in page])
        failed: LedgerError | None = None
        for (_, doc, counted), result in zip(page, results, strict=True):
            if isinstance(result, Conflict):
                outcome = "duplicate"  # another ingest got there first
                if counted:
                    caps.release(doc["authorDid"])
            elif isinstance(result, LedgerError):
                failed = failed or result
                continue
            else:
                outcome = str(doc["status"])
            counts[outcome] = counts.get(outcome, 0) + 1
        page.clear()
        if failed is not None:
            raise failed

    def _checkpoint(self) -> dict[str, Any]:
        try:
            return self.db.get(STATE_DB, CHECKPOINT)
        except NotFound:
            return {}

    def _save_checkpoint(self, indexed_at: str, counts: dict[str, int]) -> None:
        """What the last pass saw (for people and the console; the walk does not depend on it)."""
        try:
            head: dict[str, Any] | None = self.db.get(STATE_DB, CHECKPOINT)
        except NotFound:
            head = None
        if head is not None and head.get("indexedAt") == indexed_at and not counts:
            return  # nothing new: no write
        body = {"kind": "checkpoint", "indexedAt": indexed_at, "savedAt": self.now(), "lastCounts": counts}
        try:
            if head is not None:
                self.db.put(STATE_DB, body, CHECKPOINT, if_rev=head["_rev"])
            else:
                self.db.put(STATE_DB, body, CHECKPOINT, create_only=True)
        except Conflict:
            pass  # a concurrent pass saved its own view


@dataclass
class Caps:
    """The guardrails' counters for one pass: counted once, then kept up to date in memory."""

    guardrails: Guardrails
    queued: int
    today_total: int
    today_by_author: dict[str, int]

    @classmethod
    def count(cls, db: Ledger, guardrails: Guardrails, day: str) -> Caps:
        """The counters for ``day`` (UTC, ``YYYY-MM-DD``): the queue (``pending-build`` and ``building``, counted up
        to ``max_queue + 1``) and the builds accepted that day, in all and per author."""
        bound = guardrails.max_queue + 1
        queued = sum(_count_upto(db, status, bound) for status in ("pending-build", "building"))
        by_author: dict[str, int] = {}
        total = 0
        for d in db.query_all(DB, "capDay", day):
            if d.get("kind") == "mention":
                total += 1
                by_author[d.get("authorDid", "")] = by_author.get(d.get("authorDid", ""), 0) + 1
        return cls(guardrails, queued, total, by_author)

    def refuse(self, author: str) -> str | None:
        """Which cap a new build by ``author`` would break ("queue full", "daily cap", "author cap"), or None."""
        g = self.guardrails
        if self.queued >= g.max_queue:
            return "queue full"
        if self.today_total >= g.global_daily:
            return "daily cap"
        if self.today_by_author.get(author, 0) >= g.per_author_daily:
            return "author cap"
        return None

    def accept(self, author: str) -> None:
        """Count one accepted build by ``author``."""
        self.queued += 1
        self.today_total += 1
        self.today_by_author[author] = self.today_by_author.get(author, 0) + 1

    def release(self, author: str) -> None:
        """Take back one ``accept`` (the build was not written: another ingest wrote that mention first)."""
        self.queued -= 1
        self.today_total -= 1
        self.today_by_author[author] = self.today_by_author.get(author, 1) - 1


def _count_upto(db: Ledger, status: str, bound: int) -> int:
    """How many mentions are in ``status``, counted up to ``bound`` (a page of at most QUERY_PAGE at a time: a
    query's limit is bounded, and a queue cap may be larger)."""
    count, after = 0, None
    while count < bound:
        page = db.query(DB, "status", status, limit=min(QUERY_PAGE, bound - count), after=after)
        count += sum(1 for d in page.docs if d.get("kind") == "mention")
        if page.next is None:
            break
        after = page.next
    return count


def _is_post(uri: object) -> bool:
    return isinstance(uri, str) and uri.startswith("at://") and "/app.bsky.feed.post/" in uri
