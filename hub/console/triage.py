"""The console's bulk actions and audit view (``ledger/bulk.py``): the confirm page that shows, before
anything is written, how many documents a filter selects and a sample of them (a dry run); the
confirm POST that acts only on the set the person saw (its digest re-checked by the server); the
result (done, refused with the reason, the audit record); and the audit records, newest first.
The same function as ``skyhub db bulk`` and ``POST /v1/db/{db}/bulk``, as the signed-in person."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ledger import Ledger, LedgerError
from ledger.bulk import AUDIT, AUDIT_KIND, Filter, Outcome, bulk

from ..auth import AUTH_DB
from .web import Console, Refused

SAMPLE = 10  # documents shown on the confirm page
AUDIT_PAGE = 20  # audit records a page
FILTER = ("status", "kind", "field", "key", "error")
PAST = {"retry": "retried", "cancel": "cancelled", "dismiss": "dismissed"}


def _filter(values: Any) -> Filter:
    """The filter a query string or a form carries (checked again here: trust nothing a client sent)."""
    return Filter(**{k: (values.get(k) or None) for k in FILTER})


def _run(console: Console, actor: str, db: str, verb: str, flt: Filter, *, dry_run: bool, expect: str | None = None) -> Outcome:
    if db == AUTH_DB or db in console.private:
        raise Refused(403, f"documents of {db!r} are not moved from here")
    return bulk(Ledger(console.app.store, actor, console.app.clock), console.app.rules, db, verb, flt, dry_run=dry_run,
                sample=SAMPLE, expect=expect)


def _page(console: Console, request: Request, session: Any, out: Outcome, *, status_code: int = 200) -> Response:
    label = out.verb.capitalize()
    return console.render("bulk.html", request, session, title=f"{label}: {out.db}", out=out, label=label,
                          past=PAST.get(out.verb, out.verb), flt=out.filter.as_dict(), status_code=status_code)


async def bulk_page(console: Console, request: Request) -> Response:
    """``GET /console/bulk?db=DB&action=VERB&status=...``: how many documents the action would move and a
    sample of them, with the warnings (a publish that may have gone out), and the form that confirms it."""
    session = await console.session(request)
    q = request.query_params
    try:
        out = await run_in_threadpool(lambda: _run(console, session.actor, q.get("db", ""), q.get("action", ""), _filter(q),
                                                   dry_run=True))
    except LedgerError as exc:
        return console.render("error.html", request, session, title="No bulk action", reason=exc.reason, status_code=exc.status)
    return _page(console, request, session, out)


async def bulk_form(console: Console, request: Request) -> Response:
    """``POST /console/bulk``: the confirmed action, on the set the page showed (its digest); a set that
    changed meanwhile is shown again with its new count instead of being acted on."""
    session = await console.session(request)
    fields = await console.form(request, session.cookie)
    try:
        out = await run_in_threadpool(lambda: _run(console, session.actor, fields.get("db", ""), fields.get("action", ""),
                                                   _filter(fields), dry_run=False, expect=fields.get("digest") or "-"))
    except LedgerError as exc:
        return console.render("error.html", request, session, title="Not done", reason=exc.reason, status_code=exc.status)
    return _page(console, request, session, out, status_code=409 if out.changed else 200)


async def audit_page(console: Console, request: Request) -> Response:
    """``GET /console/audit[?after=ID]``: the bulk actions people made, newest first, a page at a time."""
    session = await console.session(request)
    after = request.query_params.get("after") or None
    try:
        found = await run_in_threadpool(console.app.store.query, AUDIT, "status", "recorded", AUDIT_PAGE, after)
        records = [d for d in found.docs if d.get("kind") == AUDIT_KIND]
        more = found.next
    except LedgerError:
        records, more = [], None  # no bulk action made yet: the database does not exist
    next_url = "/console/audit?" + urlencode({"after": more}) if more else None
    return console.render("audit.html", request, session, title="Audit", records=records, next_url=next_url, first=after is None)
