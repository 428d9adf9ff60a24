"""A post, seen and acted on as one: its variants (one publish request per network, sharing
``post``, its slug), and what a manager does with it, for the CLI, the API and the console.

A post's id is its slug (``launch``); a variant's id is ``PLATFORM:ACCOUNT:SLUG``. Every act
takes either: a post's id acts on each of its variants, a variant's id on that one only (a
request queued with ``skyhub publish ig|threads|bsky`` is a post of one variant, named by its id).

    submit_for_review   draft -> in-review                                 every person
    approve             draft | in-review -> approved                      approvers, admins
    reject              in-review -> draft, with a reason                  approvers, admins
    queue_post          draft | in-review -> pending                       approvers, admins; editors unless
                                                                           publish.require_review
    cancel_post         draft | in-review | approved | pending -> cancelled every person
    comment             a comment (who, when, text) on every variant       every person, before the queue starts it
    edit, reschedule    content and time, while no step has been taken     every person (an editor's change to an
                                                                           approved post goes back to review)
    duplicate           a new draft with the same content                  every person

Variants already where an act leads, or where it cannot apply (a variant published already),
are reported as such (``outcome``), and the others are moved; an act that applies to none is
``PostInvalid`` saying why. The machine judges every write in its transaction, with the
writer's role: these functions only say things clearly first. Each function takes the ledger
bound to the person acting, the hub's settings where the rules need them, and ``now_ms`` from
the caller's clock; each returns plain JSON-ready data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger import Ledger, NotFound

from .admission import Admission
from .errors import PostInvalid
from .listing import Reads, by_time, excerpt, iso, next_step, sort_key, time_ms
from .machine import DB, KIND, PUBLISHED, started
from .queue import (
    CANCELLABLE,
    PostIn,
    Queued,
    VariantIn,
    post_status,
    review_by,
    slugify,
    submit_post,
    updated_body,
)
from .validate import PLATFORMS, SLUG, problems

ORDER = {p: n for n, p in enumerate(PLATFORMS)}


def variants_of(store: Reads, post_id: str) -> list[dict[str, Any]]:
    """The variants of a post (by its slug), or the one request named by a variant's id; NotFound otherwise."""
    if ":" in post_id:
        try:
            doc = store.get(DB, post_id)
        except NotFound:
            raise NotFound(f"no post or variant {post_id!r} (a post is named by its slug, a variant by "
                           "PLATFORM:ACCOUNT:SLUG)") from None
        if doc.get("kind") != KIND:
            raise NotFound(f"{post_id!r} is not a post")
        return [doc]
    found = [d for d in by_time(store, post=post_id) if d.get("kind") == KIND]
    if not found:
        raise NotFound(f"no post {post_id!r} (a post is named by its slug, a variant by PLATFORM:ACCOUNT:SLUG)")
    return sorted(found, key=lambda d: (ORDER.get(str(d.get("platform")), 9), str(d.get("account"))))


def post_id(doc: dict[str, Any]) -> str:
    """The id of the post a request belongs to: its ``post`` (a slug), else its own id."""
    return str(doc.get("post") or doc["_id"])


