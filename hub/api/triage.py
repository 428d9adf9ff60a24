"""``GET /v1/errors``: the documents that wait for a person's retry, grouped by the fingerprint of their
error (``ledger.fingerprint``), each group with the filter that selects it for ``POST /v1/db/{db}/bulk``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Depends, Query

from ledger import Rules, Store
from ledger.fingerprint import error_groups

from ..auth import Principal
from .deps import Run, pooled, principal


def triage_router(store: Store, rules: Rules, private: Mapping[str, str], run: Run) -> APIRouter:
    """The error groups of ``store`` under ``rules`` (none of the ``private`` databases)."""
    router = APIRouter()

    @router.get("/v1/errors", tags=["operator"])
    @pooled(run)
    def errors(db: str | None = Query(None, pattern=r"^[a-z][a-z0-9_-]{0,63}$", description="Only this database"),
               who: Principal = Depends(principal)) -> list[dict[str, Any]]:
        return [g.as_dict() for g in error_groups(store, rules, db) if g.db not in private]

    return router
