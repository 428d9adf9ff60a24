"""The HTTP API: the store over the network, with the same rules as a local write.

Every endpoint but ``/health`` and the OpenAPI description needs a credential (an operator
token or a signed device request). The gate (``hub/gate.py``) checks it from the headers
before it reads a byte of the body, and bounds the body (1 MiB and a little, however framed)
and the time it may take; the authenticated actor is the actor of the write, and the machines
decide what it may do: this module adds no second rulebook.

Errors are ``{"error": code, "reason": sentence}``:

- 400 ``invalid``: the request is readable but its values are refused: a path that is not
  UTF-8 after percent-decoding, a ``key_json`` that is not strict JSON (NaN, Infinity, an
  integer beyond 64 bits, a lone surrogate), a ``Last-Event-ID`` that is not a sequence
  number, a document the store refuses (a reserved field, a bad id).
- 422 ``invalid``: the body or a parameter cannot be read as the endpoint declares it: a
  body that is not UTF-8, not JSON or not a JSON object; a parameter of the wrong type.
- 401 ``unauthorized``, 403 ``forbidden``, 404 ``not_found``, 408 ``timeout`` (the body did
  not arrive in time), 409 ``conflict``, 413 ``too_large``, 503 ``backend`` (and ``/health``
  when something is down).

A junk ``Last-Event-ID`` is refused (400) rather than ignored: the stream only ever sends
sequence numbers as ids, so anything else is a client's bug, better seen than papered over.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal, ParamSpec, TypeVar

from fastapi import Body, Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from ledger import Change, Clock, Context, Forbidden, Invalid, Ledger, LedgerError, NotFound, Store
from ledger.sql import no_database

from .app import App
from .auth import AUTH_DB, Authenticator, Principal, Unauthorized
from .gate import MAX_BODY, PRINCIPAL, Gate, Unprocessable
from .headers import DOCS_PATHS, DOCS_ROUTES, SecureHeaders
from .health import HealthProbe
from .products import products
from .stream import EventStream, Fanout, event
from .throttle import Failures
from .worker import Worker

log = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")

DB = PathParam(description="A database name", pattern=r"^[a-z][a-z0-9_-]{0,63}$")
DOC_ID = PathParam(description="A document id (up to 512 characters)", min_length=1, max_length=512)
PUBLIC = ("/health",)  # with the OpenAPI description and its pages: no credential needed
_SEQ = re.compile(r"^[0-9]{1,19}$")
MAX_SEQ = 2**62


class ErrorBody(BaseModel):
    error: str = Field(
        description="A stable code: invalid, unauthorized, forbidden, not_found, timeout, conflict, too_large, backend, error"
    )
    reason: str = Field(description="One sentence a person can act on")


class Written(BaseModel):
    id: str
    rev: str
    deleted: bool = False


class QueryPage(BaseModel):
    docs: list[dict[str, Any]]
    next: str | None


class ChangeOut(BaseModel):
    seq: int
    db: str
    id: str
    rev: str
    deleted: bool
    actor: str
    at: int
    doc: dict[str, Any]


class ChangesPage(BaseModel):
    changes: list[ChangeOut]
    last: int


class Head(BaseModel):
    seq: int


class WhoAmI(BaseModel):
    actor: str
    credential: str


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 408, 409, 413, 422, 500, 503)
}


def _error(code: str, reason: str, status: int) -> JSONResponse:
    return JSONResponse({"error": code, "reason": reason}, status_code=status)


def _refusal(exc: LedgerError) -> JSONResponse:
    """Any error of the tree, answered with the status its class declares."""
    return _error(exc.code, exc.reason, exc.status)


# ---- strict parsing of what the HTTP layer reads itself ----------------------------------
def _no_constant(name: str) -> Any:
    raise Invalid(f"key_json: {name} is not JSON: use a finite number, a string, true, false or null")


def _int64(text: str) -> int:
    if len(text.lstrip("-")) > 19 or not -(2**63) <= (value := int(text)) < 2**63:
        raise Invalid("key_json: integers must fit in 64 bits (-2^63 to 2^63-1); store larger ones as strings")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Invalid(f"key_json: {text[:40]} is out of range for a number")
    return value


def parse_key_json(text: str) -> Any:
    """A query key given as JSON, parsed strictly: no NaN or Infinity, integers within 64 bits,
    finite floats, strings that are valid Unicode (no lone surrogates)."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_int=_int64, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise Invalid(f"key_json is not valid JSON ({exc.msg} at {exc.pos})") from None
    except RecursionError:
        raise Invalid("key_json is nested too deeply") from None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("key_json: the string holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode") from None
    return value


