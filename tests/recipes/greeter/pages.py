"""The greeter's console page: its greetings, and a form that sends one as the signed-in person."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ledger import LedgerError, Pages

from .product import DB


def greeter_pages(pages: Pages) -> list[Route]:
    @pages.page
    async def greet_page(request: Request) -> Response:
        session = await pages.session(request)
        docs = await pages.run(lambda: pages.store.query(DB, "status", "sent", 50).docs)
        return pages.render("greet.html", request, session, title="Greetings", docs=docs)

    @pages.page
    async def greet(request: Request) -> Response:
        session = await pages.session(request)
        text = (await pages.form(request, session)).get("text", "")
        try:
            await pages.run(pages.ledger(session.actor).put, DB, {"kind": "greeting", "status": "sent", "text": text})
        except LedgerError as exc:
            return pages.error(request, session, exc.status, exc.reason)
        return pages.done("/console/greet", "greeting sent")

    return [Route("/console/greet", greet_page, methods=["GET"]), Route("/console/greet", greet, methods=["POST"])]
