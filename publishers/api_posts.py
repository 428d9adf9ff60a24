"""The post routes (mounted with ``publishers.api``): a post for several networks, its review, its
edits, its first comment and the bulk import, as the authenticated person. Each route calls the
function the CLI and the console call (``publishers.queue``, ``publishers.posts``,
``publishers.importer``), so the machine judges every write with the person's role.

    POST   /v1/posts                      queue a post (variants; dryRun)          queue.submit_post
    GET    /v1/posts                      posts by time (status, platform, from, to) posts.list_posts
    GET    /v1/posts/{id}                 one post (or variant) and its variants  posts.get_post
    PATCH  /v1/posts/{id}                 edit its content                        posts.edit
    POST   /v1/posts/{id}/reschedule      move it                                 posts.reschedule
    POST   /v1/posts/{id}/submit|approve|reject|queue|cancel                      posts.*
    POST   /v1/posts/{id}/comments        comment on it                           posts.comment
    POST   /v1/posts/{id}/duplicate       a new draft with its content            posts.duplicate
    POST   /v1/posts/import               a CSV or JSON file (the body)           importer.import_rows

``{id}`` is a post's slug (every variant) or a variant's ``PLATFORM:ACCOUNT:SLUG`` (that one).
Times in answers are ISO 8601 UTC strings (``time``, ``review.at``, ``comments[].at``).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from ledger import Invalid, Ledger, Web

from . import importer, posts
from .queue import PostIn, VariantIn, submit_post
from .validate import parse_at

Platform = Literal["ig", "threads", "bsky"]


class ImageIn(BaseModel):
    """An image: a public https URL (Instagram and Threads fetch it), or for Bluesky an upload from ``POST /v1/media``; its alt text."""

    model_config = ConfigDict(extra="forbid")
    url: str | None = Field(None, max_length=2048)
    upload: dict[str, Any] | None = None
    alt: str = Field("", max_length=5000)


class VariantBody(BaseModel):
    """One network of a post; a field left out takes the post's shared value."""

    model_config = ConfigDict(extra="forbid")
    platform: Platform
    account: str | None = Field(None, description="The account (default: publish.accounts.PLATFORM on the hub)")
    caption: str | None = None
    images: list[ImageIn] | None = Field(None, max_length=50)
    firstComment: str | None = Field(None, description='This network\'s first comment ("" for none here)')
    at: str | None = Field(None, description="This network's time (ISO 8601 with its offset)")
    replyTo: str | None = Field(None, description="Bluesky only: the at:// URI of the post to reply to")


class PostBody(BaseModel):
    """A post for several networks: shared content and one variant per network."""

    model_config = ConfigDict(extra="forbid")
    variants: list[VariantBody] = Field(min_length=1, max_length=20)
    slug: str | None = Field(None, description="The post's name (made from the content when left out: the same content is the same post)")
    caption: str = ""
    images: list[ImageIn] = Field(default_factory=list, max_length=50)
    firstComment: str | None = None
    at: str | None = Field(None, description="Publish no sooner than this ISO 8601 time, with its offset")
    draft: bool = Field(False, description="Save as a draft instead of queueing")
    dryRun: bool = Field(False, description="Check and say what would happen; write nothing")

    def post(self) -> PostIn:
        """As ``queue.PostIn``."""
        return PostIn(
            variants=[VariantIn(platform=v.platform, account=v.account, caption=v.caption,
                                images=None if v.images is None else [i.model_dump(exclude_none=True) for i in v.images],
                                first_comment=v.firstComment, at=v.at, reply_to=v.replyTo) for v in self.variants],
            caption=self.caption, images=[i.model_dump(exclude_none=True) for i in self.images], first_comment=self.firstComment,
            at=self.at, slug=self.slug, draft=self.draft)


class EditBody(BaseModel):
    """A change of content; a field left out is unchanged."""

    model_config = ConfigDict(extra="forbid")
    caption: str | None = None
    captions: dict[Platform, str] | None = Field(None, description='Per network, after caption: {"ig": "..."}')
    images: list[ImageIn] | None = Field(None, max_length=50)
    firstComment: str | None = Field(None, description='"" removes it')
    at: str | None = None
    unschedule: bool = Field(False, description="Remove the time: the post goes as soon as it is queued")


class RescheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    at: str | None = Field(description="The new time (ISO 8601 with its offset); null: as soon as it is queued")


class RejectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(min_length=1, max_length=1000)


class CommentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=2000)


class DuplicateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slug: str | None = None
    at: str | None = None


class Posts(BaseModel):
    posts: list[dict[str, Any]] = Field(description="Posts sorted by time, each with its variants")


