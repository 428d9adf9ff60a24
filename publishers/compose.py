"""The compose page and the review queue of the console (mounted by ``publishers.pages``).

    GET  /console/publish/compose            a new post: shared caption, images and alt texts, first comment
                                             and time, and per network (Instagram, Threads, Bluesky) an
                                             account picked from the credentials and what differs
    GET  /console/publish/compose/{post}     the same form filled with a post's content (by its slug), to edit it
                                             while no step has been taken (the machine decides)
    POST /console/publish/compose            action: draft (save), submit (for review), approve, queue
    GET  /console/publish/review             posts in review: each variant's preview, the review, the comments
    POST /console/publish/review/approve     approve a post (approvers and admins)
    POST /console/publish/review/reject      send it back to draft with a reason (approvers and admins)
    POST /console/publish/review/comment     a comment on the post (who, when, text)

Every write goes through the functions the CLI and the API call (``queue.submit_post``,
``posts.*``), as the signed-in person, so the machine judges each one with the person's role: the
buttons a person sees follow the role, and a button forged into the page meets the same refusal.
The counters and previews are drawn by the server (each network's own limits, the numbers
``publishers.validate`` checks) and kept live by console.js; without JS they follow each save.
Images are previewed only through the guarded thumbnail route, once a post is saved: a
third-party URL is never loaded into the manager's browser."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ledger import Conflict, LedgerError, NotFound, Pages
from platforms.richtext import graphemes

from .errors import PostInvalid
from .machine import APPROVING, started
from .posts import approve, comment, get_post, list_posts, queue_post, reject, submit_for_review, variants_of
from .queue import PostIn, VariantIn, may_queue, submit_post
from .thumbnails import thumbnail_url
from .validate import (
    BSKY_GRAPHEMES,
    COMMENT_LIMITS,
    IG_CAPTION,
    IG_HASHTAGS,
    PLATFORMS,
    SLUG,
    THREADS_TEXT,
)
from .webform import field_for

IMAGE_ROWS = 10
SHOWN_ROWS = 3
LIMITS = {"ig": IG_CAPTION, "threads": THREADS_TEXT, "bsky": BSKY_GRAPHEMES}  # characters (Bluesky: graphemes)
HASHTAGS = {"ig": IG_HASHTAGS}  # the networks that limit hashtags
# Where each network's feed cuts a caption: Instagram shows its first 125 characters, then "more";
# Threads and Bluesky show the whole post (their limit: a longer one is refused).
CUT = {"ig": 125, "threads": THREADS_TEXT, "bsky": BSKY_GRAPHEMES}
CREDENTIALS = {"ig": ("instagram", "facebook"), "threads": ("threads",), "bsky": ("bluesky",)}
ACTIONS = {"draft": "Save draft", "submit": "Submit for review", "approve": "Approve", "queue": "Queue now"}
_HASHTAG = re.compile(r"(?:^|\s)#\w", re.UNICODE)


def count(platform: str, text: str) -> int:
    """A caption's length as ``platform`` counts it (``validate.problems``: Bluesky graphemes, else characters)."""
    return graphemes(text) if platform == "bsky" else len(text)


def hashtags(text: str) -> int:
    """The hashtags of a caption, as ``validate.problems`` counts them."""
    return len(_HASHTAG.findall(text))


def cut(platform: str, text: str) -> tuple[str, bool]:
    """The caption as the network's feed shows it before "more" (its first ``CUT`` characters), and whether it was cut."""
    limit = CUT[platform]
    chars = list(text)  # code points; a grapheme split at the edge of a preview shows as one character less
    return ("".join(chars[:limit]), True) if len(chars) > limit else (text, False)


