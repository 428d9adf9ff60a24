"""The console's import (added to ``publish_pages``): a content calendar, CSV or JSON, read by the
same importer as ``skyhub publish import`` (``publishers.importer``). ``GET /console/publish/import``
is the form: choose a file (the page's script reads it into the text box) or paste it. ``POST``
with ``action=check`` is the dry run, every row with its sentence and nothing written; with
``action=import`` each valid row is queued as the signed-in person (rows are independent and
idempotent: a row already imported is ``unchanged``), and nothing is written for an invalid row.
The form is the console's (CSRF, at most ``hub.console.web.MAX_FORM`` bytes: about 250 KB of text)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ledger import LedgerError, Pages

from .errors import ImportInvalid
from .importer import import_rows, read_rows


def import_pages(pages: Pages) -> list[Route]:
    """The import form's routes."""

    def render(request: Request, session: Any, *, content: str = "", name: str = "", report: Any = None,
               said: str = "", status_code: int = 200) -> Response:
        return pages.render("import.html", request, session, title="Import posts", content=content,  # type: ignore[no-any-return]
                            filename=name, report=report, said=said, status_code=status_code)

    @pages.page
    async def import_page(request: Request) -> Response:
        """The import form."""
        session = await pages.session(request)
        return render(request, session)

    @pages.page
    async def import_submit(request: Request) -> Response:
        """Check (a dry run) or import a content calendar."""
        session = await pages.session(request)
        fields = await pages.form(request, session)
        content, name = fields.get("content", ""), fields.get("name", "")[:200]
        dry = fields.get("action") != "import"
        if not content.strip():
            return render(request, session, said="choose a CSV or JSON file, or paste one, first", status_code=422)
        db = pages.ledger(session.actor)
        try:
            rows = read_rows(content, name or None)
            report = await pages.run(lambda: import_rows(db, pages.settings, rows, dry_run=dry, now_ms=db.now()))
        except (ImportInvalid, LedgerError) as exc:
            return render(request, session, content=content, name=name, said=getattr(exc, "reason", str(exc)), status_code=422)
        return render(request, session, content=content, name=name, report=report, status_code=200)

    return [
        Route("/console/publish/import", import_page, methods=["GET"]),
        Route("/console/publish/import", import_submit, methods=["POST"]),
    ]


__all__ = ["import_pages"]