def comments_of(variants: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The post's comments: every variant's, once each, oldest first."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for v in variants:
        for c in v.get("comments") or []:
            if isinstance(c, dict):
                key = (str(c.get("by")), str(c.get("at")), str(c.get("text")))
                if key not in seen:
                    seen.add(key)
                    out.append(c)
    return sorted(out, key=lambda c: str(c.get("at")))


def variant_view(doc: dict[str, Any]) -> dict[str, Any]:
    """A variant as the listings show it: the document, its ``nextStep``, its ``time`` (ISO 8601 UTC)."""
    return {**doc, "nextStep": next_step(doc), "time": iso(time_ms(doc)) if time_ms(doc) else None}


def post_view(variants: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A post as JSON (``variants`` in the networks' order): ``id``, ``status`` (its variants', see
    ``post_status``), ``time`` (the earliest variant's, ISO 8601 UTC), ``published`` (every variant live:
    done or commented), ``caption`` (an excerpt of the first variant's), ``review`` (the latest review
    act), ``comments`` and ``variants`` (each with nextStep and time)."""
    earliest = min(variants, key=sort_key)
    first = variants[0]  # in the networks' order: Instagram, Threads, Bluesky
    reviews = [v["review"] for v in variants if isinstance(v.get("review"), dict)]
    return {
        "id": post_id(first), "status": post_status([str(v.get("status")) for v in variants]),
        "time": iso(time_ms(earliest)) if time_ms(earliest) else None,
        "published": all(v.get("status") in PUBLISHED for v in variants),
        "caption": excerpt(first.get("caption", first.get("text")), 80),
        "review": max(reviews, key=lambda r: str(r.get("at"))) if reviews else None,
        "comments": comments_of(variants), "variants": [variant_view(v) for v in variants],
    }


def get_post(store: Reads, post_or_variant: str) -> dict[str, Any]:
    """One post (or one variant, by its id) as ``post_view``."""
    return post_view(variants_of(store, post_or_variant))


def list_posts(store: Reads, *, status: str | None = None, platform: str | None = None, since_ms: int | None = None,
               until_ms: int | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Posts sorted by time (their earliest variant's; see ``listing.by_time`` for the filters), each as
    ``post_view`` with the variants that match, up to ``limit`` posts."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for doc in by_time(store, status=status, platform=platform, since_ms=since_ms, until_ms=until_ms):
        groups.setdefault(post_id(doc), []).append(doc)
    views = [post_view(sorted(v, key=lambda d: (ORDER.get(str(d.get("platform")), 9), str(d.get("account")))))
             for v in groups.values()]
    views.sort(key=lambda p: (min(sort_key(v) for v in p["variants"]), p["id"]))
    return views[:limit]


# ---- acting on every variant -----------------------------------------------------------------
def _result(post: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": post, "status": post_status([str(r["status"]) for r in rows]), "variants": rows}


def _act(db: Ledger, target: str, what: str, sources: Sequence[str], make: Any) -> dict[str, Any]:
    """Move every variant of ``target`` that is in one of ``sources`` with ``make(doc) -> body``; the others
    are reported (``outcome``: ``moved``, or why not)."""
    variants = variants_of(db, target)
    eligible = [v for v in variants if v.get("status") in sources]
    if not eligible:
        now = ", ".join(f"{v['_id']} is {v.get('status')}" for v in variants)
        raise PostInvalid(f"nothing to {what}: {now}; only a post that is {' or '.join(sources)} can be")
    rows = []
    for v in variants:
        if v in eligible:
            doc = db.put(DB, make(v), v["_id"], if_rev=v["_rev"])
            rows.append({"id": v["_id"], "status": doc["status"], "rev": doc["_rev"], "outcome": "moved"})
        else:
            rows.append({"id": v["_id"], "status": v.get("status"), "rev": v["_rev"], "outcome": f"left: it is {v.get('status')}"})
    return _result(post_id(variants[0]), rows)


def _body(doc: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body.update(fields)
    return {k: v for k, v in body.items() if v is not None}


def submit_for_review(db: Ledger, target: str, *, now_ms: int) -> dict[str, Any]:
    """Ask for review: every draft variant goes to ``in-review``, signed by ``db.actor``."""
    return _act(db, target, "submit for review", ("draft",),
                lambda d: _body(d, status="in-review", review=review_by(db.actor, "submitted", now_ms), updatedAt=now_ms))


def approve(db: Ledger, target: str, *, now_ms: int) -> dict[str, Any]:
    """Approve (approvers and admins): variants in draft or in review go to ``approved``; the tick queues
    each once its time has come."""
    return _act(db, target, "approve", ("draft", "in-review"),
                lambda d: _body(d, status="approved", review=review_by(db.actor, "approved", now_ms), updatedAt=now_ms))


def reject(db: Ledger, target: str, reason: str, *, now_ms: int) -> dict[str, Any]:
    """Reject (approvers and admins) with a reason: variants in review go back to ``draft``."""
    if not reason.strip():
        raise PostInvalid("a rejection needs a reason: say what to change")
    return _act(db, target, "reject", ("in-review",),
                lambda d: _body(d, status="draft", review=review_by(db.actor, "rejected", now_ms, reason.strip()), updatedAt=now_ms))


def queue_post(db: Ledger, target: str, *, now_ms: int) -> dict[str, Any]:
    """Queue directly: variants in draft or in review go to ``pending`` (approvers and admins; editors too
    when ``publish.require_review`` is off)."""
    return _act(db, target, "queue", ("draft", "in-review"), lambda d: _body(d, status="pending", updatedAt=now_ms))


def cancel_post(db: Ledger, target: str, *, now_ms: int) -> dict[str, Any]:
    """Cancel every variant that has not been published (not while a call for it is under way)."""
    return _act(db, target, "cancel", CANCELLABLE, lambda d: _body(d, status="cancelled", updatedAt=now_ms))


def comment(db: Ledger, target: str, text: str, *, now_ms: int) -> dict[str, Any]:
    """Add a comment (who, when, text) to the post: kept on each variant that is still a person's to change."""
    text = text.strip()
    if not text:
        raise PostInvalid("a comment needs text")
    variants = variants_of(db, target)
    entry = {"by": db.actor, "at": iso(now_ms), "text": text}
    open_ = [v for v in variants if started(v) is None]
    if not open_:
        states = ", ".join(f"{v['_id']} is {v.get('status')}" for v in variants)
        raise PostInvalid(f"nothing to comment on: {states}; comments are for posts the queue has not started")
    rows = []
    for v in variants:
        if v in open_:
            doc = db.put(DB, _body(v, comments=[*(v.get("comments") or []), entry]), v["_id"], if_rev=v["_rev"])
            rows.append({"id": v["_id"], "status": doc["status"], "rev": doc["_rev"], "outcome": "commented"})
        else:
            rows.append({"id": v["_id"], "status": v.get("status"), "rev": v["_rev"], "outcome": f"left: it is {v.get('status')}"})
    return _result(post_id(variants[0]), rows)


@dataclass(frozen=True)
class Change:
    """A change of a post's content (None: unchanged): ``caption`` for every variant, ``captions`` per
    platform (``{"ig": ...}``, after ``caption``), ``images``, ``first_comment`` (``""`` removes it),
    ``at`` (a time with its zone; ``unschedule`` removes it: the post goes as soon as it is queued)."""

    caption: str | None = None
    captions: Mapping[str, str] | None = None
    images: Sequence[dict[str, Any]] | None = None
    first_comment: str | None = None
    at: str | None = None
    unschedule: bool = False

    def fields(self, platform: str) -> dict[str, Any]:
        """The content fields this change sets on a variant of ``platform`` (None: remove)."""
        out: dict[str, Any] = {}
        if self.caption is not None:
            out["caption"] = self.caption
        if self.captions and platform in self.captions:
            out["caption"] = self.captions[platform]
        if self.images is not None:
            out["images"] = [dict(i) for i in self.images]
        if self.first_comment is not None:
            out["firstComment"] = self.first_comment or None
        if self.unschedule:
            out["at"] = None
        elif self.at is not None:
            out["at"] = self.at
        return out


def edit(db: Ledger, settings: Any, target: str, change: Change, *, now_ms: int) -> dict[str, Any]:
    """Change a post's content while no step has been taken (the machine decides): each variant that may
    change gets one new revision; a variant the tick has started, or published, is left as it is and said
    so. Every problem of every variant at once (``PostInvalid``), before anything is written. An
    editor's change to an approved post (or a queued one, when review is required) sends it back to review."""
    variants = variants_of(db, target)
    admission = Admission.from_settings(settings)
    plans: list[tuple[dict[str, Any], dict[str, Any] | None, str]] = []
    found: list[str] = []
    for v in variants:
        fields = change.fields(str(v.get("platform")))
        if all(v.get(k) == fields[k] for k in fields):
            plans.append((v, None, "unchanged"))
            continue
        why = started(v)
        if why is not None:
            plans.append((v, None, f"left: its content is fixed ({why})"))
            continue
        body = updated_body(db, settings, v, fields, now_ms)
        found += [f"{v['_id']}: {p}" for p in problems(body, now_ms=now_ms if "at" in fields else None, admission=admission)]
        plans.append((v, body, "edited"))
    if found:
        raise PostInvalid("; ".join(found))
    if not any(b is not None for _, b, _ in plans) and any(o.startswith("left") for _, _, o in plans):
        raise PostInvalid("nothing to change: " + "; ".join(f"{v['_id']} is {v.get('status')}: {o.removeprefix('left: ')}"
                                                            for v, _, o in plans if o.startswith("left")))
    rows = []
    for v, new, outcome in plans:
        doc = db.put(DB, new, v["_id"], if_rev=v["_rev"]) if new is not None else v
        rows.append({"id": v["_id"], "status": doc.get("status"), "rev": doc.get("_rev"), "outcome": outcome})
    return _result(post_id(variants[0]), rows)


def reschedule(db: Ledger, settings: Any, target: str, at: str | None, *, now_ms: int) -> dict[str, Any]:
    """Move a post to ``at`` (a time with its zone; None: as soon as it is queued), while no step has been taken."""
    return edit(db, settings, target, Change(at=at, unschedule=at is None), now_ms=now_ms)


def _free_slug(store: Reads, base: str) -> str:
    stem = (slugify(base, 80) or "post")[:88]
    for n in range(1, 1000):
        slug = f"{stem}-copy" if n == 1 else f"{stem}-copy-{n}"
        if not by_time(store, post=slug) and not list(store.query(DB, "slug", slug, 1).docs):
            return slug
    raise PostInvalid(f"no free slug for a copy of {base!r}: give one")


def duplicate(db: Ledger, settings: Any, target: str, *, slug: str | None = None, at: str | None = None,
              now_ms: int) -> Queued:
    """A new post with the same content as ``target`` (every variant: caption, images, alt texts, first
    comment), saved as a draft under ``slug`` (default: ``<slug>-copy``, ``-copy-2``, ...), at ``at`` (default:
    the source's time when it is still ahead, else none)."""
    variants = variants_of(db, target)
    if slug is not None and not SLUG.match(slug):
        raise PostInvalid(f"slug must be 1-100 letters, digits, '.', '_' or '-' (got {slug[:60]!r})")
    source = str(variants[0].get("post") or variants[0].get("slug") or "post")
    new_slug = slug or _free_slug(db, source)
    shared_at = at
    parts = []
    for v in variants:
        keep = v.get("at") if at is None and (time_ms(v) > now_ms and v.get("status") not in PUBLISHED) else None
        parts.append(VariantIn(platform=str(v["platform"]), account=str(v["account"]), caption=str(v.get("caption", v.get("text")) or ""),
                               images=[dict(i) for i in v.get("images") or []], first_comment=v.get("firstComment") or "",
                               at=shared_at or keep, reply_to=v.get("replyTo")))
    return submit_post(db, settings, PostIn(variants=parts, slug=new_slug, draft=True), now_ms=now_ms)


__all__ = [
    "Change", "approve", "cancel_post", "comment", "comments_of", "duplicate", "edit",
    "get_post", "list_posts", "post_id", "post_view", "queue_post", "reject", "reschedule", "submit_for_review",
    "variant_view", "variants_of",
]