def local_iso(at: str, tz: str) -> tuple[str | None, str | None]:
    """A ``datetime-local`` value in zone ``tz`` as ISO 8601 with its offset; (None, sentence) when it is not one."""
    if not at:
        return None, None
    try:
        zone = ZoneInfo(tz or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return None, f"time zone {tz[:60]!r} is not known: use a name like Europe/Paris, America/New_York or UTC"
    try:
        local = datetime.fromisoformat(at)
    except ValueError:
        return None, f"the time must be a date and a time, like 2026-12-01T09:00, got {at[:60]!r}"
    if local.tzinfo is not None:
        return local.isoformat(), None
    return local.replace(tzinfo=zone, microsecond=0).isoformat(), None


def to_local(iso_at: str | None, tz: str) -> str:
    """An ISO 8601 time as the form's ``datetime-local`` value in zone ``tz`` ("" for none)."""
    if not iso_at:
        return ""
    try:
        when = datetime.fromisoformat(iso_at.replace("Z", "+00:00"))
        zone = ZoneInfo(tz or "UTC")
    except (ValueError, ZoneInfoNotFoundError):
        return ""
    return when.astimezone(zone).replace(tzinfo=None).isoformat(timespec="minutes")


@dataclass
class Network:
    """One network's part of the form: whether the post goes there, to which account, and what differs."""

    platform: str
    on: bool = False
    account: str = ""
    caption: str = ""  # "" : the shared caption
    first_comment: str = ""  # "" : the shared first comment
    no_comment: bool = False  # no first comment on this network, whatever the shared one
    at: str = ""  # "" : the shared time
    variant: str | None = None  # the saved variant's id (its thumbnail), when editing


@dataclass
class ComposeForm:
    """What the manager typed (echoed back on an error: nothing is lost) and what it means."""

    post: str = ""  # the slug of the post being edited ("" : a new post)
    slug: str = ""
    caption: str = ""
    images: list[dict[str, str]] = field(default_factory=list)
    first_comment: str = ""
    at: str = ""
    tz: str = "UTC"
    networks: dict[str, Network] = field(default_factory=lambda: {p: Network(p) for p in PLATFORMS})
    orphan_alts: list[int] = field(default_factory=list)
    keep_images: bool = False  # the saved post's images cannot be shown as URL rows (uploads, or per network): kept as they are

    @classmethod
    def read(cls, fields: dict[str, str]) -> ComposeForm:
        """The form as POSTed (image rows without a URL are left out; their alt text is an error)."""
        images: list[dict[str, str]] = []
        orphans: list[int] = []
        for n in range(1, IMAGE_ROWS + 1):
            url, alt = fields.get(f"image-{n}", "").strip(), fields.get(f"alt-{n}", "").strip()
            if url:
                images.append({"url": url, "alt": alt})
            elif alt:
                orphans.append(n)

        def text(name: str) -> str:
            return fields.get(name, "").replace("\r\n", "\n")

        networks = {p: Network(p, on=bool(fields.get(f"to-{p}")), account=fields.get(f"account-{p}", "").strip(),
                               caption=text(f"caption-{p}"), first_comment=text(f"comment-{p}").strip(),
                               no_comment=bool(fields.get(f"nocomment-{p}")),
                               at=fields.get(f"at-{p}", "").strip(), variant=None) for p in PLATFORMS}
        return cls(post=fields.get("post", "").strip(), slug=fields.get("slug", "").strip(), caption=text("caption"),
                   images=images, first_comment=text("firstComment").strip(), at=fields.get("at", "").strip(),
                   tz=fields.get("tz", "").strip() or "UTC", networks=networks, orphan_alts=orphans,
                   keep_images=bool(fields.get("keep-images")) and bool(fields.get("post", "").strip()))

    @classmethod
    def of_post(cls, variants: Sequence[dict[str, Any]], tz: str = "UTC") -> ComposeForm:
        """A saved post's content in the form: the first variant's is the shared content, each variant's own
        caption, first comment and time where they differ."""
        first = variants[0]
        shared_caption = str(first.get("caption", first.get("text", "")) or "")
        shared_comment = str(first.get("firstComment") or "")
        shared_at = first.get("at")
        images = [{"url": str(i.get("url", "")), "alt": str(i.get("alt") or "")} for i in first.get("images") or []
                  if isinstance(i, dict) and i.get("url")]
        every = [v.get("images") or [] for v in variants]
        keep = any(e != every[0] for e in every) or any(not (isinstance(i, dict) and i.get("url")) for i in every[0])
        form = cls(post=str(first.get("post") or first.get("slug")), slug=str(first.get("post") or first.get("slug")),
                   caption=shared_caption, images=[] if keep else images, first_comment=shared_comment,
                   at=to_local(shared_at, tz), tz=tz, keep_images=keep)
        for v in variants:
            p = str(v.get("platform"))
            if p not in PLATFORMS:
                continue
            caption = str(v.get("caption", v.get("text", "")) or "")
            comment_ = str(v.get("firstComment") or "")
            form.networks[p] = Network(p, on=True, account=str(v.get("account")),
                                       caption=caption if caption != shared_caption else "",
                                       first_comment=comment_ if comment_ != shared_comment else "",
                                       no_comment=bool(shared_comment) and not comment_,
                                       at=to_local(v.get("at"), tz) if v.get("at") != shared_at else "", variant=str(v["_id"]))
        return form

    def caption_for(self, platform: str) -> str:
        """The caption a network gets: its own, else the shared one."""
        return self.networks[platform].caption or self.caption

    def errors(self, accounts: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, list[str]], PostIn | None]:
        """What the form itself gets wrong (no network, an account not offered, a time, alt text without an
        image), one sentence per field, and the post it means (None when there is nothing to send)."""
        out: dict[str, list[str]] = {}
        chosen = [n for n in self.networks.values() if n.on]
        if not chosen:
            out["networks"] = ["pick at least one network: Instagram, Threads or Bluesky"]
        for row in self.orphan_alts:
            out.setdefault(f"image-{row}", []).append(f"image {row} has alt text but no URL: give the image's URL, or clear its alt text")
        if self.slug and not SLUG.match(self.slug):
            out["slug"] = [f"the name must be 1-100 letters, digits, '.', '_' or '-' (got {self.slug[:60]!r})"]
        at, problem = local_iso(self.at, self.tz)
        if problem:
            out["tz" if problem.startswith("time zone") else "at"] = [problem]
        variants = []
        for n in chosen:
            offered = {a["account"] for a in accounts.get(n.platform, [])}
            if not n.account:
                out[f"account-{n.platform}"] = [f"pick the {PLATFORMS[n.platform]} account this post goes to"]
            elif n.account not in offered:
                out[f"account-{n.platform}"] = [f"{n.account[:80]!r} is not one of this hub's {PLATFORMS[n.platform]} accounts: "
                                                "pick one from the list, or paste its credential on the credentials page"]
            own_at, problem = local_iso(n.at, self.tz)
            if problem and "tz" not in out:
                out[f"at-{n.platform}"] = [problem]
            variants.append(VariantIn(platform=n.platform, account=n.account or None, caption=n.caption or None,
                                      first_comment="" if n.no_comment else n.first_comment or None, at=own_at))
        if not variants:
            return out, None
        return out, PostIn(variants=variants, caption=self.caption, images=[dict(i) for i in self.images],
                           first_comment=self.first_comment or None, at=at, slug=self.post or self.slug or None, draft=True)


