"""The ingest tick: Bluesky mentions -> ``pending-build`` (or ``skipped``) documents.

Follows notifications back to its checkpoint (a document in ``bot``), writes one document per
mention with ``create_only`` and an ``_id`` from the post's at-uri (so re-ingesting is a
no-op), applies the guardrails, and marks the notifications seen.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ledger import Conflict, Ledger, NotFound

from .bluesky import Bluesky
from .guardrails import Guardrails
from .machine import DB, STATE_DB

log = logging.getLogger(__name__)
CHECKPOINT = "ingest-checkpoint"


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


class Ingester:
    def __init__(self, db: Ledger, bluesky: Callable[[], Bluesky], guardrails: Guardrails) -> None:
        self.db = db  # bound to tick:ingest
        self.bluesky = bluesky
        self.guardrails = guardrails

    def now(self) -> int:
        return int(self.db.store.clock.now_ms())  # type: ignore[attr-defined]

    def run(self, event: Any = None, ctx: Any = None) -> dict[str, int]:
        bsky = self.bluesky()
        try:
            return self._run(bsky)
        finally:
            bsky.close()

    def _run(self, bsky: Bluesky) -> dict[str, int]:
        checkpoint = self._checkpoint()
        since = checkpoint.get("indexedAt") or ""
        since_ms = _ms(since) or 0
        seen_at_checkpoint = set(checkpoint.get("uris") or [])
        fresh: list[dict[str, Any]] = []
        for note in bsky.walk_notifications(reasons=("mention",)):
            indexed = _ms(note.get("indexedAt")) or 0
            if since and indexed < since_ms:
                break  # newest first: everything from here on was ingested before
            if indexed == since_ms and note.get("uri") in seen_at_checkpoint:
                continue
            if note.get("reason") == "mention":
                fresh.append(note)
        fresh.sort(key=lambda n: _ms(n.get("indexedAt")) or 0)  # oldest first
        counts: dict[str, int] = {}
        if not fresh:
            return counts
        viewer = bsky.get_posts([n["uri"] for n in fresh])
        for note in fresh:
            outcome = self._ingest(note, viewer.get(note["uri"], {}), bsky.did)
            counts[outcome] = counts.get(outcome, 0) + 1
        newest = fresh[-1]["indexedAt"]
        uris = [n["uri"] for n in fresh if _ms(n["indexedAt"]) == _ms(newest)]
        if _ms(newest) == since_ms:
            uris = sorted(seen_at_checkpoint | set(uris))
        self._save_checkpoint(checkpoint, newest, uris)
        bsky.update_seen(datetime.fromisoformat(newest.replace("Z", "+00:00")))
        log.info("ingest: %s", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        return counts

    def _ingest(self, note: dict[str, Any], post: dict[str, Any], bot_did: str) -> str:
        uri = note["uri"]
        doc_id = mention_id(uri)
        record = note.get("record", {})
        author = note.get("author", {})
        text = str(record.get("text", ""))
        labels = {lab.get("val") for lab in note.get("labels", []) + author.get("labels", []) + post.get("labels", []) if lab.get("val")}
        created = _ms(record.get("createdAt")) or _ms(note.get("indexedAt")) or self.now()
        reply = record.get("reply") or {}
        root = reply.get("root") or {"uri": uri, "cid": note["cid"]}
        doc = {
            "kind": "mention", "uri": uri, "cid": note["cid"], "text": text,
            "authorDid": author.get("did", ""), "authorHandle": author.get("handle", ""),
            "root": {"uri": root["uri"], "cid": root["cid"]}, "parent": {"uri": uri, "cid": note["cid"]},
            "postedAt": created, "ingestedAt": self.now(), "day": _day(self.now()), "attempts": 0,
        }
        reason = self.guardrails.static_reason(
            author_did=doc["authorDid"], author_handle=doc["authorHandle"], bot_did=bot_did, text=text,
            labels=labels, age_ms=self.now() - created,
        )
        viewer = post.get("viewer", {})
        if reason is None and viewer.get("threadMuted"):
            reason = "muted thread"
        if reason is None and viewer.get("replyDisabled"):
            reason = "replies disabled"
        if reason is None:
            reason = self._cap(doc)
        doc["status"] = "skipped" if reason else "pending-build"
        if reason:
            doc["skipReason"] = reason
        try:
            self.db.put(DB, doc, doc_id, create_only=True)
        except Conflict:
            return "duplicate"
        return "skipped" if reason else "pending-build"

    def _cap(self, doc: dict[str, Any]) -> str | None:
        g = self.guardrails
        queued = sum(1 for _ in self.db.query_all(DB, "status", "pending-build")) + sum(1 for _ in self.db.query_all(DB, "status", "building"))
        if queued >= g.max_queue:
            return "queue full"
        today = [d for d in self.db.query_all(DB, "day", doc["day"]) if d.get("kind") == "mention" and d.get("status") != "skipped"]
        if len(today) >= g.global_daily:
            return "daily cap"
        if sum(1 for d in today if d.get("authorDid") == doc["authorDid"]) >= g.per_author_daily:
            return "author cap"
        return None

    def _checkpoint(self) -> dict[str, Any]:
        try:
            return self.db.get(STATE_DB, CHECKPOINT)
        except NotFound:
            return {}

    def _save_checkpoint(self, head: dict[str, Any], indexed_at: str, uris: list[str]) -> None:
        body = {"kind": "checkpoint", "indexedAt": indexed_at, "uris": uris, "savedAt": self.now()}
        if head.get("_rev"):
            self.db.put(STATE_DB, body, CHECKPOINT, if_rev=head["_rev"])
        else:
            self.db.put(STATE_DB, body, CHECKPOINT, create_only=True)
