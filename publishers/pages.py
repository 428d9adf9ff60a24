"""The publishing pages of the console (``PUBLISHERS.pages``): the form that queues a post, the
queue by time (``listing.by_time``) by status and platform, with caption excerpts (each row with its first image's thumbnail and its warnings),
Retry, Cancel, the choice of media for a post that needs a person, and the thumbnails of posts'
images (``/console/publish/thumbnail``, see ``publish_thumbnail``). Every write goes through the
same path as the CLI and the API (``publishers.queue``), as the signed-in person, so the machine
decides what the page may do."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ledger import Conflict, Forbidden, LedgerError, Machine, NotFound, Pages

from .compose import compose_pages
from .errors import PostInvalid
from .listing import by_time, excerpt, next_step, time_ms
from .machine import DB, KIND
from .queue import cancel, resolve, retry, submit
from .thumbnails import SIZES, Thumbnails, fallback, thumbnail_url
from .validate import PLATFORMS, warnings
from .webform import PublishForm, field_for

PAGE_SIZE = 50
MOVES = {("error", "pending"): "retry", (None, "cancelled"): "cancel"}  # the person edges of the machine these pages offer


def _verb(status: Any, dst: str) -> str | None:
    """The page's verb for a person edge from ``status`` to ``dst`` (a draft queued is not a retry)."""
    return MOVES.get((status, dst)) or MOVES.get((None, dst))


def _q(text: str) -> str:
    return quote(text, safe="/")



def doc_images(db: str, doc: dict[str, Any]) -> dict[str, list[dict[str, str]]] | None:
    """The document page's thumbnails of a post's images (``Product.doc_images``): image ``n`` of ``images``
    through ``/console/publish/thumbnail`` (made by the hub, from the guarded fetcher or the upload's chunks).
    None for any other document."""
    found = doc.get("images")
    if db != DB or doc.get("kind") != KIND or not isinstance(found, list) or not found:
        return None
    return {"images": [{"src": thumbnail_url(str(doc["_id"]), n, SIZES[1]), "alt": str(image.get("alt") or "") if isinstance(image, dict) else "",
                        "name": f"image {n}"} for n, image in enumerate(found[:50], start=1)]}


def _first_image(doc: dict[str, Any]) -> dict[str, str] | None:
    """The queue row's thumbnail: its address and the image's alt text (None for a post without images)."""
    found = doc.get("images")
    if not isinstance(found, list) or not found or not isinstance(found[0], dict):
        return None
    return {"src": thumbnail_url(str(doc["_id"])), "alt": str(found[0].get("alt") or "")}


def doc_actions(db: str, doc: dict[str, Any], actor: str, machine: Machine) -> list[tuple[str, str, str]] | None:
    """The moves a person may make on a post's page: Retry, Cancel, and one choice per candidate
    media of a post that needs a person; None for documents that are not posts."""
    if db != DB or doc.get("kind") != KIND:
        return None
    status = doc.get("status")
    out = []
    for edge in machine.edges:
        if status in edge.src and edge.dst != status and edge.allows(actor):
            verb = _verb(status, edge.dst)
            if verb:
                out.append((edge.dst, verb.capitalize(), f"/console/publish/{verb}"))
            elif status == "needs-person" and edge.dst == "done":
                for c in doc.get("candidates") or []:
                    if isinstance(c, dict) and c.get("mediaId"):
                        label = f"It became {c['mediaId']}" + (f" ({c['timestamp']})" if c.get("timestamp") else "")
                        out.append((str(c["mediaId"]), label, "/console/publish/resolve"))
    return out


