"""The console's HTTP plumbing: its own small app (pages, forms, the live stream, static files,
``/metrics``), the session every page requires, CSRF on every POST, and the HTML renderer.

Pages are server-rendered (Jinja2, autoescaped); forms post ``application/x-www-form-urlencoded``
bodies of at most ``MAX_FORM`` bytes, read here (no multipart parser). A page that needs a
session and has none redirects to sign-in; a POST without the session's CSRF value (or from
another origin) is refused with 403 and writes nothing.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlsplit

from jinja2 import ChoiceLoader, Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from ledger import Change

from ..auth import AUTH_DB
from ..stream import Fanout
from ..throttle import Failures
from .activity import Activity
from .metrics import Metrics, StoreCollector
from .sessions import COOKIE, PRE_COOKIE, ZONE_COOKIE, Session, Sessions, csrf_ok, with_browser_zone

if TYPE_CHECKING:
    from ..app import App

log = logging.getLogger(__name__)

MAX_FORM = 256 * 1024
NAV = (("/", "Overview"), ("/console/activity", "Activity"), ("/console/search", "Search"), ("/console/audit", "Audit"))  # the frame's own; each product adds its pages between


class SignInNeeded(Exception):
    """The request has no live session: the page sends the person to sign in."""


class Refused(Exception):
    """A POST that fails the CSRF or origin check, or a form too large to read: ``status`` is the
    HTTP status to answer with, ``reason`` the sentence shown."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def utc_text(ms: int) -> str:
    """Epoch ms as a short UTC time: what a page shows before (or without) its script."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso_ms(ms: int) -> str:
    """Epoch ms as ISO 8601 in UTC, to the millisecond (a ``<time datetime>``)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ago_text(ms: int, now: int) -> str:
    """How long before ``now`` (epoch ms) ``ms`` was, as people say it: ``12 s ago``, ``5 min ago``, ``3 h ago``, ``2 d ago``."""
    s = max(0, (now - ms) // 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s // size} {unit} ago"
    return f"{s} s ago"


def when(ms: Any, ago: bool = False, brief: bool = False, now: int | None = None) -> Markup:
    """A time on a page: ``<time datetime="ISO-8601 UTC" [data-ago]>UTC text</time>``.

    The contract with ``static/console.js``: the script rewrites the text of every ``<time datetime>``
    in the zone of ``<html data-zone="Area/City">`` when the server set one, else in the browser's,
    and, with ``data-ago``, adds how long ago ("12 s ago", "3 h ago"), kept fresh while the page is
    open and after a live refresh swaps a region; ``brief`` (``data-ago="only"``) shows only how long
    ago, for a narrow column, the full time in the title (given the page's ``now``, its text says how
    long ago already, as the script would). Without the script the UTC text stays. The
    epoch value is kept in ``data-ms`` and in the title, so nothing is lost. Not a time (None, 0, text,
    a boolean): empty; an epoch that is not a date (out of range): the number as text.
    """
    if isinstance(ms, bool) or not isinstance(ms, int | float) or not ms:
        return Markup("")
    try:
        text, stamp = utc_text(int(ms)), _iso_ms(int(ms))
    except (OverflowError, OSError, ValueError):
        return Markup(escape(str(ms)))
    mark = Markup(' data-ago="only"') if brief else Markup(" data-ago") if ago else ""
    shown = (ago_text(int(ms), now) if now else text[11:]) if brief else text
    return Markup('<time datetime="{}" data-ms="{}" title="{} ({})"{}>{}</time>').format(stamp, int(ms), text, int(ms), mark, shown)


def doc_url(db: str, doc_id: str) -> str:
    """The console page of one document."""
    return f"/console/doc/{quote(db, safe='')}/{quote(doc_id, safe='')}"


def page_event(c: Change) -> bytes:
    """What a page's stream shows of a change: its database, id and status (never a body; nothing of the auth database)."""
    if c.db == AUTH_DB:
        return b""
    status = c.doc.get("status") if isinstance(c.doc.get("status"), str) else None
    data = json.dumps({"seq": c.seq, "db": c.db, "id": c.id, "status": status, "deleted": c.deleted}, ensure_ascii=False)
    return f"id: {c.seq}\nevent: change\ndata: {data}\n\n".encode()


@dataclass
class Console:
    """What every console route shares: the hub, sessions, the renderer, activity and metrics."""

    app: App
    sessions: Sessions
    env: Environment
    activity: Activity
    metrics: Metrics
    started_at: int
    _fanout: Fanout | None = None
    failures: Failures = field(default_factory=Failures)  # refused sign-ins wait a little (hub/throttle.py)

    @property
    def fanout(self) -> Fanout:
        """One reader of the change log for every open page (made on the first stream, on the server's loop)."""
        if self._fanout is None:
            http = self.app.settings.http
            self._fanout = Fanout(self.app.store, page_event, queue_size=http.stream_queue, keepalive=http.stream_keepalive,
                                  stopping=self.app.stopping.is_set)
        return self._fanout

    @classmethod
    def make(cls, app: App, hub_url: Callable[[], str] = lambda: "", metrics: Metrics | None = None) -> Console:
        """The console of ``app``: its templates, sessions, activity reader and metrics (``metrics``: the request
        counts kept since the hub started, given the store's collector here)."""
        loaders = [PackageLoader("hub.console", "templates")]  # the frame: base.html, macros, the engine's views
        loaders += [PackageLoader(p.templates, "templates") for p in app.products if p.templates]  # each product's pages
        env = Environment(loader=ChoiceLoader(loaders), autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
        nav = (NAV[0], *(entry for p in app.products for entry in p.nav), *NAV[1:])
        env.globals.update(when=when, doc_url=doc_url, nav=nav)
        activity = Activity(app.store, app.rules, now=app.clock.now_ms)
        metrics = metrics or Metrics(app.clock.now_ms)
        metrics.collector = StoreCollector(app.store, app.handlers, app.ticks, app.products, activity)
        return cls(app, Sessions(app.store, clock=app.clock, hub_url=hub_url), env, activity, metrics, app.clock.now_ms())

    @functools.cached_property
    def private(self) -> dict[str, str]:
        """Databases the products keep out of the console's generic views, and why."""
        return {db: why for p in self.app.products for db, why in p.private.items()}

    @functools.cached_property
    def redact(self) -> dict[str, tuple[str, ...]]:
        """Fields the products never let a page show, by database."""
        return {db: fields for p in self.app.products for db, fields in p.redact.items()}

    @functools.cached_property
    def doc_actions(self) -> list[Callable[..., Any]]:
        """The products' own document actions (a post's Retry, ...)."""
        return [found for p in self.app.products if (found := p.actions()) is not None]

    @functools.cached_property
    def doc_images(self) -> list[Callable[..., Any]]:
        """The products' ways of showing their documents' images (``Product.doc_images``)."""
        return [found for p in self.app.products if (found := p.images()) is not None]

    # ---- sessions and forms ----------------------------------------------------------------
    def https(self, request: Request) -> bool:
        """Whether the cookie must be Secure: the request came over https, or the hub's public URL is https."""
        public = str(getattr(self.app.settings, "public_url", "") or "")
        return request.url.scheme == "https" or public.startswith("https://")

    async def session(self, request: Request) -> Session:
        """The live session of this request; ``SignInNeeded`` otherwise."""
        found = await run_in_threadpool(self.sessions.check, request.cookies.get(COOKIE))
        if found is None:
            raise SignInNeeded
        self.activity.start(self.app.stopping)
        return with_browser_zone(found, request.cookies.get(ZONE_COOKIE))

    async def form(self, request: Request, secret: str | None) -> dict[str, str]:
        """The POSTed form, after the origin and CSRF checks against ``secret`` (the cookie's value)."""
        self.same_origin(request)
        length = request.headers.get("content-length")
        if length and (not length.isdigit() or int(length) > MAX_FORM):
            raise Refused(413, f"the form is over {MAX_FORM // 1024} KiB")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM:
                raise Refused(413, f"the form is over {MAX_FORM // 1024} KiB")
        try:
            fields = dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=200))
        except (UnicodeDecodeError, ValueError):
            raise Refused(400, "the form could not be read") from None
        if not csrf_ok(secret, fields.get("csrf")):
            raise Refused(403, "this form is stale or did not come from this console (the CSRF check failed): reload the page and try again")
        return fields

    def same_origin(self, request: Request) -> None:
        """Refuse a POST that the browser says came from another site."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            raise Refused(403, "a form from another site is refused")
        origin = request.headers.get("origin")
        if origin is not None and origin != "null":
            host = request.headers.get("host", "")
            if urlsplit(origin).netloc != host:
                raise Refused(403, "a form from another origin is refused")
        elif origin == "null":
            raise Refused(403, "a form from an opaque origin is refused")

    def set_session_cookie(self, response: Response, request: Request, value: str, max_age: int | None) -> None:
        """Set the session cookie (HttpOnly, SameSite=Strict, Path=/, Secure over https)."""
        response.set_cookie(COOKIE, value, max_age=max_age, path="/", httponly=True, samesite="strict", secure=self.https(request))

    def clear_cookies(self, response: Response, request: Request) -> None:
        """Remove the session cookie."""
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=self.https(request))

    def pre_cookie(self, response: Response, request: Request, value: str) -> None:
        """Set the sign-in form's pre-session cookie (its CSRF secret)."""
        response.set_cookie(PRE_COOKIE, value, max_age=3600, path="/console/sign-in", httponly=True, samesite="strict",
                            secure=self.https(request))

    # ---- rendering --------------------------------------------------------------------------
    def render(self, name: str, request: Request, session: Session | None, *, status_code: int = 200, **values: Any) -> HTMLResponse:
        """A page from ``templates/NAME``, with the session and the change log's head (where live updates start)."""
        try:
            seq = self.app.store.head_seq() if session else 0
        except Exception:  # noqa: BLE001 - a page still renders when the head cannot be read
            seq = 0
        values.setdefault("flash", request.query_params.get("done", ""))
        values.setdefault("zone", session.zone if session and session.zone_from != "default" else None)  # <html data-zone>: the zone chosen or the browser's cookie; none yet: the script uses the browser's
        html = self.env.get_template(name).render(session=session, seq=seq, current=request.url.path, **values)
        return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)

    def refused(self, exc: Refused) -> Response:
        """The answer to a refused POST: the status and its sentence."""
        return PlainTextResponse(exc.reason, status_code=exc.status, headers=SECURITY_HEADERS)

    def metrics_allowed(self, request: Request) -> bool:
        """A person's token (Bearer); or, when the operator turned it on (``http.metrics_from_loopback``), a
        request from this machine's loopback address (the address as the hub sees it: a proxy's forwarded
        address only when the proxy is in ``http.trusted_proxies``)."""
        client = request.client.host if request.client else ""
        try:
            if self.app.settings.http.metrics_from_loopback and ipaddress.ip_address(client).is_loopback:
                return True
        except ValueError:
            pass
        header = request.headers.get("authorization")
        if not header:
            return False
        try:
            principal = self.sessions.authenticator.authenticate(header, "GET", "/metrics", b"", self.app.clock.now_ms())
        except Exception:  # noqa: BLE001 - any refusal is a 401 here
            return False
        return principal.actor.startswith("user:")


SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
}


def static_file(path: str) -> tuple[bytes, str] | None:
    """A file shipped under ``hub/console/static``, with its media type; None if there is none."""
    if ".." in path.split("/") or path.startswith("/"):
        return None
    node = resources.files("hub.console").joinpath("static")
    for part in path.split("/"):
        node = node.joinpath(part)
    if not node.is_file():
        return None
    kind = {"css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8", "svg": "image/svg+xml",
            "png": "image/png", "txt": "text/plain; charset=utf-8"}.get(path.rsplit(".", 1)[-1], "application/octet-stream")
    return node.read_bytes(), kind


Handler = Callable[..., Awaitable[Response]]
