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

from ledger import Conflict, Forbidden, Ledger, LedgerError, NotFound
from publishers.admission import Admission
from publishers.errors import PostInvalid
from publishers.listing import next_step, page
from publishers.machine import DB as REQUESTS
from publishers.machine import KIND as PUBLISH_KIND
from publishers.queue import cancel, new_request, queue, resolve, retry
from publishers.validate import PLATFORMS, problems
from vault import DB as VAULT_DB
from vault import Vault
from vault.credentials import PLATFORMS as CRED_PLATFORMS
from vault.errors import VaultError

from ..auth import AUTH_DB, Unauthorized
from .charts import bars_svg, legend, lines_svg
from .diagram import machine_svg
from .forms import PublishForm, field_for
from .metrics import CONTENT_TYPE
from .overview import overview
from .sessions import COOKIE, PRE_COOKIE, SESSION_MS, Session, csrf_token, new_presession
from .web import SECURITY_HEADERS, Console, Refused, SignInNeeded, doc_url, static_file

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
    return console.render("overview.html", request, session, title="Overview", o=data, svgs=svgs, labels=LABELS)


@page_route
async def db_list(console: Console, request: Request) -> Response:
    """One page of a database's documents in one status (through the status index)."""
    session = await console.session(request)
    db = request.path_params["db"]
    if db == AUTH_DB:
        return _error(console, request, session, 404, f"database {AUTH_DB!r} is not shown in the console")
    status = request.query_params.get("status", "")
    after = request.query_params.get("after") or None
    try:
        found = await run_in_threadpool(console.app.store.query, db, "status", status, PAGE_SIZE, after)
    except LedgerError as exc:
        return _error(console, request, session, exc.status, exc.reason)
    next_url = f"/console/db/{db}?status={_quote(status)}&after={_quote(found.next)}" if found.next else None
    return console.render("list.html", request, session, title=f"{db} · {status}", db=db, status=status, docs=found.docs,
                          next_url=next_url)


def _error(console: Console, request: Request, session: Session | None, status: int, reason: str) -> Response:
    return console.render("error.html", request, session, title="Not here", reason=reason, status_code=status)


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


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
    fields = [(k, _show(v)) for k, v in sorted(doc.items()) if k != "sealed"]
    revisions = []
    before: dict[str, Any] = {}
    for c in history:
        body = {k: v for k, v in c.doc.items() if k not in ("_rev",)}
        changed: list[tuple[str, str | None, str]] = []
        for key in sorted(set(before) | set(body)):
            if before.get(key) == body.get(key):
                continue
            if key == "sealed":
                changed.append(("sealed", None, "(a new sealed secret: never shown)"))
            else:
                changed.append((key, _show(before[key]) if key in before else None, _show(body.get(key)) if key in body else "(removed)"))
        revisions.append({"rev": c.rev, "actor": c.actor, "at": c.at, "deleted": c.deleted, "changed": changed})
        before = body
    revisions.reverse()
    return console.render("doc.html", request, session, title=f"{db} / {doc_id}", db=db, doc_id=doc_id, rev=doc.get("_rev"),
                          fields=fields, sealed="sealed" in doc, revisions=revisions, actions=_actions(console, db, doc, session))


def _actions(console: Console, db: str, doc: dict[str, Any], session: Session) -> list[tuple[str, str, str]]:
    """The moves the machine lets this person make from the document's state: (to, label, form action)."""
    if db == VAULT_DB:
        return []
    machine = console.app.rules.machine_for(db, doc)
    if machine is None:
        return []
    status = doc.get("status")
    out = []
    for edge in machine.edges:
        if status in edge.src and edge.dst != status and edge.allows(session.actor):
            if db == REQUESTS and doc.get("kind") == PUBLISH_KIND:
                verb = {"pending": "retry", "cancelled": "cancel"}.get(edge.dst)
                if verb:
                    out.append((edge.dst, verb.capitalize(), f"/console/publish/{verb}"))
                elif status == "needs-person" and edge.dst == "done":  # one choice per candidate media
                    for c in doc.get("candidates") or []:
                        if isinstance(c, dict) and c.get("mediaId"):
                            label = f"It became {c['mediaId']}" + (f" ({c['timestamp']})" if c.get("timestamp") else "")
                            out.append((str(c["mediaId"]), label, "/console/publish/resolve"))
            else:
                out.append((edge.dst, f"Move to {edge.dst}", "/console/move"))
    return out


