"""The HTTP API: the store over the network, with the same rules as a local write.

Every endpoint but ``/health`` needs a credential (an operator token or a signed device
request); the authenticated actor is the actor of the write, and the machines decide what it
may do: this module adds no second rulebook. Errors are ``{"error": code, "reason": text}``
with 400/422 (bad input), 401, 403, 404, 409, 413 and 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal

from fastapi import Body, Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, SecretStr
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ledger import Change, Forbidden, Invalid, Ledger, LedgerError, TooLarge
from ledger.document import MAX_DOC_BYTES
from vault import DB as VAULT_DB
from vault import NoMasterKey, Vault, credential_id
from vault.keys import ALTERNATIVES
from vault.rotation import verify as verify_now

from .app import App
from .auth import AUTH_DB, Authenticator, Principal, Unauthorized

log = logging.getLogger(__name__)

DB = PathParam(description="A database name", pattern=r"^[a-z][a-z0-9_-]{0,63}$")
DOC_ID = PathParam(description="A document id (up to 512 characters)", min_length=1, max_length=512)
MAX_BODY = MAX_DOC_BYTES + 64 * 1024


class ErrorBody(BaseModel):
    error: str = Field(description="A stable code: invalid, unauthorized, forbidden, not_found, conflict, too_large, backend")
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


class SecretIn(BaseModel):
    secret: SecretStr | dict[str, Any] = Field(description="The secret: a string (token, app password) or a JSON object")

    def __repr__(self) -> str:
        return "SecretIn(secret=***)"


class Credential(BaseModel):
    id: str
    platform: str
    account: str
    version: int
    status: str
    createdAt: int | None = None
    refreshedAt: int | None = None
    expiresAt: int | None = None
    verifiedAt: int | None = None
    needsReauth: bool | None = None
    lastError: str | None = None
    fingerprint: str | None = None
    createSessions: dict[str, Any] | None = None


class WhoAmI(BaseModel):
    actor: str
    credential: str


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 413, 422, 503)
}


def _error(code: str, reason: str, status: int) -> JSONResponse:
    return JSONResponse({"error": code, "reason": reason}, status_code=status)


def _refusal(exc: LedgerError) -> JSONResponse:
    """Any error of the tree, answered with the status its class declares."""
    return _error(exc.code, exc.reason, exc.status)


def create_api(app: App) -> FastAPI:
    store = app.store
    authenticator = Authenticator(store)
    api = FastAPI(
        title="skyhub",
        version="1",
        description="The skyhub ledger over HTTP: documents, queries, history, the change stream and machines.",
        responses=ERRORS,
    )

    @api.middleware("http")
    async def limit_body(request: Request, call_next: Any) -> Any:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > MAX_BODY:
            return _refusal(TooLarge(f"request body is {int(length):,} bytes; documents are at most {MAX_DOC_BYTES:,} bytes (1 MiB)"))
        return await call_next(request)

    @api.exception_handler(LedgerError)
    async def ledger_error(request: Request, exc: LedgerError) -> JSONResponse:
        return _refusal(exc)

    @api.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return _error("invalid", f"{where}: {first.get('msg', 'is not valid')}", 422)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid")
        return _error(code, str(exc.detail), exc.status_code)

    async def principal(request: Request, authorization: str | None = Header(None)) -> Principal:
        body = await request.body()
        target = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1")
        query = request.scope.get("query_string", b"").decode("latin-1")
        if query:
            target += "?" + query
        now = store.clock.now_ms()
        return await run_in_threadpool(authenticator.authenticate, authorization, request.method, target, body, now)

    def reachable(db: str) -> str:
        if db == AUTH_DB:
            raise Forbidden(f"database {AUTH_DB!r} is not reachable through the API: use `skyhub user` and `skyhub device` on the hub")
        if db == VAULT_DB:
            raise Forbidden(f"database {VAULT_DB!r} is reachable only through /v1/vault (metadata, never secrets)")
        return db

    # ---- health --------------------------------------------------------------------------
    @api.get("/health", tags=["health"], responses={503: {"description": "Something is down"}})
    def health() -> JSONResponse:
        report = app.health()
        return JSONResponse(report, status_code=200 if report["ok"] else 503)

    @api.get("/v1/whoami", tags=["auth"], response_model=WhoAmI)
    def whoami(who: Principal = Depends(principal)) -> WhoAmI:
        return WhoAmI(actor=who.actor, credential=who.credential)

    # ---- documents -----------------------------------------------------------------------
    @api.get("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"])
    def get_doc(db: str = DB, doc_id: str = DOC_ID, who: Principal = Depends(principal)) -> dict[str, Any]:
        return store.get(reachable(db), doc_id)

    @api.put("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"], response_model=Written)
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
    def post_doc(
        db: str = DB,
        doc: dict[str, Any] = Body(..., description="The document: a JSON object; _id optional"),
        create_only: bool = Query(False),
        who: Principal = Depends(principal),
    ) -> Written:
        out = store.put(reachable(db), doc, None, actor=who.actor, create_only=create_only)
        return Written(id=out["_id"], rev=out["_rev"])

    @api.delete("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"], response_model=Written)
    def delete_doc(db: str = DB, doc_id: str = DOC_ID, if_rev: str | None = Query(None), who: Principal = Depends(principal)) -> Written:
        out = store.delete(reachable(db), doc_id, actor=who.actor, if_rev=if_rev)
        return Written(id=out["_id"], rev=out["_rev"], deleted=True)

    @api.get("/v1/db/{db}/query", tags=["documents"], response_model=QueryPage)
    def query(
        db: str = DB,
        field: str = Query(..., description="A top-level field, e.g. status"),
        key: str | None = Query(None, description="The value to match, as a string"),
        key_json: str | None = Query(None, description="The value to match, as JSON (a number, true, \"text\")"),
        limit: int = Query(100, ge=1, le=1000),
        after: str | None = Query(None, description="The next cursor of the previous page"),
        who: Principal = Depends(principal),
    ) -> QueryPage:
        if (key is None) == (key_json is None):
            raise Invalid("give exactly one of key or key_json")
        value: Any = key
        if key_json is not None:
            try:
                value = json.loads(key_json)
            except json.JSONDecodeError:
                raise Invalid("key_json is not valid JSON") from None
        page = store.query(reachable(db), field, value, limit, after)
        return QueryPage(docs=page.docs, next=page.next)

    @api.get("/v1/db/{db}/history/{doc_id:path}", tags=["documents"], response_model=list[ChangeOut])
    def history(db: str = DB, doc_id: str = DOC_ID, who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        return [c.as_dict() for c in store.history(reachable(db), doc_id)]

    # ---- changes -------------------------------------------------------------------------
    def visible(changes: list[Change]) -> list[dict[str, Any]]:
        out = []
        for c in changes:
            if c.db == AUTH_DB:
                continue
            item = c.as_dict()
            if c.db == VAULT_DB:
                item["doc"] = {k: v for k, v in c.doc.items() if k != "sealed"}
            out.append(item)
        return out

    @api.get("/v1/changes", tags=["changes"], response_model=ChangesPage)
    def changes(
        since: int = Query(0, ge=0, le=2**62), limit: int = Query(100, ge=1, le=1000), who: Principal = Depends(principal),
    ) -> ChangesPage:
        batch = store.changes(since, limit)
        return ChangesPage(changes=[ChangeOut(**c) for c in visible(batch)], last=batch[-1].seq if batch else since)

    @api.get("/v1/head", tags=["changes"], response_model=Head)
    def head(who: Principal = Depends(principal)) -> Head:
        return Head(seq=store.head_seq())

    @api.get(
        "/v1/changes/stream", tags=["changes"],
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": "Server-sent events, one per change"}},
    )
    async def stream(
        request: Request,
        since: int = Query(0, ge=0, le=2**62),
        last_event_id: str | None = Header(None),
        who: Principal = Depends(principal),
    ) -> StreamingResponse:
        start = int(last_event_id) if last_event_id and last_event_id.isdigit() else since
        loop = asyncio.get_running_loop()
        woke = asyncio.Event()
        def wake(_change: Change | None) -> None:
            loop.call_soon_threadsafe(woke.set)

        unsubscribe = store.subscribe(wake)

        async def events() -> Any:
            seq = start
            try:
                yield ": stream of skyhub changes\n\n"
                while not app.stopping.is_set():
                    woke.clear()
                    batch = await run_in_threadpool(store.changes, seq, 100)
                    for change in visible(batch):
                        yield f"id: {change['seq']}\nevent: change\ndata: {json.dumps(change, ensure_ascii=False)}\n\n"
                    if batch:
                        seq = batch[-1].seq
                        continue
                    try:
                        await asyncio.wait_for(woke.wait(), timeout=1.0)
                    except TimeoutError:
                        if await request.is_disconnected():
                            return
                        yield ": keep-alive\n\n"
            finally:
                unsubscribe()

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    # ---- vault (write-only) ----------------------------------------------------------------
    def vault_for(who: Principal) -> Vault:
        return Vault(Ledger(store, who.actor), app.key)

    @api.put("/v1/vault/credentials/{platform}/{account}", tags=["vault"], response_model=Credential)
    def vault_put(
        platform: str = PathParam(description="bluesky, instagram, threads or facebook"),
        account: str = PathParam(description="The account, e.g. ourbot.bsky.social or an Instagram user id"),
        body: SecretIn = Body(...),
        verify: bool = Query(False, description="Check the secret with the platform now instead of at the next vault tick"),
        who: Principal = Depends(principal),
    ) -> dict[str, Any]:
        credential_id(platform, account)  # a bad platform or account is the client's mistake, whatever the hub lacks
        if app.vault_key_problem():
            raise NoMasterKey(f"the hub has no vault master key, so it cannot seal this secret: on the hub, {ALTERNATIVES}")
        meta = vault_for(who).put(platform, account, body.secret.get_secret_value() if isinstance(body.secret, SecretStr) else body.secret)
        if verify:
            meta = verify_now(app.context("vault", "tick:vault"), meta["id"])
        return meta

    @api.get("/v1/vault/credentials", tags=["vault"], response_model=list[Credential])
    def vault_list(who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        return vault_for(who).list()

    @api.get("/v1/vault/credentials/{cred_id}", tags=["vault"], response_model=Credential)
    def vault_show(cred_id: str = PathParam(max_length=200), who: Principal = Depends(principal)) -> dict[str, Any]:
        return vault_for(who).show(cred_id)

    @api.delete("/v1/vault/credentials/{cred_id}", tags=["vault"], response_model=Written)
    def vault_rm(cred_id: str = PathParam(max_length=200), who: Principal = Depends(principal)) -> Written:
        vault_for(who).remove(cred_id)
        return Written(id=cred_id, rev="", deleted=True)

    # ---- machines ------------------------------------------------------------------------
    @api.get("/v1/machines", tags=["machines"])
    def machines(
        format: Literal["json", "mermaid"] = Query("json"), who: Principal = Depends(principal),  # noqa: A002
    ) -> Any:
        ms = app.rules.machines
        if format == "mermaid":
            text = "\n\n".join(f"%% {m.name}\n{m.mermaid()}" for m in ms)
            return JSONResponse({"mermaid": text})
        return [m.describe() for m in ms]

    from .api_publish import publish_router

    api.include_router(publish_router(app))
    return api


__all__ = ["Unauthorized", "create_api"]
