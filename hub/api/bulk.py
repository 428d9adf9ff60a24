"""``POST /v1/db/{db}/bulk``: one move on every document a filter selects (``ledger.bulk``), as the
credential's person, with ``dry_run`` to see the count, a sample and the warnings first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field

from ledger import Clock, Forbidden, Ledger, Rules, Store
from ledger.bulk import Filter, bulk

from ..auth import AUTH_DB, Principal
from .deps import DB, Run, pooled, principal


class BulkIn(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    model_config = ConfigDict(extra="forbid")
    action: Literal["retry", "cancel", "dismiss"]
    status: str | None = Field(None, max_length=512, description="Only documents in this status")
    kind: str | None = Field(None, max_length=512, description="Only documents of this kind (the machine's type or kind)")
    field: str | None = Field(None, max_length=64, description="With key: only documents whose field equals key")
    key: str | None = Field(None, max_length=512)
    error: str | None = Field(None, max_length=512, description="Words of lastError, or a group's fp:... (GET /v1/errors)")
    dry_run: bool = Field(False, description="Write nothing; say what would happen")
    expect: str | None = Field(None, pattern="^[0-9a-f]{16}$", description=(
        "The digest a dry run answered: act only if the filter selects the same documents now; otherwise nothing "
        "is written and the answer says changed: true, with the new count, sample and digest"))


def bulk_router(store: Store, rules: Rules, private: Mapping[str, str], clock: Clock, run: Run) -> APIRouter:
    """Bulk actions on the documents of ``store`` through ``rules``' moves, but for ``auth`` and ``private`` databases."""
    router = APIRouter()

    @router.post("/v1/db/{db}/bulk", tags=["operator"])
    @pooled(run)
    def bulk_action(db: str = DB, body: BulkIn = Body(...), who: Principal = Depends(principal)) -> dict[str, Any]:
        if db == AUTH_DB or db in private:
            raise Forbidden(f"database {db!r} is not reachable through the API")
        flt = Filter(status=body.status, kind=body.kind, field=body.field, key=body.key, error=body.error)
        return bulk(Ledger(store, who.actor, clock), rules, db, body.action, flt, dry_run=body.dry_run, expect=body.expect).as_dict()

    return router