@page_route
async def move(console: Console, request: Request) -> Response:
    """A person's move of a document to another state, as the API's PUT with if_rev would write it."""
    session = await console.session(request)
    fields = await console.form(request, session.cookie)
    db, doc_id, rev, to = (fields.get(k, "") for k in ("db", "id", "rev", "to"))
    if db in (AUTH_DB, VAULT_DB):
        raise Refused(403, f"documents of {db!r} are not moved from here")

    def write() -> str:
        doc = console.app.store.get(db, doc_id)
        body = {k: v for k, v in doc.items() if not k.startswith("_")}
        body["status"] = to
        console.app.store.put(db, body, doc_id, actor=session.actor, if_rev=rev)
        return f"{doc_id} moved to {to}"

    try:
        done = await run_in_threadpool(write)
    except LedgerError as exc:
        return _error(console, request, session, exc.status, exc.reason)
    return RedirectResponse(f"{doc_url(db, doc_id)}?done={_quote(done)}", status_code=303, headers=SECURITY_HEADERS)


# ---- publishing -----------------------------------------------------------------------------
def _publish_counts(console: Console) -> dict[str, int]:
    return {c.status: c.n for c in console.app.store.counts(REQUESTS) if c.kind == PUBLISH_KIND}


async def _publish_view(console: Console, request: Request, session: Session, form: PublishForm, errors: dict[str, list[str]],
                        status_code: int = 200) -> Response:
    status = request.query_params.get("status", "")
    platform = request.query_params.get("platform", "")
    after = request.query_params.get("after") or None
    if platform not in PLATFORMS:
        platform = ""
    machine = console.app.rules.machine_for(REQUESTS, {"kind": PUBLISH_KIND})

    def read() -> tuple[list[dict[str, Any]], str | None, dict[str, int]]:
        found = page(console.app.store, platform=platform or None, status=status or None, limit=PAGE_SIZE, after=after)
        return found.docs, found.next, _publish_counts(console)

    docs, nxt, counts = await run_in_threadpool(read)
    rows = []
    for d in docs:
        actions = []
        if machine is not None:
            for edge in machine.edges:
                if d.get("status") in edge.src and edge.dst != d.get("status") and edge.allows(session.actor):
                    verb = {"pending": "retry", "cancelled": "cancel"}.get(edge.dst)
                    if verb:
                        actions.append((verb, verb.capitalize()))
        rows.append({**d, "nextStep": next_step(d), "actions": actions})
    query = "&".join(f"{k}={_quote(v)}" for k, v in (("status", status), ("platform", platform)) if v)
    next_url = f"/console/publish?{query}{'&' if query else ''}after={_quote(nxt)}" if nxt else None
    section = console.app.settings.section("publish")
    return console.render(
        "publish.html", request, session, title="Publishing", form=form, errors=errors, anchors=form.anchors(errors),
        platforms=PLATFORMS, defaults=dict(section.accounts), statuses=list(machine.states) if machine else [],
        status=status, platform=platform, docs=rows, counts=counts, next_url=next_url, image_rows=20,
        shown_rows=max(4, len(form.images)), status_code=status_code,
    )


@page_route
async def publish_page(console: Console, request: Request) -> Response:
    """The publishing form and the queue."""
    session = await console.session(request)
    return await _publish_view(console, request, session, PublishForm.empty(), {})


@page_route
async def publish_submit(console: Console, request: Request) -> Response:
    """Queue a post as the signed-in person; on a mistake, each sentence next to its field and nothing written."""
    session = await console.session(request)
    fields = await console.form(request, session.cookie)
    form = PublishForm.read(fields)
    section = console.app.settings.section("publish")
    now = console.app.store.clock.now_ms()
    errors = form.errors(now)
    account = form.account or section.accounts.get(form.platform, "")
    if form.platform in PLATFORMS and not account:
        errors.setdefault("account", []).append(f"no account: give one, or set publish.accounts.{form.platform} on the hub")
    admission = Admission.from_settings(console.app.settings)
    body = new_request(form.platform, account=account, slug=form.slug, caption=form.caption, images=form.images,
                       at=form.at_iso, reply_to=form.reply_to or None, now_ms=now)
    if "platform" not in errors:
        for sentence in problems(body, now_ms=now, admission=admission):
            if not (sentence.startswith("account") and "account" in errors):
                errors.setdefault(field_for(sentence), []).append(sentence)
    if errors:
        return await _publish_view(console, request, session, form, errors, 422)
    try:
        doc, queued = await run_in_threadpool(queue, Ledger(console.app.store, session.actor), body, admission=admission)
    except PostInvalid as exc:
        for sentence in exc.reason.split("; "):
            errors.setdefault(field_for(sentence), []).append(sentence)
        return await _publish_view(console, request, session, form, errors, 422)
    except Conflict as exc:
        errors.setdefault("slug", []).append(exc.reason)
        return await _publish_view(console, request, session, form, errors, 409)
    except Forbidden as exc:
        errors.setdefault("platform", []).append(exc.reason)
        return await _publish_view(console, request, session, form, errors, 403)
    done = f"{doc['_id']} queued ({doc['status']})" if queued else f"{doc['_id']} was already queued with the same content; nothing new was written"
    return RedirectResponse(f"/console/publish?done={_quote(done)}", status_code=303, headers=SECURITY_HEADERS)


