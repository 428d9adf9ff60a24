"""The publishing machine: database ``requests``, ``kind: "publish-request"``.

    pending --> items-created --> carousel-created --> done        an Instagram or Threads carousel
    pending --> carousel-created --> done                          one container (one image, or text)
    pending --> done                                               Bluesky: one record
    pending --> skipped                                            a raw duplicate of an earlier request
    X --> X                                                        intents, holds, waits (tick:publish)
    X --> error                                                    with a lastError (tick:publish)
    items-created | carousel-created --> pending                   recreate (expired or failed containers), at most twice
    carousel-created --> needs-person --> done                     a publish that went live and cannot be told apart
                                                                   from another post's: a person picks its media
    pending --> cancelled, error --> pending                       people: cancel, retry

The tick walks one step per request per run; intents are written with ``if_rev`` before any
call that creates something remote, so a crash, a timeout or a second process never makes it
publish twice.
"""

from __future__ import annotations

from typing import Any

from ledger import ADMIN, Edge, Guard, GuardContext, Machine, fresh, tick, user

DB = "requests"
KIND = "publish-request"
MAX_RECREATES = 2
PUBLISHER = tick("publish")
PEOPLE = [user(), ADMIN]


def _valid(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    refused = fresh(old, new, ctx)
    if refused:
        return refused
    from .admission import Admission, creator_problem  # each platform's rules load with the first new post
    from .validate import new_problems

    refused = creator_problem(ctx)
    if refused:
        return refused
    found = new_problems(new, Admission.for_guard(ctx))
    return "; ".join(found) if found else None


def _published(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    if not (new.get("mediaId") or new.get("recordUri")):
        return "a done post needs its mediaId (Instagram, Threads) or recordUri (Bluesky)"
    if not new.get("permalink"):
        return "a done post needs its permalink"
    return None


def _has_error(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    return None if new.get("lastError") else "an error needs a lastError saying what went wrong"


def _has_reason(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    return None if new.get("skipReason") else "a skipped post needs a skipReason"


def _recreate(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    done = int((old or {}).get("recreates") or 0)
    if done >= MAX_RECREATES:
        return f"containers were recreated {done} times already; the limit is {MAX_RECREATES}"
    if new.get("recreates") != done + 1:
        return f"a recreate counts itself: recreates must go from {done} to {done + 1}"
    return None


# What the tick writes as it walks a post: a retried post starts over without any of them.
TICK_FIELDS = ("mediaId", "recordUri", "recordCid", "permalink", "publishedAt", "intent", "containers", "carouselId",
               "carouselAt", "checks", "held", "rkey", "recreates", "fetchedAgain", "candidates", "lastError", "notBefore")


def _retry(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    for field in TICK_FIELDS:
        if field in new and field not in ("lastError", "notBefore"):
            return f"a retried post starts over without {field}"
    if new.get("attempts") != 0:
        return "a retried post starts over with attempts at 0"
    return None


def _candidates(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    found = new.get("candidates")
    if not isinstance(found, list) or not found or not all(isinstance(c, dict) and c.get("mediaId") for c in found):
        return "a post that needs a person lists the candidate media (candidates: [{mediaId, permalink, timestamp}])"
    return None


def _chosen(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    refused = _published(old, new, ctx)
    if refused:
        return refused
    offered = {str(c.get("mediaId")) for c in (old or {}).get("candidates") or [] if isinstance(c, dict)}
    if str(new.get("mediaId")) not in offered:
        return f"choose one of the candidate media ({', '.join(sorted(offered))})"
    return None


valid_request = Guard("valid", _valid)
published = Guard("published", _published)
has_error = Guard("lastError", _has_error)
has_reason = Guard("skipReason", _has_reason)
recreate = Guard("recreate", _recreate)
retry = Guard("retry", _retry)
has_candidates = Guard("candidates", _candidates)
chosen = Guard("one of the candidates", _chosen)

STEPS = ("pending", "items-created", "carousel-created")

PUBLISH = Machine(
    DB,
    kind=KIND,
    start={"pending": valid_request},
    edges=[
        Edge("pending", "items-created", by=PUBLISHER),
        Edge(["pending", "items-created"], "carousel-created", by=PUBLISHER),
        Edge(["pending", "carousel-created"], "done", by=PUBLISHER, guards=[published]),
        Edge("pending", "skipped", by=PUBLISHER, guards=[has_reason]),
        Edge(list(STEPS), "error", by=PUBLISHER, guards=[has_error]),
        Edge(["items-created", "carousel-created"], "pending", by=PUBLISHER, guards=[recreate]),
        Edge("pending", "pending", by=PUBLISHER),  # intents, holds, waits on each step
        Edge("items-created", "items-created", by=PUBLISHER),
        Edge("carousel-created", "carousel-created", by=PUBLISHER),
        Edge("carousel-created", "needs-person", by=PUBLISHER, guards=[has_candidates]),
        Edge("needs-person", "needs-person", by=PUBLISHER, guards=[has_candidates]),
        Edge("needs-person", "done", by=[*PEOPLE, PUBLISHER], guards=[chosen]),
        Edge("pending", "cancelled", by=PEOPLE),
        Edge("error", "pending", by=PEOPLE, guards=[retry]),
    ],
    fixed=["platform", "account", "slug", "images", "alt", "caption", "text", "replyTo", "at"],
    max_attempts=3,
)