def parse_last_event_id(text: str | None) -> int | None:
    """``Last-Event-ID``: absent or empty, or a sequence number this stream sent as an id."""
    if text is None or not text.strip():
        return None
    if not _SEQ.match(text.strip()) or int(text) > MAX_SEQ:
        raise Invalid(f"Last-Event-ID must be the id of an event this stream sent (a sequence number), not {text[:40]!r}")
    return int(text)


def _unreadable(cause: BaseException) -> str:
    if isinstance(cause, RecursionError):
        return "it is nested too deeply"
    if isinstance(cause, UnicodeDecodeError):
        return "it is not UTF-8"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return "a number has too many digits (more than 4,300)"
    return f"{type(cause).__name__}"


# ---- what streams and pages show -----------------------------------------------------------
@functools.cache
def _redacted() -> dict[str, tuple[str, ...]]:
    """The fields the products never let a change show, by database (the vault's ciphertext, an image's bytes)."""
    return {db: fields for p in products() for db, fields in p.redact.items()}


def visible(c: Change) -> dict[str, Any] | None:
    """A change as the API shows it: none of the auth database, none of the fields a product redacts."""
    if c.db == AUTH_DB:
        return None
    item = c.as_dict()
    hidden = _redacted().get(c.db)
    if hidden:
        item["doc"] = {k: v for k, v in c.doc.items() if k not in hidden}
    return item


def render(c: Change) -> bytes:
    item = visible(c)
    return b"" if item is None else event(item, c.seq)


# FastAPI 0.165 and later trace every request through OpenTelemetry unless told not to; with no
# exporter configured that is work (and memory) for nothing on every request.
_QUIET: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {}
)


class _Web:
    """What the hub hands a product's routes (``ledger.Web``)."""

    def __init__(self, app: App, principal: Callable[..., Any], run: Callable[..., Awaitable[Any]]) -> None:
        self._app = app
        self._principal = principal
        self._run = run

    @property
    def store(self) -> Store:
        """The hub's store."""
        return self._app.store

    @property
    def settings(self) -> Any:
        """The hub's settings."""
        return self._app.settings

    @property
    def principal(self) -> Callable[..., Any]:
        """The FastAPI dependency giving the authenticated principal."""
        return self._principal

    @property
    def clock(self) -> Clock:
        """The hub's one clock."""
        return self._app.clock

    def ledger(self, actor: str) -> Ledger:
        """The hub's store bound to ``actor``, on the hub's clock."""
        return Ledger(self._app.store, actor, self._app.clock)

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Awaitable[Any]:
        """``fn`` in the API's threads, awaited."""
        return self._run(fn, *args, **kwargs)

    def context(self, product: str, actor: str) -> Context:
        """A backend context for ``actor`` of ``product``."""
        return self._app.context(product, actor)


