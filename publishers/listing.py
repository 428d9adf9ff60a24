"""Listing queued posts, for ``skyhub publish ls`` and ``GET /v1/publish``: a page of requests by
status (or all of them, by kind) through an index, and what the tick does next with each."""

from __future__ import annotations

from typing import Any

from ledger import Documents, Page

from .machine import DB, KIND

NEXT = {
    "pending": "create the container(s)", "items-created": "create the carousel", "carousel-created": "publish",
    "done": "", "error": "a person: retry or cancel", "skipped": "", "cancelled": "",
}


def next_step(doc: dict[str, Any]) -> str:
    """What the tick does next with this request, in words."""
    if doc.get("held"):
        return f"held: {doc['held'].get('reason', '')}"
    intent = doc.get("intent")
    if isinstance(intent, dict) and doc.get("status") not in ("done", "error"):
        return f"read back the unfinished {intent.get('step')} call"
    if doc.get("platform") == "bsky" and doc.get("status") == "pending":
        return "post the record"
    if doc.get("status") == "pending" and len(doc.get("images") or []) <= 1:
        return "create the container"
    return NEXT.get(str(doc.get("status")), "")


def page(store: Documents, *, platform: str | None = None, status: str | None = None, limit: int = 100,
         after: str | None = None) -> Page:
    """One page of publish requests (by id), filtered on platform; ``next`` continues it.

    A page can hold fewer than ``limit`` requests when other documents share the index key."""
    raw = store.query(DB, "status", status, limit, after) if status else store.query(DB, "kind", KIND, limit, after)
    docs = [d for d in raw.docs if d.get("kind") == KIND and (not platform or d.get("platform") == platform)]
    return Page(docs, raw.next)


def listing(store: Documents, *, platform: str | None = None, status: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Up to ``limit`` publish requests, following pages."""
    out: list[dict[str, Any]] = []
    after: str | None = None
    while len(out) < limit:
        found = page(store, platform=platform, status=status, limit=min(max(limit, 1), 1000), after=after)
        out.extend(found.docs)
        if found.next is None:
            break
        after = found.next
    return out[:limit]
