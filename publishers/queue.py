"""Queueing a post: the one way in for the CLI, the API and the console.

A request's id is ``<platform>:<account>:<slug>``, written ``create_only``: queueing the same
post again is a no-op reported as such (``queued: false``); different content under a slug
already used is a conflict. Everything is validated first, so nothing is written for a bad post.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ledger import Conflict, Ledger

from .errors import PostInvalid
from .machine import DB, KIND
from .validate import PLATFORMS, parse_at, problems

CONTENT = ("platform", "account", "slug", "images", "caption", "text", "replyTo", "at")
API_FIELDS = ("platform", "account", "slug", "caption", "images", "at", "replyTo")  # what POST /v1/publish takes


def request_id(platform: str, account: str, slug: str) -> str:
    """The id of a queued post: one post per platform, account and slug."""
    return f"{platform}:{account}:{slug}"


def new_request(
    platform: str, *, account: str, slug: str, caption: str = "", images: list[dict[str, str]] | None = None,
    at: str | None = None, reply_to: str | None = None, now_ms: int,
) -> dict[str, Any]:
    """The body of a publish request, as the CLI, the API and the console write it."""
    body: dict[str, Any] = {
        "kind": KIND, "status": "pending", "platform": platform, "account": account, "slug": slug,
        "caption": caption, "images": [dict(i) for i in images or []], "attempts": 0,
        "createdAt": datetime.fromtimestamp(now_ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    if at is not None:
        body["at"] = at
        when = parse_at(at)
        if when is not None:
            body["notBefore"] = when
    if reply_to:
        body["replyTo"] = reply_to
    return body


def queue(db: Ledger, body: dict[str, Any], *, image_hosts: list[str] | None = None, local_files: bool = True) -> tuple[dict[str, Any], bool]:
    """Validate and write a request. Returns (the document, whether it was queued now)."""
    found = problems(body, now_ms=db.now(), image_hosts=image_hosts, local_files=local_files)
    if found:
        raise PostInvalid("; ".join(found))
    doc_id = request_id(body["platform"], body["account"], body["slug"])
    try:
        return db.put(DB, body, doc_id, create_only=True), True
    except Conflict:
        head = db.get(DB, doc_id)
        if all(head.get(k) == body.get(k) for k in CONTENT):
            return head, False
        name = PLATFORMS[body["platform"]]
        raise Conflict(
            f"{doc_id} is already queued with different content ({head.get('status')}): "
            f"choose another --slug for a new {name} post, or cancel that one first"
        ) from None
