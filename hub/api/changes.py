"""``/v1/changes``, ``/v1/head`` and ``/v1/changes/stream``: the change log, a page at a time or
as server-sent events. A change shows nothing of the ``auth`` database and none of the fields a
product redacts (``Product.redact``: the vault's sealed secrets, an image's bytes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from ledger import Change, Store

from ..auth import AUTH_DB, Principal
from ..stream import EventStream, Fanout, event
from .deps import Run, pooled, principal
from .models import ChangeOut
from .parsing import MAX_SEQ, parse_last_event_id


class ChangesPage(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    changes: list[ChangeOut]
    last: int


class Head(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    seq: int


class Shown:
    """What a change shows through the API: none of the auth database, none of the fields ``redact``
    names for its database."""

    def __init__(self, redact: Mapping[str, tuple[str, ...]]) -> None:
        self.redact = dict(redact)

    def visible(self, c: Change) -> dict[str, Any] | None:
        """The change as JSON, or None when it is not shown at all."""
        if c.db == AUTH_DB:
            return None
        item = c.as_dict()
        hidden = self.redact.get(c.db)
        if hidden:
            item["doc"] = {k: v for k, v in c.doc.items() if k not in hidden}
        return item

    def render(self, c: Change) -> bytes:
        """The change as a server-sent event (nothing when it is not shown)."""
        item = self.visible(c)
        return b"" if item is None else event(item, c.seq)


def changes_router(store: Store, fanout: Fanout, shown: Shown, run: Run) -> APIRouter:
    """The change log of ``store``, pages and the stream (``fanout``: one reader for every open stream)."""
    router = APIRouter()
    in_pool = pooled(run)

    @router.get("/v1/changes", tags=["changes"], response_model=ChangesPage)
    @in_pool
    def changes(
        since: int = Query(0, ge=0, le=MAX_SEQ), limit: int = Query(100, ge=1, le=1000),
        db: list[str] | None = Query(None, description="Only these databases (repeat the parameter for several)"),
        who: Principal = Depends(principal),
    ) -> ChangesPage:
        batch = store.changes(since, limit, db or None)
        items = [item for item in map(shown.visible, batch) if item is not None]
        return ChangesPage(changes=[ChangeOut(**c) for c in items], last=batch[-1].seq if batch else since)

    @router.get("/v1/head", tags=["changes"], response_model=Head)
    @in_pool
    def head(who: Principal = Depends(principal)) -> Head:
        return Head(seq=store.head_seq())

    @router.get(
        "/v1/changes/stream", tags=["changes"],
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}, "description": (
            "Server-sent events: `event: change` with the change as data and its sequence number as id; "
            "`event: error` with {error, reason} before the hub ends a stream (a client too slow to keep up, "
            "the hub stopping): reconnect with Last-Event-ID to resume. Comment lines keep quiet streams open."
        )}},
    )
    async def stream(
        since: int = Query(0, ge=0, le=MAX_SEQ, description="Start after this sequence number"),
        last_event_id: str | None = Header(
            None, description="The id of the last event received; takes precedence over since. Anything but a sequence number is refused (400)",
        ),
        who: Principal = Depends(principal),
    ) -> EventStream:
        start = parse_last_event_id(last_event_id)
        return EventStream(fanout, since if start is None else start)

    return router
