"""The greeter's HTTP route, behind the hub's gate."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from ledger import Web

from .product import DB


def greeter_router(web: Web) -> APIRouter:
    router = APIRouter(tags=["greeter"])

    @router.get("/v1/greetings")
    async def greetings(who: Any = Depends(web.principal)) -> list[str]:
        docs = await web.run(lambda: web.store.query(DB, "status", "sent", 50).docs)
        return [str(d.get("text")) for d in docs]

    return router