def keeping_images(post: PostIn, variants: Sequence[dict[str, Any]]) -> PostIn:
    """``post`` with each network's saved images, as they are (a post whose images the form cannot show as URL rows)."""
    saved = {str(v.get("platform")): [dict(i) for i in v.get("images") or []] for v in variants}
    return PostIn(variants=[VariantIn(platform=v.platform, account=v.account, caption=v.caption, first_comment=v.first_comment,
                                      at=v.at, reply_to=v.reply_to, images=saved.get(v.platform, [])) for v in post.variants],
                  caption=post.caption, images=[], first_comment=post.first_comment, at=post.at, slug=post.slug, draft=post.draft)


def place(sentence: str, form: ComposeForm) -> str:
    """The field a sentence of ``submit_post`` belongs next to: ``PLATFORM:ACCOUNT: ...`` names a network."""
    head, sep, rest = sentence.partition(": ")
    platform = head.split(":", 1)[0]
    if not sep or platform not in PLATFORMS:
        return {"slug": "slug", "caption": "caption"}.get(field_for(sentence), field_for(sentence))
    net = form.networks[platform]
    where = field_for(rest)
    if rest.startswith(("no account", "account")):
        return f"account-{platform}"
    if "first comment" in rest:
        return f"comment-{platform}" if net.first_comment else "firstComment"
    if where == "caption":
        return f"caption-{platform}" if net.caption else "caption"
    if where == "at":
        return f"at-{platform}" if net.at else "at"
    if where == "slug":
        return "slug"
    return where if where.startswith(("image-", "alt-", "images")) else f"caption-{platform}"


