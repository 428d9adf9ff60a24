"""The publishing pages of the console (``PUBLISHERS.pages``): the form that queues a post, the
queue by status and platform, Retry, Cancel, and the choice of media for a post that needs a
person. Every write goes through the same path as the CLI and the API (``publishers.queue``),
as the signed-in person, so the machine decides what the page may do."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ledger import Conflict, Forbidden, Ledger, LedgerError, Machine, Pages

from .errors import PostInvalid
from .listing import next_step, page
from .machine import DB, KIND
from .queue import cancel, resolve, retry, submit
from .validate import PLATFORMS
from .webform import PublishForm, field_for

PAGE_SIZE = 50
MOVES = {("error", "pending"): "retry", (None, "cancelled"): "cancel"}  # the person edges of the machine these pages offer


def _verb(status: Any, dst: str) -> str | None:
    """The page's verb for a person edge from ``status`` to ``dst`` (a draft queued is not a retry)."""
    return MOVES.get((status, dst)) or MOVES.get((None, dst))


def _q(text: str) -> str:
    return quote(text, safe="/")


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

        def read() -> tuple[list[dict[str, Any]], str | None, dict[str, int]]:
            found = page(pages.store, platform=platform or None, status=status or None, limit=PAGE_SIZE, after=after)
            counts = {c.status: c.n for c in pages.store.counts(DB) if c.kind == KIND}
            return found.docs, found.next, counts

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
            rows.append({**d, "nextStep": next_step(d), "actions": actions})
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
        db = Ledger(pages.store, session.actor)
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
        return pages.done("/console/publish", done)  # type: ignore[no-any-return]

    def move(verb: str) -> Any:
        move_fn = retry if verb == "retry" else cancel

        @pages.page
        async def act(request: Request) -> Response:
            session = await pages.session(request)
            doc_id = (await pages.form(request, session)).get("id", "")
            try:
                await pages.run(move_fn, Ledger(pages.store, session.actor), doc_id)
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
            await pages.run(resolve, Ledger(pages.store, session.actor), doc_id, media_id)
        except LedgerError as exc:
            return pages.error(request, session, exc.status, exc.reason)  # type: ignore[no-any-return]
        return pages.done("/console/publish", f"{doc_id}: recorded as media {media_id}")  # type: ignore[no-any-return]

    return [
        Route("/console/publish", publish_page, methods=["GET"]),
        Route("/console/publish", publish_submit, methods=["POST"]),
        Route("/console/publish/retry", move("retry"), methods=["POST"]),
        Route("/console/publish/cancel", move("cancel"), methods=["POST"]),
        Route("/console/publish/resolve", publish_resolve, methods=["POST"]),
    ]


__all__ = ["doc_actions", "publish_pages"]
