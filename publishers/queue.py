"""Queueing a post: the one way in for the CLI, the API, the console and the import.

A request's id is ``<platform>:<account>:<slug>``, written ``create_only``: queueing the same
post again is a no-op reported as such (``queued: false``). Everything is validated first, so
nothing is written for a bad post.

- ``submit``: one network (``skyhub publish ig|threads|bsky``, ``POST /v1/publish``): different
  content under a slug already used is a conflict.
- ``submit_post``: one post for several networks (``skyhub publish post``, ``POST /v1/posts``,
  ``publishers.importer``): one request per network (a *variant*), each with ``post`` set to the
  post's slug. The slug is made from the content when none is given (the same content gives the
  same slug: queued twice, it is one post). Under a slug already used, changed content
  **updates** the post's variants while no step has been taken (a new revision of each; a
  variant the tick has started is a conflict), and a network not in the post yet is added.
  Whether a new post starts ``draft``, ``in-review`` or ``pending`` follows the writer's role
  (``publish.require_review``); the machine judges it again in the write's transaction.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ledger import Conflict, Ledger, NotFound

from .admission import Admission
from .errors import PostInvalid
from .machine import APPROVING, DB, KIND, TICK_FIELDS, started
from .validate import PLATFORMS, SLUG, day_of, parse_at, problems

CONTENT = ("platform", "account", "slug", "images", "caption", "text", "replyTo", "at")
POST_CONTENT = ("images", "caption", "text", "replyTo", "at", "firstComment")  # what an update of a post may change


def request_id(platform: str, account: str, slug: str) -> str:
    """The id of a queued post: one post per platform, account and slug."""
    return f"{platform}:{account}:{slug}"


def iso(ms: int) -> str:
    """Epoch ms as ISO 8601 UTC with milliseconds (``2026-12-01T09:00:00.000Z``): how new fields write times."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_request(
    platform: str, *, account: str, slug: str, caption: str = "", images: list[dict[str, str]] | None = None,
    at: str | None = None, reply_to: str | None = None, now_ms: int, post: str | None = None,
    first_comment: str | None = None, status: str = "pending", review: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The body of a publish request, as the CLI, the API and the console write it (``post``: the slug of
    the post it is a variant of; ``status``: draft, in-review or pending)."""
    body: dict[str, Any] = {
        "kind": KIND, "status": status, "platform": platform, "account": account, "slug": slug,
        "caption": caption, "images": [dict(i) for i in images or []], "attempts": 0, "createdAt": iso(now_ms),
    }
    if post is not None:
        body["post"] = post
    if at is not None:
        body["at"] = at
        when = parse_at(at)
        if when is not None:
            body["notBefore"] = when
    if reply_to:
        body["replyTo"] = reply_to
    if first_comment:
        body["firstComment"] = first_comment
    if review is not None:
        body["review"] = review
    day = day_of(body)
    if day is not None:
        body["day"] = day
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
            f"choose another slug for a new {name} post, or cancel that one first"
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


# ---- a post for several networks ----------------------------------------------------------------
@dataclass(frozen=True)
class VariantIn:
    """One network of a post: its platform and account (None: ``publish.accounts``), and what differs
    from the post's shared content (None: the shared value; ``""`` for ``first_comment``: none here)."""

    platform: str
    account: str | None = None
    caption: str | None = None
    images: Sequence[dict[str, Any]] | None = None
    first_comment: str | None = None
    at: str | None = None
    reply_to: str | None = None


@dataclass(frozen=True)
class PostIn:
    """A post to queue (``submit_post``): shared content and one ``VariantIn`` per network. ``slug`` names
    the post (made from the content when None); ``draft`` saves it as a draft instead of queueing it."""

    variants: Sequence[VariantIn]
    caption: str = ""
    images: Sequence[dict[str, Any]] = ()
    first_comment: str | None = None
    at: str | None = None
    slug: str | None = None
    draft: bool = False


