"""``GET /health``: no credential needed; 503 when something is down, and the body says what."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ..health import HealthProbe


def health_router(probe: HealthProbe, streams: Callable[[], dict[str, Any]]) -> APIRouter:
    """``/health`` from ``probe`` (within its budget), with the change streams' numbers (``streams()``)."""
    router = APIRouter()

    @router.get("/health", tags=["health"], responses={503: {"description": "Something is down; the body says what"}})
    async def health() -> JSONResponse:
        report = await probe()
        report["streams"] = streams()
        return JSONResponse(report, status_code=200 if report["ok"] else 503)

    return router
