"""The publishing routes (``PUBLISHERS.api``): ``POST /v1/publish`` queues a post for one network as the
authenticated person, exactly as ``skyhub publish ig|threads|bsky`` does, and answers its
``warnings`` (an image without alt text on Instagram or Threads); ``/v1/posts``, a post for several
networks, its review, edits and the import, are in ``publishers.api_posts``; ``POST /v1/media``
uploads an image for a Bluesky post (the bytes, never a path; upright and without EXIF before it is
stored); ``GET /v1/publish`` lists queued posts a page at a time, with what the tick does next.
The hub mounts them behind its gate (``POST /v1/media`` takes a binary body of up to
``media.MAX_BYTES``: ``PUBLISHERS.uploads``).

Errors come from the one tree: an invalid post is 422 with one sentence per problem (nothing is
written), the same slug with different content 409.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from ledger import Invalid, Web

from . import media
from .errors import ContentProblem
from .images import sniff
from .listing import next_step, page
from .queue import submit
from .validate import UPLOAD_TYPES, warnings

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
    warnings: list[str] = Field(default_factory=list, description="What the post is queued with but should not be "
                                "(an image without alt text on Instagram or Threads), one sentence each")


class Uploaded(BaseModel):
    upload: dict[str, Any] = Field(description="Give this as an image's upload in POST /v1/publish")
    warnings: list[str] = Field(default_factory=list, description="What was done to the image that you would want to "
                                "know (an animated GIF becomes its first frame), one sentence each")


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
            return submit(web.ledger(who.actor), web.settings, platform=body.platform, account=body.account, slug=body.slug,
                          caption=body.caption, images=[i.model_dump(exclude_none=True) for i in body.images], at=body.at,
                          reply_to=body.replyTo)

        doc, queued = await web.run(write)
        return Queued(id=doc["_id"], queued=queued, status=doc["status"], warnings=warnings(doc))

    @router.post("/v1/media", response_model=Uploaded, openapi_extra={"requestBody": {
        "required": True, "content": {t: {"schema": {"type": "string", "format": "binary"}} for t in UPLOAD_TYPES}}})
    async def upload_image(request: Request, who: Any = Depends(principal)) -> Uploaded:
        """Upload an image for a Bluesky post (the request's body is the file, at most 20,000,000 bytes; the
        ``X-File-Name`` header names it); give the answer's ``upload`` as an image of ``POST /v1/publish``.
        It is stored upright and without EXIF (GPS position included) or any other metadata; Bluesky's
        copy is scaled to fit its limit when the post is published. The same bytes twice are one upload."""
        data = await request.body()
        if not data or sniff(data)[0] is None:
            raise Invalid("the body must be a JPEG, PNG, GIF or WebP image")
        name = request.headers.get("x-file-name", "")[:200].replace("/", "_").replace("\\", "_")

        def take() -> tuple[dict[str, Any], tuple[str, ...]]:
            try:
                return media.take(web.ledger(who.actor), data, name=name)
            except ContentProblem as exc:  # the person's file: a 422 with its sentence, nothing written
                raise Invalid(exc.reason) from None

        upload, notes = await web.run(take)
        return Uploaded(upload=upload, warnings=list(notes))

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