@dataclass
class Queued:
    """What ``submit_post`` did (or, dry, would do): the post's id (its slug) and, per variant, its id,
    status and ``outcome``: ``new`` (written now), ``unchanged`` (the same content was there) or
    ``updated`` (changed content, a new revision)."""

    id: str
    variants: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False

    @property
    def queued(self) -> bool:
        """Whether a variant was written new."""
        return any(v["outcome"] == "new" for v in self.variants)

    @property
    def updated(self) -> bool:
        """Whether a variant's content changed."""
        return any(v["outcome"] == "updated" for v in self.variants)

    @property
    def status(self) -> str:
        """The variants' status when they share one, else each of them, comma-separated."""
        return post_status([str(v["status"]) for v in self.variants])

    def as_dict(self) -> dict[str, Any]:
        """The answer of ``POST /v1/posts`` and ``skyhub publish post``."""
        return {"id": self.id, "queued": self.queued, "updated": self.updated, "status": self.status,
                "dryRun": self.dry_run, "variants": self.variants}


ALIASES = {"ig": "ig", "instagram": "ig", "threads": "threads", "bsky": "bsky", "bluesky": "bsky"}


def parse_target(text: str) -> tuple[str, str | None]:
    """A network as people name one: ``ig``, ``threads:2900000000000001``, ``bsky:shop.bsky.social``
    (``instagram`` and ``bluesky`` too); (platform, account or None). PostInvalid for anything else."""
    name, _, account = text.strip().partition(":")
    platform = ALIASES.get(name.lower())
    if platform is None:
        raise PostInvalid(f"{text.strip()[:60]!r} is not a network: use ig, threads or bsky, optionally with :ACCOUNT "
                          "(ig:17841400000000000, bsky:shop.bsky.social)")
    return platform, account.strip() or None


def post_status(statuses: Sequence[str]) -> str:
    """A post's status from its variants': the one they share, else every one, comma-separated."""
    found = sorted(set(statuses))
    return found[0] if len(found) == 1 else ", ".join(found)


def slugify(text: str, limit: int = 40) -> str:
    """Lowercase letters and digits of ``text`` joined by ``-`` (at most ``limit`` characters; "" for none)."""
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return words[:limit].rstrip("-")


def content_slug(bodies: Sequence[dict[str, Any]]) -> str:
    """A post's slug made from its content: its first words and a hash of every variant, so that the same
    content queued again is the same post, and different content a different one."""
    canonical = sorted(json.dumps([b.get(k) for k in ("platform", "account", *POST_CONTENT)], sort_keys=True, ensure_ascii=False)
                       for b in bodies)
    digest = hashlib.sha256("\n".join(canonical).encode()).hexdigest()[:10]
    words = slugify(next((str(b.get("caption") or "") for b in bodies if b.get("caption")), "")) or "post"
    return f"{words}-{digest}"


def _label(body: dict[str, Any]) -> str:
    return f"{body['platform']}:{body['account']}"


def review_by(actor: str, verdict: str, now_ms: int, reason: str | None = None) -> dict[str, Any]:
    """The ``review`` record of a review move (submitted, approved, rejected, withdrawn) by ``actor`` now."""
    out: dict[str, Any] = {"by": actor, "at": iso(now_ms), "verdict": verdict}
    if reason:
        out["reason"] = reason
    return out


def may_queue(db: Ledger, settings: Any) -> bool:
    """Whether ``db.actor``'s posts go straight to the queue: review is not required (``publish.require_review``),
    or the actor approves (an approver, an admin, the ``admin`` actor). The machine judges it again."""
    if db.actor == "admin" or not getattr(settings.section("publish"), "require_review", False):
        return True
    return db.role() in APPROVING


