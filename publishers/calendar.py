"""The publishing calendar: a week or a month of posts in a person's time zone, computed on the
server (``zoneinfo``), so the grid is right without the page's script.

A week starts on Monday. A month's grid is whole weeks, Monday before its 1st to Sunday after its
last day (days outside the month are marked ``outside``). Each day is the span from its local
midnight to the next one, so the week a zone changes its clocks has a 23- or a 25-hour day, and a
post is on the local date of its time. A post is one entry however many networks it goes to (its
variants grouped, ``publishers.posts.post_view``), at its earliest variant's time.

``local_at`` turns a date and a wall-clock time a person picked into an ISO 8601 time with the
offset of their zone on that date; a time the clocks skip (the spring change) or pass twice (the
autumn one) is refused with a sentence, instead of being guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from .errors import PostInvalid
from .validate import parse_at

VIEWS = ("week", "month")
MAX_ENTRIES = 1000  # posts read for one view; a month of a busy shop is a few hundred


@dataclass
class Day:
    """One day of the grid: its local date, its span in epoch ms, and the entries on it."""

    date: date
    start_ms: int
    end_ms: int
    outside: bool = False  # a day of the month grid's first or last week outside the month
    today: bool = False
    entries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hours(self) -> float:
        """The day's length in hours (23 or 25 on the day the clocks change)."""
        return (self.end_ms - self.start_ms) / 3_600_000


@dataclass
class Grid:
    """A week or a month in ``zone``: its days (weeks of seven for a month), and where prev, next and today lead."""

    view: str
    zone: str
    start: date
    days: list[Day]
    prev: date
    next: date
    today: date

    @property
    def since_ms(self) -> int:
        """Where the grid starts (its first day's local midnight), epoch ms."""
        return self.days[0].start_ms

    @property
    def until_ms(self) -> int:
        """Where the grid ends (the local midnight after its last day), epoch ms."""
        return self.days[-1].end_ms

    @property
    def weeks(self) -> list[list[Day]]:
        """The days seven at a time."""
        return [self.days[i:i + 7] for i in range(0, len(self.days), 7)]

    @property
    def title(self) -> str:
        """The page's heading: "March 2026", or a week's first and last dates."""
        if self.view == "month":
            return self.start.strftime("%B %Y")
        last = self.days[-1].date
        return f"{self.start.isoformat()} to {last.isoformat()}"


def midnight_ms(day: date, zone: ZoneInfo) -> int:
    """Epoch ms of the local midnight that starts ``day`` in ``zone``."""
    return int(datetime.combine(day, time(0), tzinfo=zone).timestamp() * 1000)


def local_date(ms: int, zone: ZoneInfo) -> date:
    """The date in ``zone`` of the epoch ms ``ms``."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(zone).date()


def _add_months(day: date, n: int) -> date:
    month = day.month - 1 + n
    return date(day.year + month // 12, month % 12 + 1, 1)


def frame(view: str, start: date | None, zone: ZoneInfo, now_ms: int) -> Grid:
    """The empty grid of ``view`` ("week" or "month") around ``start`` (default: today in ``zone``)."""
    if view not in VIEWS:
        raise PostInvalid(f"the calendar's view is week or month, not {view[:20]!r}")
    today = local_date(now_ms, zone)
    anchor = start or today
    if view == "week":
        first = anchor - timedelta(days=anchor.weekday())
        count = 7
        prev, nxt = first - timedelta(days=7), first + timedelta(days=7)
        month_of: date | None = None
    else:
        month_of = anchor.replace(day=1)
        first = month_of - timedelta(days=month_of.weekday())
        end = _add_months(month_of, 1)
        last = end - timedelta(days=1)
        count = (last - first).days + 1 + (6 - last.weekday())
        prev, nxt = _add_months(month_of, -1), end
    days = []
    for n in range(count):
        d = first + timedelta(days=n)
        days.append(Day(d, midnight_ms(d, zone), midnight_ms(d + timedelta(days=1), zone),
                        outside=month_of is not None and d.month != month_of.month, today=d == today))
    return Grid(view, zone.key, month_of or first, days, prev, nxt, today)


def entry(post: dict[str, Any], zone: ZoneInfo) -> dict[str, Any]:
    """A post (``post_view``) as the calendar shows it: its time in ``zone`` (``local``: ``HH:MM``;
    ``date``, ``clock`` for the pick form), its networks, status, caption excerpt, and the revisions
    it was shown at (``revs``: ``ID@REV`` of every variant, so a move of a changed post is refused)."""
    at_ms = parse_at(post.get("time")) or 0
    local = datetime.fromtimestamp(at_ms / 1000, tz=UTC).astimezone(zone)
    variants = post.get("variants") or []
    return {
        "id": post["id"], "status": post["status"], "caption": post.get("caption") or "", "time": post.get("time"),
        "ms": at_ms, "local": local.strftime("%H:%M"), "date": local.date().isoformat(), "clock": local.strftime("%H:%M"),
        "networks": [{"platform": str(v.get("platform")), "account": str(v.get("account") or ""),
                      "status": str(v.get("status"))} for v in variants],
        "revs": ",".join(f"{v['_id']}@{v['_rev']}" for v in variants if v.get("_id") and v.get("_rev")),
        "published": bool(post.get("published")),
        "first": str(variants[0].get("_id")) if variants else str(post["id"]),
    }


def fill(grid: Grid, posts: Sequence[dict[str, Any]], zone: ZoneInfo) -> Grid:
    """Put each post on its local day of ``grid`` (by time, then id); posts outside the grid are left out."""
    by_day = {d.date: d for d in grid.days}
    for post in sorted(posts, key=lambda p: (parse_at(p.get("time")) or 0, str(p.get("id")))):
        e = entry(post, zone)
        if not e["ms"]:
            continue
        day = by_day.get(local_date(e["ms"], zone))
        if day is not None and day.start_ms <= e["ms"] < day.end_ms:
            day.entries.append(e)
    return grid


def local_at(day_text: str, clock_text: str, zone: ZoneInfo) -> str:
    """The ISO 8601 time (with the offset ``zone`` has then) of the wall-clock ``clock_text`` (HH:MM) on
    ``day_text`` (YYYY-MM-DD) in ``zone``; ``PostInvalid`` for a bad date or time, or one the clocks skip or repeat."""
    try:
        day = date.fromisoformat(day_text.strip())
        clock = time.fromisoformat(clock_text.strip())
    except ValueError:
        raise PostInvalid(f"give the new time as a date (YYYY-MM-DD) and a time (HH:MM), not {day_text[:20]!r} "
                          f"{clock_text[:20]!r}") from None
    naive = datetime.combine(day, clock.replace(second=0, microsecond=0, tzinfo=None))
    early, late = naive.replace(tzinfo=zone, fold=0), naive.replace(tzinfo=zone, fold=1)
    back = early.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    if back != naive:
        raise PostInvalid(f"{day.isoformat()} {clock.strftime('%H:%M')} does not exist in {zone.key} (the clocks skip it): "
                          "pick another time")
    if early.utcoffset() != late.utcoffset():
        raise PostInvalid(f"{day.isoformat()} {clock.strftime('%H:%M')} happens twice in {zone.key} (the clocks go back): "
                          "pick a time outside that hour")
    return early.isoformat()


__all__ = ["MAX_ENTRIES", "VIEWS", "Day", "Grid", "entry", "fill", "frame", "local_at", "local_date", "midnight_ms"]