def _publish_move(verb: str) -> Endpoint:
    move_fn = retry if verb == "retry" else cancel

    @page_route
    async def act(console: Console, request: Request) -> Response:
        session = await console.session(request)
        fields = await console.form(request, session.cookie)
        doc_id = fields.get("id", "")
        try:
            await run_in_threadpool(move_fn, Ledger(console.app.store, session.actor), doc_id)
        except LedgerError as exc:
            return _error(console, request, session, exc.status, exc.reason)
        done = f"{doc_id}: {'back in the queue' if verb == 'retry' else 'cancelled'}"
        return RedirectResponse(f"/console/publish?done={_quote(done)}", status_code=303, headers=SECURITY_HEADERS)

    return act


@page_route
async def publish_resolve(console: Console, request: Request) -> Response:
    """A person says which candidate media a post that needs a person became."""
    session = await console.session(request)
    fields = await console.form(request, session.cookie)
    doc_id, media_id = fields.get("id", ""), fields.get("to", "")
    try:
        await run_in_threadpool(resolve, Ledger(console.app.store, session.actor), doc_id, media_id)
    except LedgerError as exc:
        return _error(console, request, session, exc.status, exc.reason)
    done = f"{doc_id}: recorded as media {media_id}"
    return RedirectResponse(f"/console/publish?done={_quote(done)}", status_code=303, headers=SECURITY_HEADERS)


# ---- mention builds -------------------------------------------------------------------------
@page_route
async def mentions_page(console: Console, request: Request) -> Response:
    """Mention builds by status."""
    session = await console.session(request)
    machine = console.app.rules.machine_for(REQUESTS, {"kind": "mention"})
    states = list(machine.states) if machine else []

    def read() -> tuple[dict[str, int], list[dict[str, Any]], str | None, str]:
        counts = {c.status: c.n for c in console.app.store.counts(REQUESTS) if c.kind == "mention"}
        status = request.query_params.get("status") or next((s for s in states if counts.get(s)), states[0] if states else "")
        found = console.app.store.query(REQUESTS, "status", status, PAGE_SIZE, request.query_params.get("after") or None)
        return counts, [d for d in found.docs if d.get("kind") == "mention"], found.next, status

    counts, docs, nxt, status = await run_in_threadpool(read)
    next_url = f"/console/mentions?status={_quote(status)}&after={_quote(nxt)}" if nxt else None
    return console.render("mentions.html", request, session, title="Mention builds", statuses=states, status=status, counts=counts,
                          docs=docs, next_url=next_url)


# ---- credentials ----------------------------------------------------------------------------
async def _credentials_view(console: Console, request: Request, session: Session, form: dict[str, Any],
                            errors: dict[str, list[str]], status_code: int = 200) -> Response:
    creds = await run_in_threadpool(lambda: Vault(Ledger(console.app.store, session.actor), console.vault_key).list())
    creds.sort(key=lambda c: (not (c.get("needsReauth") or c.get("status") == "needs-reauth"), c["id"]))
    return console.render("credentials.html", request, session, title="Credentials", creds=creds, form=form, errors=errors,
                          cred_platforms=list(CRED_PLATFORMS), key_problem=console.app.vault_key_problem(), status_code=status_code)


@page_route
async def credentials_page(console: Console, request: Request) -> Response:
    """Credentials and the paste form."""
    session = await console.session(request)
    return await _credentials_view(console, request, session, {"platform": "instagram", "account": "", "verify": False}, {})