def _window(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    when = parse_at(value if "T" in value else f"{value}T00:00:00+00:00")
    if when is None:
        raise Invalid(f"{name} must be a date (2026-12-01, UTC) or a time with its offset, got {value[:40]!r}")
    return when


def posts_router(web: Web) -> APIRouter:
    """The routes of the module docstring."""
    router = APIRouter(tags=["posts"])
    principal = web.principal

    def db(who: Any) -> Ledger:
        return web.ledger(who.actor)

    @router.post("/v1/posts")
    async def queue_post(body: PostBody = Body(...), who: Any = Depends(principal)) -> dict[str, Any]:
        """Queue a post for several networks (or save it as a draft); answers the post's id and each variant's outcome."""
        ledger = db(who)
        done = await web.run(lambda: submit_post(ledger, web.settings, body.post(), now_ms=ledger.now(), dry_run=body.dryRun))
        return done.as_dict()  # type: ignore[no-any-return]

    @router.get("/v1/posts", response_model=Posts)
    async def list_posts(
        status: str | None = Query(None, description="Only variants in this status"),
        platform: Platform | None = Query(None),
        since: str | None = Query(None, alias="from", description="From this date (UTC) or time, inclusive"),
        until: str | None = Query(None, alias="to", description="To this date (UTC) or time, exclusive"),
        limit: int = Query(100, ge=1, le=1000),
        who: Any = Depends(principal),
    ) -> Posts:
        lo, hi = _window(since, "from"), _window(until, "to")
        found = await web.run(posts.list_posts, web.store, status=status, platform=platform, since_ms=lo, until_ms=hi, limit=limit)
        return Posts(posts=found)

    @router.post("/v1/posts/import")
    async def import_posts(request: Request, dryRun: bool = Query(False), who: Any = Depends(principal)) -> dict[str, Any]:  # noqa: N803
        """Import a content calendar: the body is the CSV or JSON file (columns in docs/guides/publishing.md)."""
        data = await request.body()
        kind = request.headers.get("content-type", "")
        ledger = db(who)

        def run() -> dict[str, Any]:
            rows = importer.read_rows(data, "import.json" if "json" in kind else None)
            return importer.import_rows(ledger, web.settings, rows, dry_run=dryRun, now_ms=ledger.now()).as_dict()

        return await web.run(run)  # type: ignore[no-any-return]

    @router.get("/v1/posts/{post_id}")
    async def get_post(post_id: str, who: Any = Depends(principal)) -> dict[str, Any]:
        return await web.run(posts.get_post, web.store, post_id)  # type: ignore[no-any-return]

    @router.patch("/v1/posts/{post_id}")
    async def edit_post(post_id: str, body: EditBody = Body(...), who: Any = Depends(principal)) -> dict[str, Any]:
        ledger = db(who)
        change = posts.Change(caption=body.caption, captions={str(k): v for k, v in (body.captions or {}).items()} or None, first_comment=body.firstComment, at=body.at,
                              unschedule=body.unschedule,
                              images=None if body.images is None else [i.model_dump(exclude_none=True) for i in body.images])
        return await web.run(lambda: posts.edit(ledger, web.settings, post_id, change, now_ms=ledger.now()))  # type: ignore[no-any-return]

    @router.post("/v1/posts/{post_id}/reschedule")
    async def reschedule(post_id: str, body: RescheduleBody = Body(...), who: Any = Depends(principal)) -> dict[str, Any]:
        ledger = db(who)
        return await web.run(lambda: posts.reschedule(ledger, web.settings, post_id, body.at, now_ms=ledger.now()))  # type: ignore[no-any-return]

    def act(verb: str, fn: Any) -> None:
        async def moved(post_id: str, who: Any = Depends(principal)) -> dict[str, Any]:
            ledger = db(who)
            return await web.run(lambda: fn(ledger, post_id, now_ms=ledger.now()))  # type: ignore[no-any-return]

        moved.__name__ = f"{verb}_post"
        router.post(f"/v1/posts/{{post_id}}/{verb}", summary=f"{verb.capitalize()} the post (each variant that can be)")(moved)

    act("submit", posts.submit_for_review)
    act("approve", posts.approve)
    act("queue", posts.queue_post)
    act("cancel", posts.cancel_post)

    @router.post("/v1/posts/{post_id}/reject")
    async def reject(post_id: str, body: RejectBody = Body(...), who: Any = Depends(principal)) -> dict[str, Any]:
        ledger = db(who)
        return await web.run(lambda: posts.reject(ledger, post_id, body.reason, now_ms=ledger.now()))  # type: ignore[no-any-return]

    @router.post("/v1/posts/{post_id}/comments")
    async def comment(post_id: str, body: CommentBody = Body(...), who: Any = Depends(principal)) -> dict[str, Any]:
        ledger = db(who)
        return await web.run(lambda: posts.comment(ledger, post_id, body.text, now_ms=ledger.now()))  # type: ignore[no-any-return]

    @router.post("/v1/posts/{post_id}/duplicate")
    async def duplicate(post_id: str, body: DuplicateBody = Body(...), who: Any = Depends(principal)) -> dict[str, Any]:
        ledger = db(who)
        done = await web.run(lambda: posts.duplicate(ledger, web.settings, post_id, slug=body.slug, at=body.at, now_ms=ledger.now()))
        return done.as_dict()  # type: ignore[no-any-return]

    return router


__all__ = ["posts_router"]
