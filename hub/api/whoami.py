"""``GET /v1/whoami``: who the credential acts as."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..auth import Principal
from .deps import Run, pooled, principal


class WhoAmI(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    actor: str
    credential: str


def whoami_router(run: Run) -> APIRouter:
    """The credential's actor and kind (``token:<id>`` or ``device:<name>``)."""
    router = APIRouter()

    @router.get("/v1/whoami", tags=["auth"], response_model=WhoAmI)
    @pooled(run)
    def whoami(who: Principal = Depends(principal)) -> WhoAmI:
        return WhoAmI(actor=who.actor, credential=who.credential)

    return router
