"""``GET /v1/machines``: every machine the hub's rules declare, as data or as Mermaid diagrams."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse

from ledger import Rules

from ..auth import Principal
from .deps import Run, pooled, principal


def machines_router(rules: Rules, run: Run) -> APIRouter:
    """The machines of ``rules``."""
    router = APIRouter()

    @router.get("/v1/machines", tags=["machines"])
    @pooled(run)
    def machines(
        format: Literal["json", "mermaid"] = Query("json"), who: Principal = Depends(principal),  # noqa: A002
    ) -> Any:
        ms = rules.machines
        if format == "mermaid":
            text = "\n\n".join(f"%% {m.name}\n{m.mermaid()}" for m in ms)
            return JSONResponse({"mermaid": text})
        return [m.describe() for m in ms]

    return router
