"""The overview's pause and resume forms (``ledger/pause.py``): written as the signed-in person, whom the pause
machine admits when they hold the admin role; the same functions as ``skyhub pause`` and ``/v1/pauses``."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ledger import Ledger, LedgerError
from ledger.pause import NOT_PAUSED, parse_target, pause, resume

from .web import SECURITY_HEADERS, Console


def choices(console: Console) -> dict[str, Any]:
    """What the pause form offers: the ticks that may be paused and the products' platforms."""
    return {"ticks": [t.name for t in console.app.ticks if t.name not in NOT_PAUSED], "platforms": console.app.pausable}


def _target(console: Console, fields: dict[str, str]) -> str:
    what, account = fields.get("what", "").strip(), fields.get("account", "").strip()
    text = f"{what}:{account}" if account and not what.startswith("tick:") else what
    return parse_target(text, [t.name for t in console.app.ticks], console.app.pausable)


def _back(sentence: str) -> Response:
    return RedirectResponse(f"/?done={quote(sentence, safe='')}#paused", status_code=303, headers=SECURITY_HEADERS)


async def pause_form(console: Console, request: Request) -> Response:
    """``POST /console/pause``: what (a tick or a platform), an account (for a platform) and why."""
    session = await console.session(request)
    fields = await console.form(request, session.cookie)

    def write() -> str:
        target = _target(console, fields)
        pause(Ledger(console.app.store, session.actor, console.app.clock), target, fields.get("reason") or None)
        return f"{target} paused"

    try:
        return _back(await run_in_threadpool(write))
    except LedgerError as exc:
        return console.render("error.html", request, session, title="Not paused", reason=exc.reason, status_code=exc.status)


async def resume_form(console: Console, request: Request) -> Response:
    """``POST /console/resume``: the paused target to resume."""
    session = await console.session(request)
    fields = await console.form(request, session.cookie)

    def write() -> str:
        target = fields.get("target", "")
        resume(Ledger(console.app.store, session.actor, console.app.clock), target)
        return f"{target} resumed"

    try:
        return _back(await run_in_threadpool(write))
    except LedgerError as exc:
        return console.render("error.html", request, session, title="Not resumed", reason=exc.reason, status_code=exc.status)
