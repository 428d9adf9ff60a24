"""Listing posts, for ``skyhub publish ls``, ``GET /v1/publish``, ``GET /v1/posts`` and the console:

- ``page``/``listing``: requests by status (or all of them, by kind) through an index, in id order;
- ``by_time``: requests sorted by their time (``time_ms``: when the tick may publish it,
  ``notBefore``, else its ``at``, else when it was published, else when it was written; then
  when it was written), over a window of days through the ``day`` index (the UTC date of the
  post's time, written with it), a status, or every request;

and what the tick does next with each (``next_step``), and a caption cut for a table (``excerpt``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from ledger import Documents, Invalid, Page

from .machine import DB, KIND
from .validate import parse_at

NEXT = {
    "draft": "a person: submit it for review, or queue it", "in-review": "an approver: approve or reject",
    "approved": "queued at its time", "pending": "create the container(s)", "items-created": "create the carousel",
    "carousel-created": "publish", "done": "", "commented": "", "error": "a person: retry or cancel", "skipped": "",
    "cancelled": "", "needs-person": "an approver: choose its media",
}
MAX_DAYS = 400  # a window of days is read day by day: at most this many


class Reads(Protocol):
    """What the listings read through: a store (``Documents``) or a ``Ledger`` bound to an actor."""

    def get(self, db: str, id: str) -> dict[str, Any]:
        """The live document."""

    def query(self, db: str, field: str, key: Any, limit: int = 100, after: str | None = None) -> Page:
        """One page of a query."""


def next_step(doc: dict[str, Any]) -> str:
    """What the tick (or a person) does next with this request, in words."""
    status = doc.get("status")
    if doc.get("held"):
        return f"held: {doc['held'].get('reason', '')}"
    intent = doc.get("intent")
    if isinstance(intent, dict) and status not in ("error",) and (status != "done" or doc.get("commentDue")):
        return f"read back the unfinished {intent.get('step')} call"
    if status == "done" and doc.get("commentDue"):
        return "post the first comment"
    if status == "done" and doc.get("commentError"):
        return f"the first comment was not posted: {doc['commentError']}"
    if doc.get("platform") == "bsky" and status == "pending":
        return "post the record"
    if status == "pending" and len(doc.get("images") or []) <= 1:
        return "create the container"
    return NEXT.get(str(status), "")


def _ms(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def time_ms(doc: dict[str, Any]) -> int:
    """A request's time, for sorting and calendars: ``notBefore``, else ``at``, else ``publishedAt``, else ``createdAt``."""
    for when in (_ms(doc.get("notBefore")), parse_at(doc.get("at")), _ms(doc.get("publishedAt")), parse_at(doc.get("createdAt"))):
        if when is not None:
            return when
    return 0


def sort_key(doc: dict[str, Any]) -> tuple[int, int, str]:
    """(time, written, id): the order of ``by_time``."""
    return time_ms(doc), parse_at(doc.get("createdAt")) or 0, str(doc.get("_id"))


def iso(ms: int) -> str:
    """Epoch ms as ISO 8601 UTC (``2026-12-01T09:00:00.000Z``), as the listings' new fields write times."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def excerpt(text: Any, width: int = 50) -> str:
    """The start of a caption on one line, cut at ``width`` characters with an ellipsis."""
    line = " ".join(str(text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _days(since_ms: int, until_ms: int) -> list[str]:
    first = datetime.fromtimestamp(since_ms / 1000, tz=UTC).date()
    last = datetime.fromtimestamp(max(until_ms - 1, since_ms) / 1000, tz=UTC).date()
    count = (last - first).days + 1
    if count > MAX_DAYS:
        raise Invalid(f"a window of {count} days is too long: ask for at most {MAX_DAYS} days at a time")
    return [(first + timedelta(days=n)).isoformat() for n in range(count)]


def _all(store: Reads, field: str, key: Any) -> Iterator[dict[str, Any]]:
    after: str | None = None
    while True:
        found = store.query(DB, field, key, 1000, after)
        yield from found.docs
        if found.next is None:
            return
        after = found.next


def by_time(store: Reads, *, status: str | None = None, platform: str | None = None, since_ms: int | None = None,
            until_ms: int | None = None, post: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Publish requests sorted by time (see the module docstring), up to ``limit``: those whose time is in
    [``since_ms``, ``until_ms``) when either is given (read day by day through the ``day`` index; a request
    written without ``day``, raw, is found by the other filters only), else of ``status``, else of
    ``post``, else every one. ``platform`` and ``status`` filter further."""
    if since_ms is not None or until_ms is not None:
        lo = since_ms if since_ms is not None else (until_ms or 0) - 31 * 86_400_000
        hi = until_ms if until_ms is not None else lo + 31 * 86_400_000
        if hi <= lo:
            raise Invalid("the window ends before it starts: give a 'to' after 'from'")
        docs = [d for day in _days(lo, hi) for d in _all(store, "day", day) if lo <= time_ms(d) < hi]
    elif status is not None:
        docs = list(_all(store, "status", status))
    elif post is not None:
        docs = list(_all(store, "post", post))
    else:
        docs = list(_all(store, "kind", KIND))
    out = [d for d in docs if d.get("kind") == KIND and (not platform or d.get("platform") == platform)
           and (not status or d.get("status") == status) and (not post or d.get("post", d.get("_id")) == post)]
    out.sort(key=sort_key)
    return out if limit is None else out[:limit]


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
