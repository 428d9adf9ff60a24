"""Queueing a post: the one way in for the CLI, the API and the console.

A request's id is ``<platform>:<account>:<slug>``, written ``create_only``: queueing the same
post again is a no-op reported as such (``queued: false``); different content under a slug
already used is a conflict. Everything is validated first, so nothing is written for a bad post.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ledger import Conflict, Ledger

from .admission import Admission
from .errors import PostInvalid
from .machine import DB, KIND, TICK_FIELDS
from .validate import PLATFORMS, parse_at, problems

CONTENT = ("platform", "account", "slug", "images", "caption", "text", "replyTo", "at")


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


def check(db: Ledger, body: dict[str, Any], admission: Admission) -> None:
    """Every problem of ``body`` at once, as ``PostInvalid`` (one sentence each); nothing when it is good."""
    found = problems(body, now_ms=db.now(), admission=admission)
    if found:
        raise PostInvalid("; ".join(found))


def queue(db: Ledger, body: dict[str, Any], *, admission: Admission | None = None) -> tuple[dict[str, Any], bool]:
    """Validate and write a request, judged by the hub's settings (``admission``: the strictest
    when not given; the machine's start guard judges the write again in its transaction).
    Returns (the document, whether it was queued now)."""
    check(db, body, admission or Admission())
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


def default_account(platform: str, account: str | None, publish: Any) -> str:
    """The account a post goes to: the one given, else ``publish.accounts.PLATFORM``; PostInvalid when neither."""
    found = account or (dict(getattr(publish, "accounts", None) or {}).get(platform) if platform in PLATFORMS else None)
    if not found:
        raise PostInvalid(f"no account: give one, or set publish.accounts.{platform} on the hub "
                          f"(SKYHUB_PUBLISH__ACCOUNTS__{str(platform).upper()})")
    return str(found)


def submit(db: Ledger, settings: Any, *, platform: str, account: str | None, slug: str, caption: str = "",
           images: list[dict[str, Any]] | None = None, at: str | None = None, reply_to: str | None = None,
           dry_run: bool = False) -> tuple[dict[str, Any], bool]:
    """The one way into the queue, for the CLI, the API and the console alike: the default account,
    the body, every problem at once (``PostInvalid``, one sentence each), then the write, judged
    again by the machine in its transaction. ``settings`` is the hub's (``section(name)``).
    Returns (the document, whether it was queued now); ``dry_run`` checks and writes nothing
    (returns the body, False)."""
    chosen = default_account(platform, account, settings.section("publish"))
    body = new_request(platform, account=chosen, slug=slug, caption=caption, images=images, at=at, reply_to=reply_to,
                       now_ms=db.now())
    admission = Admission.from_settings(settings)
    if dry_run:
        check(db, body, admission)
        return body, False
    return queue(db, body, admission=admission)


RETRY_RESET = TICK_FIELDS  # what a retried post starts over without


def _post(db: Ledger, doc_id: str) -> dict[str, Any]:
    """A queued post by id; NotFound naming what ids look like."""
    from ledger import NotFound

    try:
        doc = db.get(DB, doc_id)
    except NotFound:
        raise NotFound(f"no queued post {doc_id!r} (ids look like ig:ACCOUNT:SLUG; see `skyhub publish ls`)") from None
    if doc.get("kind") != KIND:
        raise NotFound(f"{doc_id!r} is not a queued post")
    return doc


def _move(db: Ledger, doc_id: str, status: str, allowed: tuple[str, ...], doc: dict[str, Any] | None = None,
          **fields: Any) -> dict[str, Any]:
    doc = doc if doc is not None else _post(db, doc_id)
    if doc.get("status") not in allowed:
        raise PostInvalid(f"{doc_id} is {doc.get('status')}: only a post that is {' or '.join(allowed)} can be moved to {status}")
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body.update(fields)
    body["status"] = status
    body = {k: v for k, v in body.items() if v is not None}
    return db.put(DB, body, doc_id, if_rev=doc["_rev"])


def retry(db: Ledger, doc_id: str) -> dict[str, Any]:
    """Put a post that ended in error back in the queue, starting over with fresh attempts."""
    return _move(db, doc_id, "pending", ("error",), attempts=0, **dict.fromkeys(RETRY_RESET))


def cancel(db: Ledger, doc_id: str) -> dict[str, Any]:
    """Cancel a post that has not started publishing (still pending)."""
    return _move(db, doc_id, "cancelled", ("pending",))


def resolve(db: Ledger, doc_id: str, media_id: str) -> dict[str, Any]:
    """Record which of the candidate media a post that needs a person became (see ``containers``)."""
    doc = _post(db, doc_id)
    if doc.get("status") != "needs-person":
        raise PostInvalid(f"{doc_id} is {doc.get('status')}: only a post that needs a person has candidates to choose from")
    offered = {str(c.get("mediaId")): c for c in doc.get("candidates") or [] if isinstance(c, dict)}
    chosen = offered.get(media_id)
    if chosen is None:
        raise PostInvalid(f"{media_id!r} is not a candidate of {doc_id}: choose one of {', '.join(sorted(offered))}")
    return _move(db, doc_id, "done", ("needs-person",), doc, mediaId=media_id, publishedAt=db.now(), updatedAt=db.now(),
                 permalink=chosen.get("permalink") or f"media {media_id}", intent=None, lastError=None)