def publish_pages(pages: Pages) -> list[Route]:
    """The publishing pages' routes."""

    async def view(request: Request, session: Any, form: PublishForm, errors: dict[str, list[str]], status_code: int = 200) -> Response:
        status = request.query_params.get("status", "")
        platform = request.query_params.get("platform", "")
        after = request.query_params.get("after") or None
        if platform not in PLATFORMS:
            platform = ""
        machine = pages.machine_for(DB, {"kind": KIND})

        def read() -> tuple[list[dict[str, Any]], str | None, dict[str, int]]:  # by time (then written, then id), 50 a page
            found = by_time(pages.store, platform=platform or None, status=status or None)
            start = int(after) if after and after.isdigit() else 0
            counts = {c.status: c.n for c in pages.store.counts(DB) if c.kind == KIND}
            more = str(start + PAGE_SIZE) if len(found) > start + PAGE_SIZE else None
            return found[start:start + PAGE_SIZE], more, counts

        docs, nxt, counts = await pages.run(read)
        rows = []
        for d in docs:
            actions = []
            if machine is not None:
                for edge in machine.edges:
                    if d.get("status") in edge.src and edge.dst != d.get("status") and edge.allows(session.actor):
                        verb = _verb(d.get("status"), edge.dst)
                        if verb:
                            actions.append((verb, verb.capitalize()))
            rows.append({**d, "nextStep": next_step(d), "actions": actions, "thumb": _first_image(d), "warnings": warnings(d),
                         "timeMs": time_ms(d), "excerpt": excerpt(d.get("caption", d.get("text")), 80)})
        query = "&".join(f"{k}={_q(v)}" for k, v in (("status", status), ("platform", platform)) if v)
        next_url = f"/console/publish?{query}{'&' if query else ''}after={_q(nxt)}" if nxt else None
        section = pages.settings.section("publish")
        return pages.render(  # type: ignore[no-any-return]
            "publish.html", request, session, title="Publishing", form=form, errors=errors, anchors=form.anchors(errors),
            platforms=PLATFORMS, defaults=dict(section.accounts), statuses=list(machine.states) if machine else [],
            status=status, platform=platform, docs=rows, counts=counts, next_url=next_url, image_rows=20,
            shown_rows=max(4, len(form.images)), status_code=status_code,
        )

    @pages.page
    async def publish_page(request: Request) -> Response:
        """The publishing form and the queue."""
        session = await pages.session(request)
        return await view(request, session, PublishForm.empty(), {})

    @pages.page
    async def publish_submit(request: Request) -> Response:
        """Queue a post as the signed-in person; on a mistake, each sentence next to its field and nothing written."""
        session = await pages.session(request)
        form = PublishForm.read(await pages.form(request, session))
        db = pages.ledger(session.actor)
        errors = form.errors(db.now())  # what only a form has (the time in the manager's zone, the image rows)

        def send() -> tuple[dict[str, Any], bool]:  # with the form's own mistakes, only checked: every sentence at once
            return submit(db, pages.settings, platform=form.platform, account=form.account or None, slug=form.slug,
                          caption=form.caption, images=form.images, at=form.at_iso, reply_to=form.reply_to or None,
                          dry_run=bool(errors))

        try:
            doc, queued = await pages.run(send)
            if errors:
                return await view(request, session, form, errors, 422)
        except PostInvalid as exc:  # every problem at once, each shown next to its field
            for sentence in exc.reason.split("; "):
                errors.setdefault(field_for(sentence), []).append(sentence)
            return await view(request, session, form, errors, 422)
        except Conflict as exc:
            errors.setdefault("slug", []).append(exc.reason)
            return await view(request, session, form, errors, 409)
        except Forbidden as exc:
            errors.setdefault("platform", []).append(exc.reason)
            return await view(request, session, form, errors, 403)
        done = (f"{doc['_id']} queued ({doc['status']})" if queued
                else f"{doc['_id']} was already queued with the same content; nothing new was written")
        said = warnings(doc)
        return pages.done("/console/publish", "; ".join([done, *(f"warning: {w}" for w in said)]))  # type: ignore[no-any-return]

    def move(verb: str) -> Any:
        move_fn = retry if verb == "retry" else cancel

        @pages.page
        async def act(request: Request) -> Response:
            session = await pages.session(request)
            fields = await pages.form(request, session)
            doc_id = fields.get("id", "")
            if verb == "cancel" and fields.get("confirm") != "yes":  # a cancel ends the post: asked first, as on every page
                return pages.error(request, session, 400, f"cancelling {doc_id} needs confirming: go back, tick the "  # type: ignore[no-any-return]
                                   "\u201cYes\u201d box next to the button, then press it again")
            try:
                await pages.run(move_fn, pages.ledger(session.actor), doc_id)
            except LedgerError as exc:
                return pages.error(request, session, exc.status, exc.reason)  # type: ignore[no-any-return]
            return pages.done("/console/publish", f"{doc_id}: {'back in the queue' if verb == 'retry' else 'cancelled'}")  # type: ignore[no-any-return]

        return act

    @pages.page
    async def publish_resolve(request: Request) -> Response:
        """A person says which candidate media a post that needs a person became."""
        session = await pages.session(request)
        fields = await pages.form(request, session)
        doc_id, media_id = fields.get("id", ""), fields.get("to", "")
        try:
            await pages.run(resolve, pages.ledger(session.actor), doc_id, media_id)
        except LedgerError as exc:
            return pages.error(request, session, exc.status, exc.reason)  # type: ignore[no-any-return]
        return pages.done("/console/publish", f"{doc_id}: recorded as media {media_id}")  # type: ignore[no-any-return]

    thumbs = Thumbnails(int(pages.settings.section("publish").thumbnail_cache_bytes))

    @pages.page
    async def publish_thumbnail(request: Request) -> Response:
        """``GET /console/publish/thumbnail?id=POST_ID&n=1&px=96&fit=cover``: a small image of a post's image.

        - ``id``: the post's document id (``PLATFORM:ACCOUNT:SLUG``), percent-encoded;
        - ``n``: which image, from 1 (default 1);
        - ``px``: the thumbnail's side in pixels, one of 96, 192, 384 (default 96: a 48 px
          image on a screen of density 2);
        - ``fit``: ``cover`` (default: exactly ``px`` x ``px``, the image's centre) or
          ``contain`` (the whole image within ``px`` x ``px``, its aspect ratio kept).

        Answers a JPEG (a PNG when the image is transparent), upright and without metadata,
        ``Cache-Control: private, max-age=300``. The hub makes it: a URL image through the guarded
        fetcher (so a private address is refused, whatever the post says), an uploaded one from
        its chunks; kept in memory (``publishers.thumbnails``). When the image cannot be
        fetched or read, a grey "no preview" SVG with status 502 and the reason, one sentence,
        in the ``X-Thumbnail-Problem`` header (404 for no such post or image; 400 for a bad
        parameter, in words). Like every console page it needs a signed-in person."""
        session = await pages.session(request)
        query = request.query_params
        doc_id, n_text, px_text, fit = query.get("id", ""), query.get("n", "1"), query.get("px", str(SIZES[0])), query.get("fit", "cover")
        if not (n_text.isdigit() and 0 < int(n_text) <= 50) or px_text not in {str(s) for s in SIZES} or fit not in ("cover", "contain"):
            return PlainTextResponse(f"a thumbnail is ?id=POST&n=1 to 50&px={'|'.join(map(str, SIZES))}&fit=cover|contain",
                                     status_code=400)
        n, px = int(n_text), int(px_text)

        def make() -> Any:
            try:
                doc = pages.store.get(DB, doc_id)
            except NotFound:
                return None
            if doc.get("kind") != KIND:
                return None
            return thumbs.of(pages.context("publish", session.actor), doc, n, px, crop=fit == "cover")

        thumb = await pages.run(make)
        if thumb is None:
            thumb = fallback(px, f"there is no post {doc_id!r} with an image {n}", 0)
            status = 404
        else:
            status = 200 if thumb.ok else 502
        headers = {"Cache-Control": "private, max-age=300" if thumb.ok else "private, max-age=60",
                   "X-Content-Type-Options": "nosniff"}
        if not thumb.ok:
            headers["X-Thumbnail-Problem"] = "".join(c if " " <= c <= "~" else "?" for c in thumb.reason)[:500]
        return Response(thumb.data, status_code=status, media_type=thumb.mime, headers=headers)

    from .calendar_pages import calendar_pages  # the calendar and the zone form: their own module
    from .import_page import import_pages  # the console's import of a content calendar

    return [
        *calendar_pages(pages),
        *import_pages(pages),
        Route("/console/publish/thumbnail", publish_thumbnail, methods=["GET"]),
        Route("/console/publish", publish_page, methods=["GET"]),
        Route("/console/publish", publish_submit, methods=["POST"]),
        Route("/console/publish/retry", move("retry"), methods=["POST"]),
        Route("/console/publish/cancel", move("cancel"), methods=["POST"]),
        Route("/console/publish/resolve", publish_resolve, methods=["POST"]),
        *compose_pages(pages),  # the compose page and the review queue (publishers/compose.py)
    ]


__all__ = ["doc_actions", "publish_pages", "thumbnail_url"]
