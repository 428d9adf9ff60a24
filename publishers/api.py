"""The publishing routes (``PUBLISHERS.api``): ``POST /v1/publish`` queues a post for one network as the
authenticated person, exactly as ``skyhub publish ig|threads|bsky`` does (``/v1/posts``, a post for
several networks, its review, edits and the import: ``publishers.api_posts``); ``POST /v1/media``
uploads an image for a Bluesky post (the bytes, never a path); ``GET /v1/publish`` lists queued
posts a page at a time, with what the tick does next. The hub mounts them behind its gate.

Errors come from the one tree: an invalid post is 422 with one sentence per problem (nothing is
written), the same slug with different content 409.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from ledger import Invalid, Ledger, Web

from . import media
from .images import MIME, sniff
from .listing import next_step, page
from .queue import submit
from .validate import BSKY_IMAGE_BYTES, UPLOAD_TYPES

Platform = Literal["ig", "threads", "bsky"]


class UploadIn(BaseModel):
    """An image uploaded with ``POST /v1/media`` (Bluesky only): what that call answered."""

    model_config = ConfigDict(extra="forbid")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=1)
    type: str
    chunks: list[str] = Field(max_length=64)
    name: str = Field("", max_length=200)


class ImageIn(BaseModel):
    """One image: a public https URL (Instagram and Threads fetch it: a JPEG), or for Bluesky an
    upload from ``POST /v1/media``; and its alt text."""

    model_config = ConfigDict(extra="forbid")
    url: str | None = Field(None, max_length=2048)
    upload: UploadIn | None = None
    alt: str = Field("", max_length=5000)


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


class Uploaded(BaseModel):
    upload: dict[str, Any] = Field(description="Give this as an image's upload in POST /v1/publish")


class PublishPage(BaseModel):
    docs: list[dict[str, Any]] = Field(description="Publish requests, each with nextStep")
    next: str | None


def publish_router(web: Web) -> APIRouter:
    """``POST /v1/publish``, ``GET /v1/publish`` and ``POST /v1/media`` over the hub's store."""
    router = APIRouter(tags=["publish"])
    principal = web.principal

    @router.post("/v1/publish", response_model=Queued)
    async def queue_post(body: PublishIn = Body(...), who: Any = Depends(principal)) -> Queued:
        def write() -> tuple[dict[str, Any], bool]:
            return submit(Ledger(web.store, who.actor), web.settings, platform=body.platform, account=body.account, slug=body.slug,
                          caption=body.caption, images=[i.model_dump(exclude_none=True) for i in body.images], at=body.at,
                          reply_to=body.replyTo)

        doc, queued = await web.run(write)
        return Queued(id=doc["_id"], queued=queued, status=doc["status"])

    @router.post("/v1/media", response_model=Uploaded, openapi_extra={"requestBody": {
        "required": True, "content": {t: {"schema": {"type": "string", "format": "binary"}} for t in UPLOAD_TYPES}}})
    async def upload_image(request: Request, who: Any = Depends(principal)) -> Uploaded:
        """Upload an image for a Bluesky post (the request's body is the file, at most 1,000,000 bytes); give
        the answer's ``upload`` as an image of ``POST /v1/publish``. The same bytes twice are one upload."""
        data = await request.body()
        kind = sniff(data)[0]
        if not data or kind is None:
            raise Invalid("the body must be a JPEG, PNG, GIF or WebP image")
        if len(data) > BSKY_IMAGE_BYTES:
            raise Invalid(f"the image is {len(data):,} bytes; a Bluesky image is at most {BSKY_IMAGE_BYTES:,} bytes")
        name = request.headers.get("x-file-name", "")[:200].replace("/", "_").replace("\\", "_")
        upload = await web.run(media.store, Ledger(web.store, who.actor), data, name=name, mime=MIME[kind])
        return Uploaded(upload=upload)

    @router.get("/v1/publish", response_model=PublishPage)
    async def list_posts(
        platform: Platform | None = Query(None),
        status: str | None = Query(None, description="pending, items-created, carousel-created, done, error, skipped, cancelled"),
        limit: int = Query(100, ge=1, le=1000),
        after: str | None = Query(None, description="The next cursor of the previous page"),
        who: Any = Depends(principal),
    ) -> PublishPage:
        found = await web.run(page, web.store, platform=platform, status=status, limit=limit, after=after)
        return PublishPage(docs=[{**d, "nextStep": next_step(d)} for d in found.docs], next=found.next)

    from .api_posts import posts_router  # a post for several networks, its review and edits, the import

    router.include_router(posts_router(web))
    return router


__all__ = ["publish_router"]