def after_change(db: Ledger, settings: Any, doc: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """The status (and review) a post takes when ``db.actor`` changes its content: an approved post changed by
    someone who does not approve goes back to review, and so does a queued one when review is required."""
    status = doc.get("status")
    approves = db.actor == "admin" or db.role() in APPROVING
    if (status == "approved" and not approves) or (status == "pending" and not may_queue(db, settings)):
        return {"status": "in-review", "review": review_by(db.actor, "submitted", now_ms)}
    return {}


def _variant_body(db: Ledger, settings: Any, post: PostIn, v: VariantIn, slug: str, status: str, now_ms: int,
                  out: list[str]) -> dict[str, Any] | None:
    try:
        account = default_account(v.platform, v.account, settings.section("publish"))
    except PostInvalid as exc:
        out.append(f"{v.platform}: {exc.reason}")
        return None
    if v.platform not in PLATFORMS:
        out.append(f"{v.platform}:{account}: platform must be one of {', '.join(PLATFORMS)}")
        return None
    comment = post.first_comment if v.first_comment is None else v.first_comment
    review = review_by(db.actor, "submitted", now_ms) if status == "in-review" else None
    return new_request(v.platform, account=account, slug=slug, caption=post.caption if v.caption is None else v.caption,
                       images=[dict(i) for i in (post.images if v.images is None else v.images)],
                       at=post.at if v.at is None else v.at, reply_to=v.reply_to, now_ms=now_ms, post=slug,
                       first_comment=comment or None, status=status, review=review)


def same_content(head: dict[str, Any], body: dict[str, Any]) -> bool:
    """Whether a variant already written holds what ``body`` asks for."""
    return all(head.get(k) == body.get(k) for k in POST_CONTENT)


def updated_body(db: Ledger, settings: Any, head: dict[str, Any], changes: dict[str, Any], now_ms: int) -> dict[str, Any]:
    """``head`` with its content changed (``changes``: content fields, None to remove one): ``at`` writes
    ``notBefore`` and ``day`` with it, and the status follows the writer's role (``after_change``)."""
    body = {k: v for k, v in head.items() if not k.startswith("_")}
    body.update(changes)
    at = body.get("at")
    body["notBefore"] = parse_at(at) if at is not None else None
    body.update(after_change(db, settings, head, now_ms))
    body["updatedAt"] = now_ms
    body = {k: v for k, v in body.items() if v is not None}
    day = day_of(body)
    if day is not None:
        body["day"] = day
    return body


def submit_post(db: Ledger, settings: Any, post: PostIn, *, now_ms: int, dry_run: bool = False) -> Queued:
    """Queue one post for several networks, as ``db.actor`` (see the module docstring): every problem of
    every variant at once (``PostInvalid``, one sentence each, naming the variant as ``platform:account``),
    then one write per variant, each judged again by the machine in its transaction. A conflict
    (a variant the tick has started, with other content) is found before anything is written.
    ``dry_run`` checks and reads, and writes nothing. Variants are written one by one: if one write
    fails, running the same call again writes the rest (the written ones are ``unchanged``)."""
    out: list[str] = []
    if not post.variants:
        raise PostInvalid("a post needs at least one network: give each as platform[:account] (ig, threads, bsky)")
    if post.slug is not None and not SLUG.match(post.slug):
        out.append(f"slug must be 1-100 letters, digits, '.', '_' or '-' (got {post.slug[:60]!r})")
    status = "draft" if post.draft else "pending" if may_queue(db, settings) else "in-review"
    slug = post.slug or "-"
    bodies = [b for v in post.variants if (b := _variant_body(db, settings, post, v, slug, status, now_ms, out)) is not None]
    seen: set[str] = set()
    for body in bodies:
        if _label(body) in seen:
            out.append(f"{_label(body)} is given twice: a post has one variant per network and account")
        seen.add(_label(body))
    if post.slug is None and bodies:
        slug = content_slug(bodies)
        for body in bodies:
            body["slug"] = body["post"] = slug
    admission = Admission.from_settings(settings)
    for body in bodies:
        out += [f"{_label(body)}: {p}" for p in problems(body, now_ms=now_ms, admission=admission)]
    if out:
        raise PostInvalid("; ".join(out))
    plan: list[tuple[dict[str, Any], dict[str, Any] | None, str]] = []
    for body in bodies:
        doc_id = request_id(body["platform"], body["account"], slug)
        try:
            head: dict[str, Any] | None = db.get(DB, doc_id)
        except NotFound:
            head = None
        if head is None:
            plan.append((body, None, "new"))
        elif head.get("kind") != KIND or head.get("post") != slug:
            raise Conflict(f"{doc_id} is already used by a post that is not {slug!r}: choose another slug")
        elif same_content(head, body):
            plan.append((body, head, "unchanged"))
        elif head.get("status") == "cancelled":
            raise Conflict(f"{doc_id} was cancelled: choose another slug for a new post (or duplicate that one)")
        elif (why := started(head)) is not None:
            raise Conflict(f"{doc_id} is already queued with different content, and its content is fixed ({why}): "
                           "choose another slug for a new post, or cancel that one and duplicate it")
        else:
            plan.append((body, head, "updated"))
    result = Queued(slug, dry_run=dry_run)
    for body, head, outcome in plan:
        doc_id = request_id(body["platform"], body["account"], slug)
        if dry_run:
            shown = head if outcome == "unchanged" and head is not None else body
            result.variants.append({"id": doc_id, "platform": body["platform"], "account": body["account"],
                                    "status": shown.get("status"), "outcome": outcome})
            continue
        if head is None:
            try:
                doc = db.put(DB, body, doc_id, create_only=True)
            except Conflict:  # written by another writer just now: judged as a repeat
                doc, outcome = db.get(DB, doc_id), "unchanged"
        elif outcome == "unchanged":
            doc = head
        else:
            changes = {k: body.get(k) for k in POST_CONTENT}
            doc = db.put(DB, updated_body(db, settings, head, changes, now_ms), doc_id, if_rev=head["_rev"])
        result.variants.append({"id": doc_id, "platform": body["platform"], "account": body["account"],
                                "status": doc.get("status"), "outcome": outcome, "rev": doc.get("_rev")})
    return result


RETRY_RESET = TICK_FIELDS  # what a retried post starts over without


def _post(db: Ledger, doc_id: str) -> dict[str, Any]:
    """A queued post by id; NotFound naming what ids look like."""
    try:
        doc = db.get(DB, doc_id)
    except NotFound:
        raise NotFound(f"no queued post {doc_id!r} (ids look like ig:ACCOUNT:SLUG)") from None
    if doc.get("kind") != KIND:
        raise NotFound(f"{doc_id!r} is not a queued post")
    return doc


def _move(db: Ledger, doc_id: str, status: str, allowed: tuple[str, ...], doc: dict[str, Any] | None = None,
          **fields: Any) -> dict[str, Any]:
    doc = doc if doc is not None else _post(db, doc_id)
    if doc.get("status") not in allowed:
        states = allowed[0] if len(allowed) == 1 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
        raise PostInvalid(f"{doc_id} is {doc.get('status')}: only a post that is {states} can be moved to {status}")
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body.update(fields)
    body["status"] = status
    body = {k: v for k, v in body.items() if v is not None}
    return db.put(DB, body, doc_id, if_rev=doc["_rev"])


def retry(db: Ledger, doc_id: str) -> dict[str, Any]:
    """Put a post that ended in error back in the queue, starting over with fresh attempts."""
    return _move(db, doc_id, "pending", ("error",), attempts=0, **dict.fromkeys(RETRY_RESET))


CANCELLABLE = ("draft", "in-review", "approved", "pending")


def cancel(db: Ledger, doc_id: str) -> dict[str, Any]:
    """Cancel a post that has not been published: a draft, one in review, approved or still pending (the machine
    refuses while a call for it is under way)."""
    return _move(db, doc_id, "cancelled", CANCELLABLE)


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
                 permalink=chosen.get("permalink") or f"media {media_id}", intent=None, lastError=None,
                 commentDue=True if doc.get("firstComment") else None)