def accounts_of(pages: Pages, actor: str) -> dict[str, list[dict[str, Any]]]:
    """Per network, the accounts a post may go to: every credential of the network (its status: ok, needs
    re-auth, or the vault's word) and the hub's default account (``publish.accounts``), missing when the vault
    has no credential for it. Metadata only: no secret is read."""
    from vault import Vault

    def no_key() -> Any:
        raise LookupError("the compose page reads metadata only")

    creds = Vault(pages.ledger(actor), no_key).list()
    defaults = dict(getattr(pages.settings.section("publish"), "accounts", None) or {})
    out: dict[str, list[dict[str, Any]]] = {}
    for p, kinds in CREDENTIALS.items():
        found: dict[str, dict[str, Any]] = {}
        for c in creds:
            if c.get("platform") in kinds and c.get("account"):
                dead = bool(c.get("needsReauth")) or c.get("status") == "needs-reauth"
                status = "needs re-auth" if dead else "ok" if c.get("status") in (None, "ok", "verified") else str(c["status"])
                account = str(c["account"])
                if account not in found or found[account]["status"] != "ok":
                    found[account] = {"account": account, "status": status, "fix": {"platform": kinds[0], "account": account}}
        default = defaults.get(p)
        if default and str(default) not in found:
            found[str(default)] = {"account": str(default), "status": "missing", "fix": {"platform": kinds[0], "account": str(default)}}
        for a in found.values():
            a["default"] = a["account"] == default
        out[p] = sorted(found.values(), key=lambda a: (not a["default"], a["account"]))
    return out


def previews(form: ComposeForm) -> dict[str, dict[str, Any]]:
    """Per network, what the preview and the counters show now (the page redraws them as the manager types)."""

    out = {}
    for p in PLATFORMS:
        caption = form.caption_for(p)
        shown, was_cut = cut(p, caption)
        net = form.networks[p]
        image = form.images[0] if form.images else None
        out[p] = {"name": PLATFORMS[p], "count": count(p, caption), "limit": LIMITS[p], "tags": hashtags(caption),
                  "tag_limit": HASHTAGS.get(p), "shown": shown, "cut": was_cut, "cut_at": CUT[p],
                  "comment": "" if net.no_comment else net.first_comment or form.first_comment, "comment_limit": COMMENT_LIMITS[p],
                  "thumb": thumbnail_url(net.variant, px=192) if (image or form.keep_images) and net.variant else None,
                  "alt": image["alt"] if image else None, "has_image": image is not None}
    return out


def review_view(post: dict[str, Any]) -> dict[str, Any]:
    """A post in the review queue: its variants, each with its preview (caption cut, first image, alt text)."""

    rows = []
    for v in post["variants"]:
        p = str(v.get("platform"))
        caption = str(v.get("caption", v.get("text", "")) or "")
        shown, was_cut = cut(p, caption) if p in PLATFORMS else (caption, False)
        images = [i for i in v.get("images") or [] if isinstance(i, dict)]
        rows.append({"id": v["_id"], "platform": p, "name": PLATFORMS.get(p, p), "account": v.get("account"),
                     "status": v.get("status"), "shown": shown, "cut": was_cut, "time": v.get("time"),
                     "comment": v.get("firstComment"), "images": len(images),
                     "thumb": thumbnail_url(str(v["_id"]), px=192) if images else None,
                     "alt": str(images[0].get("alt") or "") if images else None})
    return {**post, "rows": rows}


