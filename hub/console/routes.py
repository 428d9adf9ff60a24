"""The console's routes: sign-in, the views, their forms, the live stream, ``/metrics`` and
``GET /v1/overview``. Every write goes through the same paths as the API, as the signed-in
person (``store.put(..., actor="user:NAME", if_rev=...)``, ``publishers.queue``,
``vault.Vault.put``), so the machines decide what the page may do.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ledger import Clock, Ledger, LedgerError, NotFound
from ledger.store import MAX_SKIP

from ..auth import AUTH_DB, Unauthorized
from .charts import bars_svg, legend, lines_svg
from .diagram import machine_svg
from .metrics import CONTENT_TYPE
from .overview import overview
from .pausing import choices, pause_form, resume_form
from .search import search_page
from .sessions import COOKIE, PRE_COOKIE, SESSION_MS, Session, csrf_token, new_presession
from .triage import audit_page, bulk_form, bulk_page
from .web import SECURITY_HEADERS, Console, Refused, SignInNeeded, doc_url, static_file, utc_text, when

log = logging.getLogger(__name__)

PAGE_SIZE = 50
LABELS = {"key": "vault key", "needs-reauth": "needs re-auth", "held": "held", "needs-person": "needs a person", "failed": "failed", "deadletter": "dead letter",
          "lease-expired": "lease expired", "tick-late": "tick late", "tick-failed": "tick failed", "probe-failing": "probe failing"}
KEEPALIVE_S = 15.0
SESSION_CHECK_S = 5.0

Endpoint = Callable[[Console, Request], Awaitable[Response]]


def _safe_next(value: str | None) -> str:
    return value if value and value.startswith("/") and not value.startswith("//") and "\\" not in value else "/"


def page_route(fn: Endpoint) -> Endpoint:
    """Sign-in redirects and refusals for every console route."""

    @wraps(fn)
    async def wrapped(console: Console, request: Request) -> Response:
        try:
            return await fn(console, request)
        except SignInNeeded:
            if request.method != "GET":
                return Response("your session has ended: sign in again", status_code=401, headers=SECURITY_HEADERS)
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/console/sign-in?next={_quote(target)}", status_code=303, headers=SECURITY_HEADERS)
        except Refused as exc:
            return console.refused(exc)

    return wrapped


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="/")


# ---- sign-in ---------------------------------------------------------------------------------
@page_route
async def sign_in_page(console: Console, request: Request) -> Response:
    """The sign-in form (a password field), or on to the page when already signed in."""
    found = await run_in_threadpool(console.sessions.check, request.cookies.get(COOKIE))
    if found is not None:
        return RedirectResponse(_safe_next(request.query_params.get("next")), status_code=303)
    return _sign_in_form(console, request, None, 200)


def _sign_in_form(console: Console, request: Request, error: str | None, status: int) -> Response:
    pre = new_presession()
    response = console.render("signin.html", request, None, title="Sign in", csrf=csrf_token(pre), error=error,
                              next=_safe_next(request.query_params.get("next") or None), status_code=status)
    console.pre_cookie(response, request, pre)
    return response


@page_route
async def sign_in(console: Console, request: Request) -> Response:
    """Check the pasted token as the API does and open a session."""
    fields = await console.form(request, request.cookies.get(PRE_COOKIE))
    token = fields.get("token", "")
    if not token.strip():
        return _sign_in_form(console, request, "Paste your token (skh_…) to sign in.", 422)
    try:
        cookie, _session = await run_in_threadpool(console.sessions.sign_in, token)
    except Unauthorized as exc:
        await asyncio.sleep(console.failures.failed(request.client.host if request.client else ""))
        return _sign_in_form(console, request, f"Not signed in: {exc.reason}.", 401)
    response = RedirectResponse(_safe_next(fields.get("next")), status_code=303, headers=SECURITY_HEADERS)
    console.set_session_cookie(response, request, cookie, SESSION_MS // 1000)
    response.delete_cookie(PRE_COOKIE, path="/console/sign-in")
    return response


@page_route
async def sign_out(console: Console, request: Request) -> Response:
    """End this session."""
    session = await console.session(request)
    await console.form(request, session.cookie)
    await run_in_threadpool(console.sessions.sign_out, session)
    response = RedirectResponse("/console/sign-in", status_code=303, headers=SECURITY_HEADERS)
    console.clear_cookies(response, request)
    return response


# ---- overview, lists, a document ------------------------------------------------------------
@page_route
async def overview_page(console: Console, request: Request) -> Response:
    """The overview: what needs a person, counts, machines, ticks, the feed."""
    session = await console.session(request)
    data = await run_in_threadpool(overview, console.app, started_at=console.started_at)
    machines = {m.name: m for m in console.app.rules.machines}
    svgs = {row["name"]: machine_svg(machines[row["name"]], row["counts"], link=f"/console/db/{row['db']}?status={{status}}")
            for row in data["machines"]}
    return console.render("overview.html", request, session, title="Overview", o=data, svgs=svgs, labels=LABELS,
                          pausable=choices(console))


SORTS = {"newest": "Newest first", "oldest": "Oldest first", "id": "By id"}


@page_route
async def db_list(console: Console, request: Request) -> Response:
    """One page of a database's documents in one status, with the total: by when they were last written
    (newest or oldest first, ``Documents.by_time``, with a jump to page N) or by id (the status index)."""
    session = await console.session(request)
    db = request.path_params["db"]
    if db == AUTH_DB:
        return _error(console, request, session, 404, f"database {AUTH_DB!r} is not shown in the console")
    q = request.query_params
    status, after = q.get("status", ""), q.get("after") or None
    sort = q.get("sort", "newest")
    if sort not in SORTS:
        return _error(console, request, session, 400, f"sort must be one of {', '.join(SORTS)}, not {sort[:40]!r}")
    number = q.get("page", "1").strip() or "1"
    if not number.isdigit() or not 1 <= int(number) <= 10**7:
        return _error(console, request, session, 400, f"the page must be a whole number from 1, not {number[:40]!r}")
    page = int(number)
    store = console.app.store

    def read() -> tuple[Any, int]:
        total = sum(c.n for c in store.counts(db) if c.status == status)
        if sort == "id":
            return store.query(db, "status", status, PAGE_SIZE, after), total
        skip = 0 if after else (page - 1) * PAGE_SIZE  # a jump has no cursor: a bounded skip (by_time's docstring)
        return store.by_time(db, status, PAGE_SIZE, after, newest=sort == "newest", skip=skip), total

    if sort == "id" and page > 1 and not after:
        return _error(console, request, session, 400, "a jump to a page needs a list by time: sort newest or oldest first")
    if sort != "id" and not after and (page - 1) * PAGE_SIZE > MAX_SKIP:
        return _error(console, request, session, 400, f"page {page} is too far to jump to (at most page {MAX_SKIP // PAGE_SIZE + 1}): "
                      "sort the other way to start from the other end, or follow Next page")
    try:
        found, total = await run_in_threadpool(read)
    except LedgerError as exc:
        return _error(console, request, session, exc.status, exc.reason)
    base = f"/console/db/{_quote(db)}?status={_quote(status)}"
    first = (page - 1) * PAGE_SIZE + 1
    next_url = f"{base}&sort={sort}&after={_quote(found.next)}&page={page + 1}" if found.next else None
    pages = max(1, -(-total // PAGE_SIZE))
    rows = [{**d, "_written": found.written[i] if i < len(found.written) else None} for i, d in enumerate(found.docs)]
    return console.render("list.html", request, session, title=f"{db} · {status}", db=db, status=status, docs=rows,
                          next_url=next_url, total=total, first=first, last=first + len(found.docs) - 1, page=page, pages=pages,
                          sort=sort, sorts=SORTS, base=base, jump_limit=min(pages, MAX_SKIP // PAGE_SIZE + 1))


def _error(console: Console, request: Request, session: Session | None, status: int, reason: str) -> Response:
    return console.render("error.html", request, session, title="Not here", reason=reason, status_code=status)


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


BLOCK_FIELDS = ("lastError", "traceback", "error", "stderr", "log")  # shown as preformatted blocks, as written
DESTRUCTIVE = ("cancelled", "canceled", "dismissed", "deleted", "rejected")  # moves a person confirms first


def is_time_field(key: str, value: Any) -> bool:
    """``createdAt``, ``leaseUntil``, ``carouselAt``: a field named for a time whose value is epoch ms (after 2001)."""
    return (key.endswith(("At", "Until")) or key in ("at", "notBefore")) and isinstance(value, int) and not isinstance(value, bool) \
        and 1_000_000_000_000 <= value < 100_000_000_000_000


def _field(key: str, value: Any, images: Any) -> dict[str, Any]:
    """How the document page shows one field: a time (with "ago"), a block (an error, a traceback, any
    text of several lines), thumbnails (the product's, with the JSON kept beside them) or the value."""
    shown = _show(value)
    if is_time_field(key, value):
        return {"key": key, "kind": "time", "value": value, "shown": shown}
    if images:
        return {"key": key, "kind": "images", "images": images, "shown": shown}
    if isinstance(value, str) and (key in BLOCK_FIELDS or "\n" in value):
        return {"key": key, "kind": "block", "shown": shown}
    readable = _show(_readable(value))
    if readable != shown:  # times inside (an intent's "at", a hold's "since"): as times, the stored JSON beside them
        return {"key": key, "kind": "nested", "shown": readable, "stored": shown}
    return {"key": key, "kind": "text", "shown": shown}


def _readable(value: Any) -> Any:
    """``value`` with every time field inside it (at any depth) as its UTC text instead of epoch ms."""
    if isinstance(value, dict):
        return {k: utc_text(v) if is_time_field(k, v) else _readable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_readable(v) for v in value]
    return value


def _shown(key: str, value: Any) -> str:
    """A value in a revision's changes: a time as a ``<time>`` (its epoch in the title), else as text (times inside as UTC text)."""
    return when(value) if is_time_field(key, value) else _show(_readable(value))


def is_destructive(to: str, label: str) -> bool:
    """A move that ends or throws away work (cancel, dismiss, delete): asked to be confirmed, drawn as danger."""
    words = label.lower()
    return to in DESTRUCTIVE or any(w in words for w in ("cancel", "dismiss", "delete", "reject"))


@page_route
async def doc_page(console: Console, request: Request) -> Response:
    """One document: its fields (never a sealed secret) and every revision with actor, time and what changed."""
    session = await console.session(request)
    db, doc_id = request.path_params["db"], request.path_params["doc_id"]
    if db == AUTH_DB:
        return _error(console, request, session, 404, f"database {AUTH_DB!r} is not shown in the console")
    store = console.app.store
    try:
        doc = await run_in_threadpool(store.get, db, doc_id)
        history = await run_in_threadpool(store.history, db, doc_id)
    except LedgerError as exc:
        return _error(console, request, session, exc.status, exc.reason)
    hidden = console.redact.get(db, ())
    images: dict[str, Any] = {}
    for find in console.doc_images:
        found = find(db, doc)
        if found:
            images.update(found)
            break
    fields = [_field(k, v, images.get(k)) for k, v in sorted(doc.items()) if k not in hidden]
    revisions = []
    before: dict[str, Any] = {}
    for c in history:
        body = {k: v for k, v in c.doc.items() if k not in ("_rev",)}
        changed: list[tuple[str, str | None, str]] = []  # the values as text, or a <time> (Markup)
        for key in sorted(set(before) | set(body)):
            if before.get(key) == body.get(key):
                continue
            if key in hidden:
                changed.append((key, None, f"(a new {key}: never shown)"))
            else:
                changed.append((key, _shown(key, before[key]) if key in before else None, _shown(key, body[key]) if key in body else "(removed)"))
        revisions.append({"rev": c.rev, "actor": c.actor, "at": c.at, "deleted": c.deleted, "changed": changed})
        before = body
    revisions.reverse()
    held = doc.get("held") if isinstance(doc.get("held"), dict) and "held" not in hidden else None
    return console.render("doc.html", request, session, title=f"{db} / {doc_id}", db=db, doc_id=doc_id, rev=doc.get("_rev"),
                          fields=fields, hidden=[k for k in hidden if k in doc], revisions=revisions, held=held,
                          actions=[(to, label, url, is_destructive(to, label)) for to, label, url in _actions(console, db, doc, session)])


def _actions(console: Console, db: str, doc: dict[str, Any], session: Session) -> list[tuple[str, str, str]]:
    """The moves the machine lets this person make from the document's state: (to, label, form action).
    A product may name its own (a post's Retry goes through the queue's retry); else each edge is a move."""
    if db in console.private:
        return []
    machine = console.app.rules.machine_for(db, doc)
    if machine is None:
        return []
    for product_actions in console.doc_actions:
        found = product_actions(db, doc, session.actor, machine)
        if found is not None:
            return list(found)
    status = doc.get("status")
    moves = {m.dst: m.label for m in machine.moves.values() if status in m.src}  # a person edge named for what it does (Retry)
    return [(edge.dst, moves.get(edge.dst, f"Move to {edge.dst}"), "/console/move") for edge in machine.edges
            if status in edge.src and edge.dst != status and edge.allows(session.actor)]


@page_route
async def move(console: Console, request: Request) -> Response:
    """A person's move of a document to another state, as the API's PUT with if_rev would write it."""
    session = await console.session(request)
    fields = await console.form(request, session.cookie)
    db, doc_id, rev, to = (fields.get(k, "") for k in ("db", "id", "rev", "to"))
    if db == AUTH_DB or db in console.private:
        raise Refused(403, f"documents of {db!r} are not moved from here")
    if is_destructive(to, "") and fields.get("confirm") != "yes":
        return _error(console, request, session, 400, f"moving {doc_id} to {to} needs confirming: go back, tick "
                      "the \u201cYes\u201d box next to the button, then press it again")

    def write() -> str:
        doc = console.app.store.get(db, doc_id)
        machine = console.app.rules.machine_for(db, doc)
        named = next((m for m in machine.moves.values() if doc.get("status") in m.src and m.dst == to), None) if machine else None
        if named is not None:  # a retry: the move's body (attempts reset, counted), as a bulk retry writes it
            body = named.body(doc, console.app.clock.now_ms())
        else:
            body = {k: v for k, v in doc.items() if not k.startswith("_")}
            body["status"] = to
        console.app.store.put(db, body, doc_id, actor=session.actor, if_rev=rev)
        return f"{doc_id} moved to {to}"

    try:
        done = await run_in_threadpool(write)
    except LedgerError as exc:
        return _error(console, request, session, exc.status, exc.reason)
    return RedirectResponse(f"{doc_url(db, doc_id)}?done={_quote(done)}", status_code=303, headers=SECURITY_HEADERS)


# ---- activity (charts) ----------------------------------------------------------------------
@page_route
async def activity_page(console: Console, request: Request) -> Response:
    """Done and failed per minute, and queue depth, over the last hour."""
    session = await console.session(request)
    await run_in_threadpool(console.activity.advance, 3)
    series = console.activity.series()
    minutes = series["minutes"]
    bars = [(name, sum(values), sum(series["failed"].get(name, ())),
             bars_svg(f"fin-{i}", f"{name}: done and failed per minute", minutes, values, series["failed"].get(name)))
            for i, (name, values) in enumerate(sorted(series["done"].items()))]
    names = sorted({n for _, d in series["depth"] for n in d})
    depth = lines_svg("depth", "Queue depth per machine", series["depth"], (minutes[0], minutes[-1] + 60_000))
    return console.render("activity.html", request, session, title="Activity", bars=bars, depth=depth, legend=legend(names),
                          since=series["since"])


# ---- live -----------------------------------------------------------------------------------


class _ConsoleStream(Response):
    """The page's event stream: the console's fan-out (one reader of the change log for
    every open tab, ``hub/stream.py``), ended when the session is."""

    media_type = "text/event-stream"

    def __init__(self, console: Console, session: Session, since: int) -> None:
        self.console = console
        self.session = session
        self.since = since
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        ended = asyncio.Event()
        console, cookie = self.console, self.session.cookie

        async def watch_session() -> None:  # a revoked token or a sign-out ends the stream
            while not ended.is_set():
                try:
                    await asyncio.wait_for(ended.wait(), timeout=SESSION_CHECK_S)
                except TimeoutError:
                    if await run_in_threadpool(console.sessions.check, cookie) is None:
                        ended.set()

        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        watcher = asyncio.ensure_future(watch_session())
        try:
            await console.fanout.serve(self.since, receive, send, until=ended, farewell=b"event: signed-out\ndata: {}\n\n")
        finally:
            ended.set()
            await watcher


@page_route
async def events(console: Console, request: Request) -> Response:
    """Server-sent events for the page: one small event per change (database, id, status:
    never a document body, so nothing sealed can travel), resumed from ``Last-Event-ID``.
    Without a live session: 401 (an EventSource stops on it; the page then goes to sign-in)."""
    try:
        session = await console.session(request)
    except SignInNeeded:
        return Response("your session has ended: sign in again", status_code=401, headers=SECURITY_HEADERS)
    last = request.headers.get("last-event-id", "")
    since = request.query_params.get("since", "")
    start = int(last) if last.isdigit() and len(last) < 19 else int(since) if since.isdigit() and len(since) < 19 else None
    if start is None:
        start = await run_in_threadpool(console.app.store.head_seq)
    return _ConsoleStream(console, session, start)


# ---- static, metrics, the overview as JSON ---------------------------------------------------
async def static(console: Console, request: Request) -> Response:
    """A file shipped in ``hub/console/static``."""
    found = static_file(request.path_params["path"])
    if found is None:
        return Response("not found", status_code=404)
    data, kind = found
    return Response(data, media_type=kind, headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"})


async def metrics(console: Console, request: Request) -> Response:
    """``GET /metrics``: to a person's token (or loopback, when the operator allows it)."""
    if not await run_in_threadpool(console.metrics_allowed, request):
        return Response("metrics need a person's token (Authorization: Bearer skh_...): give Prometheus one "
                        "(authorization: {credentials_file: ...} in its scrape config)\n",
                        status_code=401, headers={"WWW-Authenticate": 'Bearer realm="skyhub"', **SECURITY_HEADERS})
    console.activity.start(console.app.stopping)
    data = await run_in_threadpool(console.metrics.scrape)
    return Response(data, media_type=CONTENT_TYPE, headers={"Cache-Control": "no-store"})


async def overview_json(console: Console, request: Request) -> Response:
    """``GET /v1/overview``: the overview as JSON, to any credential the API accepts."""
    try:
        await run_in_threadpool(console.sessions.authenticator.authenticate, request.headers.get("authorization"), "GET",
                                request.url.path + (f"?{request.url.query}" if request.url.query else ""), b"",
                                console.app.clock.now_ms())
    except LedgerError as exc:
        return JSONResponse({"error": exc.code, "reason": exc.reason}, status_code=exc.status)
    data = await run_in_threadpool(overview, console.app, started_at=console.started_at)
    return JSONResponse(data, headers={"Cache-Control": "no-store"})


def console_app(console: Console) -> Starlette:
    """The console as an ASGI app (``hub/console/__init__.py`` puts it in front of the API)."""

    def bind(fn: Endpoint) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await fn(console, request)

        return endpoint

    routes: list[Any] = [
        Route("/", bind(overview_page), methods=["GET"]),
        Route("/console/sign-in", bind(sign_in_page), methods=["GET"]),
        Route("/console/sign-in", bind(sign_in), methods=["POST"]),
        Route("/console/sign-out", bind(sign_out), methods=["POST"]),
        Route("/console/db/{db}", bind(db_list), methods=["GET"]),
        Route("/console/doc/{db}/{doc_id:path}", bind(doc_page), methods=["GET"]),
        Route("/console/move", bind(move), methods=["POST"]),
        Route("/console/activity", bind(activity_page), methods=["GET"]),
        Route("/console/search", bind(page_route(search_page)), methods=["GET"]),
        Route("/console/pause", bind(page_route(pause_form)), methods=["POST"]),
        Route("/console/resume", bind(page_route(resume_form)), methods=["POST"]),
        Route("/console/bulk", bind(page_route(bulk_page)), methods=["GET"]),
        Route("/console/bulk", bind(page_route(bulk_form)), methods=["POST"]),
        Route("/console/audit", bind(page_route(audit_page)), methods=["GET"]),
        Route("/console/events", bind(events), methods=["GET"]),
        Route("/console/static/{path:path}", bind(static), methods=["GET"]),
        Route("/metrics", bind(metrics), methods=["GET"]),
        Route("/v1/overview", bind(overview_json), methods=["GET"]),
    ]
    pages = _Pages(console)
    for product in console.app.products:  # each product's own pages, in the same frame
        routes += product.console_routes(pages)
    return Starlette(routes=routes)


class _Pages:
    """What the console hands a product's pages (``ledger.Pages``)."""

    def __init__(self, console: Console) -> None:
        self._console = console

    @property
    def store(self) -> Any:
        """The hub's store."""
        return self._console.app.store

    @property
    def settings(self) -> Any:
        """The hub's settings."""
        return self._console.app.settings

    @property
    def clock(self) -> Clock:
        """The hub's one clock."""
        return self._console.app.clock

    def ledger(self, actor: str) -> Ledger:
        """The hub's store bound to ``actor``, on the hub's clock."""
        return Ledger(self._console.app.store, actor, self._console.app.clock)

    def page(self, fn: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """The console's sign-in redirects and refusals around a product's handler."""
        wrapped = page_route(lambda console, request: fn(request))

        async def endpoint(request: Request) -> Response:
            return await wrapped(self._console, request)

        endpoint.__doc__ = fn.__doc__
        return endpoint

    async def session(self, request: Request) -> Session:
        """The signed-in person's session."""
        return await self._console.session(request)

    async def form(self, request: Request, session: Session) -> dict[str, str]:
        """The POSTed form, its CSRF value and origin checked."""
        return await self._console.form(request, session.cookie)

    def render(self, template: str, request: Request, session: Session, *, status_code: int = 200, **values: Any) -> Response:
        """A page from a template."""
        return self._console.render(template, request, session, status_code=status_code, **values)

    def error(self, request: Request, session: Session, status: int, reason: str) -> Response:
        """The error page."""
        return _error(self._console, request, session, status, reason)

    def done(self, url: str, sentence: str) -> Response:
        """Back to ``url``, which shows ``sentence``."""
        return RedirectResponse(f"{url}?done={_quote(sentence)}", status_code=303, headers=SECURITY_HEADERS)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """``fn`` off the event loop."""
        return run_in_threadpool(fn, *args, **kwargs)

    def context(self, product: str, actor: str) -> Any:
        """A backend context."""
        return self._console.app.context(product, actor)

    def machine_for(self, db: str, doc: dict[str, Any]) -> Any:
        """The machine that governs ``doc`` in ``db``."""
        return self._console.app.rules.machine_for(db, doc)

    def set_zone(self, session: Session, zone: str | None) -> None:
        """Store the person's time zone on their document in the auth database."""
        from ..auth import set_zone

        set_zone(self._console.app.store, session.name, zone, clock=self._console.app.clock)


__all__ = ["console_app", "NotFound"]