@page_route
async def credentials_paste(console: Console, request: Request) -> Response:
    """Store a new secret through ``Vault.put`` as the signed-in person; it is never shown again."""
    session = await console.session(request)
    fields = await console.form(request, session.cookie)
    platform, account = fields.get("platform", ""), fields.get("account", "").strip()
    secret = fields.pop("secret", "")
    form = {"platform": platform, "account": account, "verify": bool(fields.get("verify"))}  # never the secret
    errors: dict[str, list[str]] = {}
    if platform not in CRED_PLATFORMS:
        errors["cred-platform"] = [f"platform must be one of {', '.join(CRED_PLATFORMS)}"]
    if not account:
        errors["cred-account"] = ["give the account this secret is for"]
    if not secret.strip():
        errors["secret"] = ["paste the secret"]
    problem = console.app.vault_key_problem()
    if problem and not errors:
        errors["secret"] = [f"the hub has no vault master key, so it cannot seal this secret: {problem}"]
    if errors:
        return await _credentials_view(console, request, session, form, errors, 422)

    def store_it() -> dict[str, Any]:
        meta = Vault(Ledger(console.app.store, session.actor), console.vault_key).put(platform, account, secret)
        if form["verify"]:
            from vault.rotation import verify

            meta = verify(console.app.context("vault", "tick:vault"), meta["id"])
        return meta

    try:
        meta = await run_in_threadpool(store_it)
    except VaultError as exc:
        where = "cred-account" if "account" in exc.reason.split(" ", 2)[:2] else "secret"
        return await _credentials_view(console, request, session, form, {where: [exc.reason]}, 422)
    except LedgerError as exc:
        return await _credentials_view(console, request, session, form, {"secret": [exc.reason]}, exc.status)
    finally:
        secret = ""
    done = f"{meta['id']}: version {meta.get('version')} stored ({meta.get('status')})"
    return RedirectResponse(f"/console/credentials?done={_quote(done)}", status_code=303, headers=SECURITY_HEADERS)


# ---- activity (charts) ----------------------------------------------------------------------
@page_route
async def activity_page(console: Console, request: Request) -> Response:
    """Finished per minute and queue depth over the last hour."""
    session = await console.session(request)
    await run_in_threadpool(console.activity.advance, 3)
    series = console.activity.series()
    minutes = series["minutes"]
    bars = [(name, bars_svg(f"fin-{i}", f"{name}: finished per minute", minutes, values))
            for i, (name, values) in enumerate(sorted(series["finished"].items()))]
    names = sorted({n for _, d in series["depth"] for n in d})
    depth = lines_svg("depth", "Queue depth per machine", series["depth"], (minutes[0], minutes[-1] + 60_000))
    return console.render("activity.html", request, session, title="Activity", bars=bars, depth=depth, legend=legend(names),
                          since=max(series["since"], minutes[0]))


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
                                console.app.store.clock.now_ms())
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

    routes = [
        Route("/", bind(overview_page), methods=["GET"]),
        Route("/console/sign-in", bind(sign_in_page), methods=["GET"]),
        Route("/console/sign-in", bind(sign_in), methods=["POST"]),
        Route("/console/sign-out", bind(sign_out), methods=["POST"]),
        Route("/console/db/{db}", bind(db_list), methods=["GET"]),
        Route("/console/doc/{db}/{doc_id:path}", bind(doc_page), methods=["GET"]),
        Route("/console/move", bind(move), methods=["POST"]),
        Route("/console/publish", bind(publish_page), methods=["GET"]),
        Route("/console/publish", bind(publish_submit), methods=["POST"]),
        Route("/console/publish/retry", bind(_publish_move("retry")), methods=["POST"]),
        Route("/console/publish/cancel", bind(_publish_move("cancel")), methods=["POST"]),
        Route("/console/publish/resolve", bind(publish_resolve), methods=["POST"]),
        Route("/console/mentions", bind(mentions_page), methods=["GET"]),
        Route("/console/credentials", bind(credentials_page), methods=["GET"]),
        Route("/console/credentials", bind(credentials_paste), methods=["POST"]),
        Route("/console/activity", bind(activity_page), methods=["GET"]),
        Route("/console/events", bind(events), methods=["GET"]),
        Route("/console/static/{path:path}", bind(static), methods=["GET"]),
        Route("/metrics", bind(metrics), methods=["GET"]),
        Route("/v1/overview", bind(overview_json), methods=["GET"]),
    ]
    return Starlette(routes=routes)


__all__ = ["console_app", "NotFound"]
