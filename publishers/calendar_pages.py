"""The publishing calendar's console pages (added to ``publish_pages``): a week or a month of posts
in the signed-in person's zone (``publishers.calendar``), each post moved by picking a date and a
time (a form, without the page's script) or by dragging it to another day (console.js posts the
same form); and the form where a person chooses their time zone.

``GET /console/publish/calendar?view=week|month&start=YYYY-MM-DD``: the grid (default: this week).

``POST /console/publish/calendar/move`` (``id``, ``revs``, ``date``, ``time``, ``view``, ``start``):
the post to the new local time through ``publishers.posts.reschedule``, as the person, so the
machine decides; ``revs`` (the variants' revisions the page showed) must still be current, so a
post changed since the page was drawn is not moved blind. A refusal is a sentence on the
calendar (status 409 for a changed post, 422 for a step already taken or a bad time). With
``Accept: application/json`` (the drag), the answer is ``{"ok": ..., "sentence": ...}``.

``GET|POST /console/publish/zone``: the person's zone (an IANA name checked against zoneinfo, or
their browser's); stored on the person (``Pages.set_zone``, as ``skyhub user zone`` does)."""

from __future__ import annotations

from datetime import date
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo, available_timezones

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ledger import Conflict, LedgerError, NotFound, Pages

from .calendar import MAX_ENTRIES, fill, frame, local_at
from .errors import PostInvalid
from .posts import list_posts, reschedule, variants_of
from .validate import PLATFORMS

BADGE = {"ig": "IG", "threads": "TH", "bsky": "BS"}


def _start(text: str) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _url(view: str, start: date | str) -> str:
    return f"/console/publish/calendar?view={view}&start={start}"


def calendar_pages(pages: Pages) -> list[Route]:
    """The calendar's and the zone form's routes."""

    async def show(request: Request, session: Any, view: str, start: date | None, said: str = "", ok: bool = True,
                   status_code: int = 200) -> Response:
        zone = ZoneInfo(session.zone)
        grid = frame(view, start, zone, pages.clock.now_ms())
        posts = await pages.run(list_posts, pages.store, since_ms=grid.since_ms, until_ms=grid.until_ms, limit=MAX_ENTRIES)
        fill(grid, posts, zone)
        return pages.render(  # type: ignore[no-any-return]
            "calendar.html", request, session, title="Calendar", grid=grid, view=view, url=_url, badge=BADGE,
            platforms=PLATFORMS, said=said, said_ok=ok, status_code=status_code,
        )

    @pages.page
    async def calendar_page(request: Request) -> Response:
        """A week or a month of posts in the person's zone."""
        session = await pages.session(request)
        view = request.query_params.get("view", "week")
        start = _start(request.query_params.get("start", ""))
        if view not in ("week", "month") or (request.query_params.get("start") and start is None):
            return pages.error(request, session, 400, "the calendar is ?view=week|month&start=YYYY-MM-DD")  # type: ignore[no-any-return]
        return await show(request, session, view, start)

    @pages.page
    async def calendar_move(request: Request) -> Response:
        """Move a post to a picked (or dropped-on) local date and time, if the page's revisions are current."""
        session = await pages.session(request)
        fields = await pages.form(request, session)
        wants_json = "application/json" in request.headers.get("accept", "")
        view = fields.get("view", "week") if fields.get("view") in ("week", "month") else "week"
        start = _start(fields.get("start", ""))
        target, shown = fields.get("id", ""), fields.get("revs", "")
        status, ok = 200, True
        try:
            at = local_at(fields.get("date", ""), fields.get("time", ""), ZoneInfo(session.zone))
            db = pages.ledger(session.actor)

            def move() -> dict[str, Any]:
                current = ",".join(f"{v['_id']}@{v['_rev']}" for v in variants_of(db, target))
                if shown and current != shown:
                    raise Conflict(f"{target} changed since this page was drawn (edited, moved or started): "
                                   "reload the calendar and move it again")
                return reschedule(db, pages.settings, target, at, now_ms=db.now())

            result = await pages.run(move)
            left = [r for r in result["variants"] if str(r.get("outcome", "")).startswith("left")]
            said = f"{target} moved to {fields.get('date')} {fields.get('time')} ({session.zone})"
            if left:
                said += "; " + "; ".join(f"{r['id']} {r['outcome']}" for r in left)
        except Conflict as exc:
            said, ok, status = exc.reason, False, 409
        except NotFound as exc:
            said, ok, status = exc.reason, False, 404
        except PostInvalid as exc:
            said, ok, status = exc.reason, False, 422
        except LedgerError as exc:
            said, ok, status = exc.reason, False, exc.status
        if wants_json:
            return JSONResponse({"ok": ok, "sentence": said}, status_code=status, headers={"Cache-Control": "no-store"})
        if ok:
            return RedirectResponse(f"{_url(view, start or '')}&done={quote(said, safe='')}", status_code=303,
                                    headers={"Cache-Control": "no-store"})
        return await show(request, session, view, start, said, ok=False, status_code=status)

    zones = sorted(available_timezones())

    @pages.page
    async def zone_page(request: Request) -> Response:
        """The person's time zone: chosen, or their browser's."""
        session = await pages.session(request)
        return pages.render("zone.html", request, session, title="Time zone", zones=zones, said="")  # type: ignore[no-any-return]

    @pages.page
    async def zone_submit(request: Request) -> Response:
        """Store the person's time zone (an unknown zone is refused with a sentence; "browser": theirs again)."""
        session = await pages.session(request)
        fields = await pages.form(request, session)
        chosen = fields.get("zone", "").strip()
        try:
            await pages.run(pages.set_zone, session, None if chosen == "browser" else chosen)
        except LedgerError as exc:
            return pages.render("zone.html", request, session, title="Time zone", zones=zones,  # type: ignore[no-any-return]
                                said=exc.reason, status_code=422)
        said = "times are shown in your browser's zone" if chosen == "browser" else f"times are shown in {chosen}"
        return pages.done("/console/publish/zone", said)  # type: ignore[no-any-return]

    return [
        Route("/console/publish/calendar", calendar_page, methods=["GET"]),
        Route("/console/publish/calendar/move", calendar_move, methods=["POST"]),
        Route("/console/publish/zone", zone_page, methods=["GET"]),
        Route("/console/publish/zone", zone_submit, methods=["POST"]),
    ]


__all__ = ["calendar_pages"]
