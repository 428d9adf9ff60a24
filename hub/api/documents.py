"""``/v1/db/{db}/...``: documents, queries and history, written as the credential's actor and
judged by the machines. The ``auth`` database and the databases a product keeps to its own
routes (``Product.private``) are not reachable here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Body, Depends, Query
from pydantic import BaseModel

from ledger import Forbidden, Invalid, NotFound, Store
from ledger.sql import no_database

from ..auth import AUTH_DB, Principal
from .deps import DB, DOC_ID, Run, pooled, principal
from .models import ChangeOut
from .parsing import parse_key_json


class Written(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    id: str
    rev: str
    deleted: bool = False


class SearchResults(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    docs: list[dict[str, Any]]
    total: int
    capped: bool
    next: str | None


class QueryPage(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    docs: list[dict[str, Any]]
    next: str | None


class TimePage(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    docs: list[dict[str, Any]]
    written: list[int]
    next: str | None


def documents_router(store: Store, private: Mapping[str, str], run: Run) -> APIRouter:
    """The documents of ``store``, but for the ``auth`` database and ``private`` ones (db -> why not)."""
    router = APIRouter()
    in_pool = pooled(run)

    def reachable(db: str) -> str:
        if db == AUTH_DB:
            raise Forbidden(f"database {AUTH_DB!r} is not reachable through the API: use `skyhub user` and `skyhub device` on the hub")
        if db in private:
            raise Forbidden(f"database {db!r} {private[db]}")
        return db

    @router.get("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"])
    @in_pool
    def get_doc(db: str = DB, doc_id: str = DOC_ID, who: Principal = Depends(principal)) -> dict[str, Any]:
        return store.get(reachable(db), doc_id)

    @router.put("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"], response_model=Written)
    @in_pool
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

    @router.post("/v1/db/{db}/docs", tags=["documents"], response_model=Written)
    @in_pool
    def post_doc(
        db: str = DB,
        doc: dict[str, Any] = Body(..., description="The document: a JSON object; _id optional"),
        create_only: bool = Query(False),
        who: Principal = Depends(principal),
    ) -> Written:
        out = store.put(reachable(db), doc, None, actor=who.actor, create_only=create_only)
        return Written(id=out["_id"], rev=out["_rev"])

    @router.delete("/v1/db/{db}/docs/{doc_id:path}", tags=["documents"], response_model=Written)
    @in_pool
    def delete_doc(db: str = DB, doc_id: str = DOC_ID, if_rev: str | None = Query(None), who: Principal = Depends(principal)) -> Written:
        out = store.delete(reachable(db), doc_id, actor=who.actor, if_rev=if_rev)
        return Written(id=out["_id"], rev=out["_rev"], deleted=True)

    @router.get("/v1/db/{db}/query", tags=["documents"], response_model=QueryPage)
    @in_pool
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

    @router.get("/v1/db/{db}/by-time", tags=["documents"], response_model=TimePage)
    @in_pool
    def by_time(
        db: str = DB,
        status: str = Query(..., max_length=200, description="The status whose documents to list"),
        order: str = Query("newest", pattern="^(newest|oldest)$", description="newest (last written first) or oldest"),
        limit: int = Query(100, ge=1, le=1000),
        after: str | None = Query(None, description="The next cursor of the previous page"),
        skip: int = Query(0, ge=0, description="Documents to pass over first (a jump to a page; at most 10,000)"),
        who: Principal = Depends(principal),
    ) -> TimePage:
        page = store.by_time(reachable(db), status, limit, after, newest=order == "newest", skip=skip)
        return TimePage(docs=page.docs, written=list(page.written), next=page.next)

    @router.get("/v1/db/{db}/search", tags=["documents"], response_model=SearchResults)
    @in_pool
    def search(
        db: str = DB,
        q: str = Query(..., max_length=1000, description="An id's first characters, or words of a document's text, caption or "
                       "lastError (each the start of a word, any case; all must match)"),
        limit: int = Query(50, ge=1, le=1000),
        after: str | None = Query(None, description="The next cursor of the previous page"),
        who: Principal = Depends(principal),
    ) -> SearchResults:
        page = store.search(reachable(db), q, limit, after)
        return SearchResults(docs=page.docs, total=page.total, capped=page.capped, next=page.next)

    @router.get("/v1/db/{db}/history/{doc_id:path}", tags=["documents"], response_model=list[ChangeOut])
    @in_pool
    def history(db: str = DB, doc_id: str = DOC_ID, who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        return [c.as_dict() for c in store.history(reachable(db), doc_id)]

    return router
