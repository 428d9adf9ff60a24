"""The publishing endpoints: ``POST /v1/publish`` queues a post as the authenticated person,
exactly as ``skyhub publish ig|threads|bsky`` does; ``GET /v1/publish`` lists queued posts a
page at a time, with what the tick does next. ``hub/api.py`` mounts them::

    api.include_router(publish_router(app))

Errors come from the one tree: an invalid post is 422 with one sentence per problem (nothing is
written), the same slug with different content 409.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from ledger import Ledger
from publishers.errors import PostInvalid
from publishers.listing import next_step, page
from publishers.queue import new_request, queue

from .app import App
from .auth import Principal, Unauthorized
from .gate import PRINCIPAL

Platform = Literal["ig", "threads", "bsky"]


class ImageIn(BaseModel):
    """One image: a public https URL (Instagram and Threads fetch it: a JPEG), and its alt text."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(max_length=2048)
    alt: str = ""


class PublishIn(BaseModel):
    """A post to queue: the fields of ``skyhub publish ig|threads|bsky``."""

    model_config = ConfigDict(extra="forbid")
    platform: Platform
    slug: str = Field(description="A name for this post, unique per account: the id is PLATFORM:ACCOUNT:SLUG")
    account: str | None = Field(None, description="The account (default: publish.accounts.PLATFORM on the hub)")
    caption: str = ""
    images: list[ImageIn] = Field(default_factory=list, max_length=50)
    at: str | None = Field(None, description="Publish no sooner than this ISO 8601 time, with its offset")
    replyTo: str | None = Field(None, description="Bluesky only: the at:// URI of the post to reply to")


class Queued(BaseModel):
    id: str
    queued: bool = Field(description="False when the same post was already queued (nothing new was written)")
    status: str


class PublishPage(BaseModel):
    docs: list[dict[str, Any]] = Field(description="Publish requests, each with nextStep")
    next: str | None


def principal_dependency(app: App) -> Callable[..., Awaitable[Principal]]:
    """The authenticated person or device, as every endpoint of ``hub/api.py`` gets it: the
    gate (``hub/gate.py``) checked the credential before any body was read."""

    async def principal(request: Request) -> Principal:
        who = request.scope.get(PRINCIPAL)
        if who is None:  # the gate lets no such request through; this is the second lock
            raise Unauthorized("no credential: send 'Authorization: Bearer <token>' or a signed device request")
        return who  # type: ignore[no-any-return]

    return principal


def publish_router(app: App) -> APIRouter:
    """``POST /v1/publish`` and ``GET /v1/publish`` over ``app``'s store."""
    router = APIRouter(tags=["publish"])
    principal = principal_dependency(app)

    @router.post("/v1/publish", response_model=Queued)
    def queue_post(body: PublishIn = Body(...), who: Principal = Depends(principal)) -> Queued:
        section = app.settings.section("publish")
        account = body.account or section.accounts.get(body.platform)
        if not account:
            raise PostInvalid(f"no account: give account, or set publish.accounts.{body.platform} on the hub")
        request = new_request(body.platform, account=account, slug=body.slug, caption=body.caption,
                              images=[i.model_dump() for i in body.images], at=body.at, reply_to=body.replyTo,
                              now_ms=app.store.clock.now_ms())
        doc, queued = queue(Ledger(app.store, who.actor), request, image_hosts=list(section.image_hosts) or None, local_files=False)
        return Queued(id=doc["_id"], queued=queued, status=doc["status"])

    @router.get("/v1/publish", response_model=PublishPage)
    def list_posts(
        platform: Platform | None = Query(None),
        status: str | None = Query(None, description="pending, items-created, carousel-created, done, error, skipped, cancelled"),
        limit: int = Query(100, ge=1, le=1000),
        after: str | None = Query(None, description="The next cursor of the previous page"),
        who: Principal = Depends(principal),
    ) -> PublishPage:
        found = page(app.store, platform=platform, status=status, limit=limit, after=after)
        return PublishPage(docs=[{**d, "nextStep": next_step(d)} for d in found.docs], next=found.next)

    return router


__all__ = ["principal_dependency", "publish_router"]