def compose_pages(pages: Pages) -> list[Route]:
    """The compose and review pages' routes."""

    def role_of(actor: str) -> tuple[bool, bool]:
        """(whether the person approves, whether their posts may go straight to the queue)."""
        db = pages.ledger(actor)
        approves = actor == "admin" or db.role() in APPROVING
        return approves, may_queue(db, pages.settings)

    async def show(request: Request, session: Any, form: ComposeForm, errors: dict[str, list[str]], status_code: int = 200,
                   fixed: str | None = None) -> Response:
        def read() -> tuple[dict[str, list[dict[str, Any]]], bool, bool]:
            return (accounts_of(pages, session.actor), *role_of(session.actor))

        accounts, approves, queues = await pages.run(read)
        actions = [] if fixed else ["draft", "submit"] + (["approve"] if approves else []) + (["queue"] if queues else [])
        return pages.render(  # type: ignore[no-any-return]
            "compose.html", request, session, title="Edit a post" if form.post else "Compose a post", form=form, errors=errors,
            platforms=PLATFORMS, accounts=accounts, previews=previews(form), actions=[(a, ACTIONS[a]) for a in actions],
            image_rows=IMAGE_ROWS, shown_rows=max(SHOWN_ROWS, len(form.images) + 1), fixed=fixed, hashtag_limits=HASHTAGS,
            status_code=status_code)

    @pages.page
    async def compose_page(request: Request) -> Response:
        """A new post, or (``/compose/{post}``) a saved one to edit; its times in ``?tz=``, else the person's zone."""
        session = await pages.session(request)
        slug = request.path_params.get("post")
        tz = request.query_params.get("tz") or session.zone
        if not slug:
            return await show(request, session, ComposeForm(tz=tz), {})
        try:
            variants = await pages.run(variants_of, pages.store, slug)
        except NotFound as exc:
            return pages.error(request, session, 404, exc.reason)  # type: ignore[no-any-return]
        fixed = next((f"{v['_id']}: its content is fixed ({why}); cancel it and duplicate it to post something else"
                      for v in variants if (why := started(v)) is not None), None)
        if fixed is None and not variants[0].get("post"):
            fixed = (f"{variants[0]['_id']} was queued for one network on the Publishing page, and this page edits posts "
                     "composed here: cancel it there and compose it here to change it")
        return await show(request, session, ComposeForm.of_post(variants, tz), {}, fixed=fixed)

    @pages.page
    async def compose_submit(request: Request) -> Response:
        """Save, submit, approve or queue the post as the signed-in person; on a mistake, one sentence next to each
        field, the form back as it was typed, nothing written."""
        session = await pages.session(request)
        fields = await pages.form(request, session)
        action = fields.get("action", "draft")
        form = ComposeForm.read(fields)
        accounts = await pages.run(accounts_of, pages, session.actor)
        errors, post = form.errors(accounts)
        if action not in ACTIONS:
            errors.setdefault("networks", []).append(f"{action[:40]!r} is not an action: save, submit, approve or queue")
        db = pages.ledger(session.actor)
        if post is not None and form.keep_images:
            try:
                post = keeping_images(post, await pages.run(variants_of, pages.store, form.post))
            except NotFound:
                pass

        def check() -> None:  # every sentence at once: the form's, then the post's (dry: nothing written)
            if post is not None:
                submit_post(db, pages.settings, post, now_ms=db.now(), dry_run=True)

        try:
            await pages.run(check)
        except PostInvalid as exc:
            for sentence in exc.reason.split("; "):
                where = place(sentence, form)
                if where not in errors:  # one sentence per field; the summary lists them all
                    errors[where] = [sentence]
        except Conflict as exc:
            errors.setdefault("slug", []).append(exc.reason)
        if errors or post is None:
            return await show(request, session, form, errors, 422)

        def send() -> tuple[str, str]:
            assert post is not None
            done = submit_post(db, pages.settings, post, now_ms=db.now())
            target, now = done.id, db.now()
            statuses = {v["status"] for v in done.variants}
            if action == "submit" and "draft" in statuses:
                submit_for_review(db, target, now_ms=now)
            elif action == "approve" and statuses & {"draft", "in-review"}:
                approve(db, target, now_ms=now)
            elif action == "queue" and statuses & {"draft", "in-review"}:
                queue_post(db, target, now_ms=now)
            return target, get_post(db, target)["status"]

        try:
            target, status = await pages.run(send)
        except PostInvalid as exc:
            for sentence in exc.reason.split("; "):
                errors.setdefault(place(sentence, form), []).append(sentence)
            return await show(request, session, form, errors, 422)
        except LedgerError as exc:  # the machine's refusal (a role, a race): said at the top, the form kept
            errors.setdefault("networks", []).append(exc.reason)
            return await show(request, session, form, errors, exc.status)
        said = {"draft": "saved as a draft", "submit": "submitted for review", "approve": "approved", "queue": "queued"}[action]
        return pages.done(f"/console/publish/compose/{target}", f"{target}: {said} ({status})")  # type: ignore[no-any-return]

    async def review(request: Request, session: Any, errors: dict[str, dict[str, str]], status_code: int = 200,
                     typed: dict[str, dict[str, str]] | None = None) -> Response:
        def read() -> tuple[list[dict[str, Any]], bool]:
            return list_posts(pages.store, status="in-review", limit=200), role_of(session.actor)[0]

        found, approves = await pages.run(read)
        return pages.render(  # type: ignore[no-any-return]
            "review.html", request, session, title="Review", posts=[review_view(p) for p in found], approves=approves,
            errors=errors, typed=typed or {}, status_code=status_code)

    @pages.page
    async def review_page(request: Request) -> Response:
        """Posts waiting for an approver, each with its variants' previews, its review and its comments."""
        session = await pages.session(request)
        return await review(request, session, {})

    def review_act(verb: str) -> Any:
        @pages.page
        async def act(request: Request) -> Response:
            session = await pages.session(request)
            fields = await pages.form(request, session)
            target, text = fields.get("id", "").strip(), fields.get("text", "").strip()
            db = pages.ledger(session.actor)
            if verb == "reject" and not text:
                return await review(request, session, {target: {"reason": "a rejection needs a reason: say what to change"}}, 422)
            if verb == "comment" and not text:
                return await review(request, session, {target: {"comment": "a comment needs text"}}, 422)

            def run() -> dict[str, Any]:
                now = db.now()
                if verb == "approve":
                    return approve(db, target, now_ms=now)
                if verb == "reject":
                    return reject(db, target, text, now_ms=now)
                return comment(db, target, text, now_ms=now)

            try:
                await pages.run(run)
            except LedgerError as exc:  # the machine's refusal: an editor approving, a post moved meanwhile
                field_name = "comment" if verb == "comment" else "reason" if verb == "reject" else "approve"
                return await review(request, session, {target: {field_name: exc.reason}}, exc.status,
                                    typed={target: {field_name: text}})
            said = {"approve": "approved", "reject": "sent back to draft", "comment": "comment added"}[verb]
            return pages.done("/console/publish/review", f"{target}: {said}")  # type: ignore[no-any-return]

        return act

    return [
        Route("/console/publish/compose", compose_page, methods=["GET"]),
        Route("/console/publish/compose", compose_submit, methods=["POST"]),
        Route("/console/publish/compose/{post}", compose_page, methods=["GET"]),
        Route("/console/publish/review", review_page, methods=["GET"]),
        Route("/console/publish/review/approve", review_act("approve"), methods=["POST"]),
        Route("/console/publish/review/reject", review_act("reject"), methods=["POST"]),
        Route("/console/publish/review/comment", review_act("comment"), methods=["POST"]),
    ]


__all__ = ["ComposeForm", "compose_pages", "count", "cut", "hashtags"]
