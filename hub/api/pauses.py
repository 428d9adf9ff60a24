"""``/v1/pauses``: what is paused (a tick, a platform, an account; ``ledger/pause.py``), pausing and resuming,
as the credential's actor (the pause machine admits people of the admin role, and admin)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, Field

from ledger import Clock, Ledger, Store
from ledger.pause import parse_target, pause, paused, resume

from ..auth import Principal
from .deps import Run, pooled, principal


class PauseIn(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    target: str = Field(..., max_length=300, description="tick:NAME (or a tick's name), PLATFORM, or PLATFORM:ACCOUNT")
    reason: str | None = Field(None, max_length=500, description="Why, for whoever looks next")


class ResumeIn(BaseModel):  # noqa: D101
    target: str = Field(..., max_length=300, description="What was paused, as for a pause")


def pauses_router(store: Store, clock: Clock, ticks: Callable[[], Collection[str]], scopes: Mapping[str, str], run: Run) -> APIRouter:
    """Pauses of ``store``'s hub: its ``ticks`` (their names) and the products' pausable ``scopes``."""
    router = APIRouter()
    in_pool = pooled(run)

    @router.get("/v1/pauses", tags=["pauses"])
    @in_pool
    def listing(who: Principal = Depends(principal)) -> dict[str, Any]:
        return {"paused": list(paused(store).values()), "ticks": sorted(ticks()), "platforms": dict(scopes)}

    @router.post("/v1/pauses", tags=["pauses"])
    @in_pool
    def pause_one(body: PauseIn = Body(...), who: Principal = Depends(principal)) -> dict[str, Any]:
        return pause(Ledger(store, who.actor, clock), parse_target(body.target, ticks(), scopes), body.reason)

    @router.post("/v1/pauses/resume", tags=["pauses"])
    @in_pool
    def resume_one(body: ResumeIn = Body(...), who: Principal = Depends(principal)) -> dict[str, Any]:
        return resume(Ledger(store, who.actor, clock), parse_target(body.target, ticks(), scopes))

    return router
