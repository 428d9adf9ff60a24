"""The mention builds page of the console (``BOT.pages``): requests by status with their
author, text, skip reason or build log, page link and reply permalink."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ledger import Pages

from .machine import DB

PAGE_SIZE = 50
KIND = "mention"


def mention_pages(pages: Pages) -> list[Route]:
    """The mention builds page's route."""

    @pages.page
    async def mentions_page(request: Request) -> Response:
        """Mention builds by status."""
        session = await pages.session(request)
        machine = pages.machine_for(DB, {"kind": KIND})
        states = list(machine.states) if machine else []

        def read() -> tuple[dict[str, int], list[dict[str, Any]], str | None, str]:
            counts = {c.status: c.n for c in pages.store.counts(DB) if c.kind == KIND}
            status = request.query_params.get("status") or next((s for s in states if counts.get(s)), states[0] if states else "")
            found = pages.store.query(DB, "status", status, PAGE_SIZE, request.query_params.get("after") or None)
            return counts, [d for d in found.docs if d.get("kind") == KIND], found.next, status

        counts, docs, nxt, status = await pages.run(read)
        next_url = f"/console/mentions?status={quote(status, safe='/')}&after={quote(nxt, safe='/')}" if nxt else None
        return pages.render("mentions.html", request, session, title="Mention builds", statuses=states, status=status,  # type: ignore[no-any-return]
                            counts=counts, docs=docs, next_url=next_url)

    return [Route("/console/mentions", mentions_page, methods=["GET"])]


__all__ = ["mention_pages"]