def create_api(app: App) -> FastAPI:
    """The HTTP API over ``app``'s store: every endpoint behind the gate, the console in front (see the
    module docstring)."""
    store = app.store
    settings = app.settings
    api = FastAPI(
        title="skyhub",
        version="1",
        description="The skyhub ledger over HTTP: documents, queries, history, the change stream and machines.",
        responses=ERRORS,
        docs_url=None,  # /docs is served from the installed package instead of a CDN (hub/headers.py)
        redoc_url=None,
        **_QUIET,
    )
    api.router.routes.extend(DOCS_ROUTES)
    api.state.public_url = settings.public_url or f"http://{settings.host}:{settings.port}"  # hub/server.py sets the bound one
    authenticator = Authenticator(store, lambda: api.state.public_url)
    public = {p for p in (*PUBLIC, *DOCS_PATHS, api.openapi_url) if p}
    probe = HealthProbe(app)
    pool = Worker("api", settings.http.threads)  # the endpoints' store calls: see hub/worker.py
    api.state.failures = Failures()  # refused credentials, per address: the gate's and the console's sign-in
    api.add_middleware(
        Gate, authenticator=authenticator, clock=app.clock, public=public, max_body=MAX_BODY,
        body_timeout=settings.http.body_timeout, run=pool.run, failures=api.state.failures,
    )
    fanout = Fanout(
        store, render, queue_size=settings.http.stream_queue, keepalive=settings.http.stream_keepalive,
        stopping=app.stopping.is_set,
    )

    def pooled(endpoint: Callable[P, T]) -> Callable[P, Awaitable[T]]:
        """The endpoint, run in the pool (FastAPI reads its signature through ``__wrapped__``)."""

        @functools.wraps(endpoint)
        async def in_pool(*args: P.args, **kwargs: P.kwargs) -> T:
            return await pool.run(endpoint, *args, **kwargs)

        return in_pool

    @api.exception_handler(LedgerError)
    async def ledger_error(request: Request, exc: LedgerError) -> JSONResponse:
        return _refusal(exc)

    @api.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            at = first.get("loc", ("body", "?"))[-1]
            return _refusal(Unprocessable(f"the body is not valid JSON ({first.get('ctx', {}).get('error', 'decode error')} at {at})"))
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return _refusal(Unprocessable(f"{where}: {first.get('msg', 'is not valid')}"))

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI could not parse the body
            return _refusal(Unprocessable(f"the body is not JSON the hub can read: {_unreadable(exc.__cause__)}"))
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid")
        return _error(code, str(exc.detail), exc.status_code)

    @api.exception_handler(Exception)
    async def failure(request: Request, exc: Exception) -> JSONResponse:
        # a bug, not bad input: the body keeps the API's shape; uvicorn logs the traceback
        return _error("error", f"the hub failed on this request ({type(exc).__name__}); its log has the details", 500)

    async def principal(request: Request) -> Principal:
        who = request.scope.get(PRINCIPAL)
        if who is None:  # the gate lets no such request through; this is the second lock
            raise Unauthorized("no credential: send 'Authorization: Bearer <token>' or a signed device request")
        return who  # type: ignore[no-any-return]

    def reachable(db: str) -> str:
        if db == AUTH_DB:
            raise Forbidden(f"database {AUTH_DB!r} is not reachable through the API: use `skyhub user` and `skyhub device` on the hub")
        for product in app.products:
            if db in product.private:
                raise Forbidden(f"database {db!r} {product.private[db]}")
        return db

    # ---- health --------------------------------------------------------------------------
    @api.get("/health", tags=["health"], responses={503: {"description": "Something is down; the body says what"}})
    async def health() -> JSONResponse:
        report = await probe()
        report["streams"] = fanout.stats()
        return JSONResponse(report, status_code=200 if report["ok"] else 503)

    @api.get("/v1/whoami", tags=["auth"], response_model=WhoAmI)
    @pooled
    def whoami(who: Principal = Depends(principal)) -> WhoAmI:
        return WhoAmI(actor=who.actor, credential=who.credential)

    # ---- documents -----------------------------------------------------------------------
    @api.get("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"])
    @pooled
    def get_doc(db: str = DB, doc_id: str = DOC_ID, who: Principal = Depends(principal)) -> dict[str, Any]:
        return store.get(reachable(db), doc_id)

    @api.put("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"], response_model=Written)
    @pooled
    def put_doc(
        db: str = DB,
        doc_id: str = DOC_ID,
        doc: dict[str, Any] = Body(..., description="The document: a JSON object"),
        if_rev: str | None = Query(None, description="Write only if the document is still at this revision"),
        create_only: bool = Query(False, description="Write only if no document has this id"),
        who: Principal = Depends(principal),
    ) -> Written:
        out = store.put(reachable(db), doc, doc_id, actor=who.actor, if_rev=if_rev, create_only=create_only)
        return Written(id=out["_id"], rev=out["_rev"])

    @api.post("/v1/db/{db}/docs", tags=["documents"], response_model=Written)
    @pooled
    def post_doc(
        db: str = DB,
        doc: dict[str, Any] = Body(..., description="The document: a JSON object; _id optional"),
        create_only: bool = Query(False),
        who: Principal = Depends(principal),
    ) -> Written:
        out = store.put(reachable(db), doc, None, actor=who.actor, create_only=create_only)
        return Written(id=out["_id"], rev=out["_rev"])

    @api.delete("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"], response_model=Written)
    @pooled
    def delete_doc(db: str = DB, doc_id: str = DOC_ID, if_rev: str | None = Query(None), who: Principal = Depends(principal)) -> Written:
        out = store.delete(reachable(db), doc_id, actor=who.actor, if_rev=if_rev)
        return Written(id=out["_id"], rev=out["_rev"], deleted=True)

    @api.get("/v1/db/{db}/query", tags=["documents"], response_model=QueryPage)
    @pooled
    def query(
        db: str = DB,
        field: str = Query(..., description="A top-level field, e.g. status"),
        key: str | None = Query(None, description="The value to match, as a string"),
        key_json: str | None = Query(
            None, max_length=4096,
            description="The value to match, as strict JSON: a finite number (integers within 64 bits), true, false, null or \"text\"",
        ),
        limit: int = Query(100, ge=1, le=1000),
        after: str | None = Query(None, description="The next cursor of the previous page"),
        who: Principal = Depends(principal),
    ) -> QueryPage:
        if (key is None) == (key_json is None):
            raise Invalid("give exactly one of key or key_json")
        value: Any = key if key_json is None else parse_key_json(key_json)
        page = store.query(reachable(db), field, value, limit, after)
        if not page.docs and page.next is None and after is None and not store.has_db(db):
            raise NotFound(no_database(db))
        return QueryPage(docs=page.docs, next=page.next)

    @api.get("/v1/db/{db}/history/{doc_id:path}", tags=["documents"], response_model=list[ChangeOut])
    @pooled
    def history(db: str = DB, doc_id: str = DOC_ID, who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        return [c.as_dict() for c in store.history(reachable(db), doc_id)]

    # ---- changes -------------------------------------------------------------------------
    @api.get("/v1/changes", tags=["changes"], response_model=ChangesPage)
    @pooled
    def changes(
        since: int = Query(0, ge=0, le=MAX_SEQ), limit: int = Query(100, ge=1, le=1000),
        db: list[str] | None = Query(None, description="Only these databases (repeat the parameter for several)"),
        who: Principal = Depends(principal),
    ) -> ChangesPage:
        batch = store.changes(since, limit, db or None)
        shown = [item for item in map(visible, batch) if item is not None]
        return ChangesPage(changes=[ChangeOut(**c) for c in shown], last=batch[-1].seq if batch else since)

    @api.get("/v1/head", tags=["changes"], response_model=Head)
    @pooled
    def head(who: Principal = Depends(principal)) -> Head:
        return Head(seq=store.head_seq())

    @api.get(
        "/v1/changes/stream", tags=["changes"],
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": (
            "Server-sent events: `event: change` with the change as data and its sequence number as id; "
            "`event: error` with {error, reason} before the hub ends a stream (a client too slow to keep up, "
            "the hub stopping): reconnect with Last-Event-ID to resume. Comment lines keep quiet streams open."
        )}},
    )
    async def stream(
        since: int = Query(0, ge=0, le=MAX_SEQ, description="Start after this sequence number"),
        last_event_id: str | None = Header(
            None, description="The id of the last event received; takes precedence over since. Anything but a sequence number is refused (400)",
        ),
        who: Principal = Depends(principal),
    ) -> EventStream:
        start = parse_last_event_id(last_event_id)
        return EventStream(fanout, since if start is None else start)

    # ---- machines ------------------------------------------------------------------------
    @api.get("/v1/machines", tags=["machines"])
    @pooled
    def machines(
        format: Literal["json", "mermaid"] = Query("json"), who: Principal = Depends(principal),  # noqa: A002
    ) -> Any:
        ms = app.rules.machines
        if format == "mermaid":
            text = "\n\n".join(f"%% {m.name}\n{m.mermaid()}" for m in ms)
            return JSONResponse({"mermaid": text})
        return [m.describe() for m in ms]

    web = _Web(app, principal, pool.run)
    for product in app.products:  # each product's own routes, behind the same gate
        router = product.router(web)
        if router is not None:
            api.include_router(router)
    __import__("hub.console", fromlist=["mount"]).mount(api, app)  # the console at / (hub/console), in front of the API
    api.add_middleware(SecureHeaders)  # outermost: every answer, the console's included, gets the security headers
    return api


__all__ = ["MAX_BODY", "Unauthorized", "create_api"]
