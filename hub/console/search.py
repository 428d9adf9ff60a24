"""The console's search page: documents found by an id's first characters or a word of their
text, caption or lastError (``ledger/search.py``), every database at once or one a page at a time."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ledger import LedgerError, SearchPage, Store
from ledger.search import searchable_text

from ..auth import AUTH_DB
from .web import Console

PAGE_SIZE = 50  # one database's results a page
EACH = 10  # results of each database when every database is searched


def _databases(store: Store) -> list[str]:
    """The databases with live documents, but the credentials' own."""
    return sorted({c.db for c in store.counts()} - {AUTH_DB})


def _rows(db: str, page: SearchPage) -> list[dict[str, Any]]:
    return [{"db": db, "doc": d, "text": searchable_text(d)} for d in page.docs]


def _search(store: Store, q: str, db: str, after: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The result sections (one per database with a match) and the databases one may choose."""
    databases = _databases(store)
    sections = []
    for name in [db] if db else databases:
        page = store.search(name, q, PAGE_SIZE if db else EACH, after if db else None)
        if not page.docs and not db:
            continue
        more = None
        if page.next:
            more = "/console/search?" + urlencode({"q": q, "db": name, **({"after": page.next} if db else {})})
        sections.append({"db": name, "total": page.total, "capped": page.capped, "rows": _rows(name, page), "more": more,
                         "shown": len(page.docs)})
    return sections, databases


async def search_page(console: Console, request: Request) -> Response:
    """``/console/search?q=WORDS[&db=DB][&after=ID]``: the search box and what it found."""
    session = await console.session(request)
    q = request.query_params.get("q", "").strip()
    db = request.query_params.get("db", "").strip()
    after = request.query_params.get("after") or None
    if db == AUTH_DB:
        return console.render("error.html", request, session, title="Not here", status_code=404,
                              reason=f"database {AUTH_DB!r} is not shown in the console")
    sections: list[dict[str, Any]] = []
    databases: list[str] = []
    error = None
    try:
        if q:
            sections, databases = await run_in_threadpool(_search, console.app.store, q, db, after)
        else:
            databases = await run_in_threadpool(_databases, console.app.store)
    except LedgerError as exc:
        error = exc.reason
    title = f"Search: {q}" if q else "Search"
    return console.render("search.html", request, session, title=title, q=q, db=db, databases=databases, sections=sections,
                          error=error, status_code=400 if error else 200)
