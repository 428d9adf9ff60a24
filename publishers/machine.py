"""The publishing machine: database ``requests``, ``kind: "publish-request"``.

    pending --> items-created --> carousel-created --> done        an Instagram or Threads carousel
    pending --> carousel-created --> done                          one container (one image, or text)
    pending --> done                                               Bluesky: one record
    pending --> skipped                                            a raw duplicate of an earlier request
    X --> X                                                        intents, holds, waits (tick:publish)
    X --> error                                                    with a lastError (tick:publish)
    items-created | carousel-created --> pending                   recreate (expired or failed containers), at most twice
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
    from .validate import problems  # the rules of each platform load with the first new post

    found = problems(new)
    return found[0] if found else None


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


def _retry(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    for field in ("mediaId", "recordUri", "permalink"):
        if new.get(field):
            return f"a retried post starts over without {field}"
    return None


valid_request = Guard("valid", _valid)
published = Guard("published", _published)
has_error = Guard("lastError", _has_error)
has_reason = Guard("skipReason", _has_reason)
recreate = Guard("recreate", _recreate)
retry = Guard("retry", _retry)

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
        Edge("pending", "cancelled", by=PEOPLE),
        Edge("error", "pending", by=PEOPLE, guards=[retry]),
    ],
    fixed=["platform", "account", "slug", "images", "alt", "caption", "text", "replyTo", "at"],
    max_attempts=3,
)
