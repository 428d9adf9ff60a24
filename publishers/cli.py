"""skyhub publish ...: queue posts (one network: ``ig|threads|bsky``; several: ``post``, see
``publishers.cli_posts``), list them by time, look at one, retry or cancel.

Every bad input is one sentence naming the field and the limit, exit 2, before anything is
written or sent. Locally the commands write the ledger; with ``--hub`` they go through
``POST /v1/publish``, ``/v1/posts`` and the documents API.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, cast

import click

from ledger import Conflict, Env, LedgerError, NotFound, Usage
from ledger.text import iso, table, whole

from . import media
from .cli_posts import commands
from .errors import ContentProblem, PostInvalid
from .listing import by_time, excerpt, next_step, time_ms
from .machine import DB, KIND, PUBLISH
from .posts import cancel_post, get_post, list_posts, variant_view
from .queue import cancel, request_id, resolve, retry, submit
from .validate import PLATFORMS, is_local, parse_at, warnings

if TYPE_CHECKING:
    from .imaging import Picture


@click.group("publish")
def publish_group() -> None:
    """Queue posts to Instagram, Threads and Bluesky; review, edit, list, show, retry and cancel them.

    Example: skyhub publish post --to ig --to bsky:shop.bsky.social --image https://cdn.example.org/a.jpg --alt "The box" --caption "It's here"
    """


def _queue_command(platform: str) -> click.Command:
    name = PLATFORMS[platform]

    @click.command(platform, help=(
        f"Queue {'an' if name[0] in 'AEIOU' else 'a'} {name} post: images with alt text, a caption, optionally a time.\n\n"
        f"Example: skyhub publish {platform} --slug launch --image https://cdn.example.org/a.jpg --alt \"The box\" "
        f"--caption \"It's here\" --at 2026-12-01T09:00:00+01:00"
    ))
    @click.option("--slug", required=True, help="A name for this post, unique per account (the request id is PLATFORM:ACCOUNT:SLUG).")
    @click.option("--image", "images", multiple=True, metavar="URL", help="An image (repeat for a carousel); "
                  + ("a public https JPEG URL." if platform != "bsky" else
                     "a public https URL, or a file on this machine (its bytes are uploaded with the post)."))
    @click.option("--alt", "alts", multiple=True, metavar="TEXT", help="Alt text of the image before it (repeat, in the same order).")
    @click.option("--caption", default="", help="The post's words.")
    @click.option("--at", "at", metavar="TIME", help="Publish no sooner than this, with its time zone: 2026-12-01T09:00:00+01:00.")
    @click.option("--account", help=f"The {name} account (default: publish.accounts.{platform} from the settings).")
    @click.option("--reply-to", hidden=platform != "bsky", metavar="AT-URI", help="Reply to this Bluesky post.")
    @click.pass_obj
    def command(env: Env, slug: str, images: tuple[str, ...], alts: tuple[str, ...], caption: str, at: str | None,
                account: str | None, reply_to: str | None) -> None:
        if len(alts) > len(images):
            raise Usage(f"{len(alts)} --alt for {len(images)} --image: give each image's alt text right after it")
        if reply_to and platform != "bsky":
            raise Usage("--reply-to is for Bluesky posts")
        ledger = env.ledger()
        # every file read, upright and without EXIF (GPS), before anything is written
        files = {url: _read(url) for url in images if platform == "bsky" and is_local(url)}
        if env.remote:  # the hub's defaults and rules decide: its account, its image hosts
            account = account or None
        else:
            from .queue import default_account

            try:
                account = default_account(platform, account, env.section("publish"))
            except PostInvalid:
                raise Usage(f"no account: pass --account, or set publish.accounts.{platform} "
                            f"(SKYHUB_PUBLISH__ACCOUNTS__{platform.upper()})") from None
        pairs: list[dict[str, Any]] = []
        notes: list[str] = []
        for i, url in enumerate(images):
            alt = alts[i] if i < len(alts) else ""
            if url in files:  # the bytes travel with the post, never the path
                picture = files[url]
                pairs.append({"upload": media.store(ledger, picture.data, name=os.path.basename(url), mime=picture.mime),
                              "alt": alt})
                notes += picture.notes
            else:
                pairs.append({"url": url, "alt": alt})
        try:
            if env.remote:
                from .remote import publish_queue

                fields = {"platform": platform, "account": account, "slug": slug, "caption": caption, "images": pairs, "at": at,
                          "replyTo": reply_to}
                out = publish_queue(cast(Any, env.store), {k: v for k, v in fields.items() if v is not None})
            else:
                doc, queued = submit(ledger, env, platform=platform, account=account, slug=slug, caption=caption, images=pairs,
                                     at=at, reply_to=reply_to)
                out = {"id": doc["_id"], "queued": queued, "status": doc["status"], "rev": doc["_rev"], "warnings": warnings(doc)}
        except LedgerError as exc:
            worded = cli_words(exc.reason)
            if worded != exc.reason and exc.code in (PostInvalid.code, Conflict.code):
                raise (PostInvalid if exc.code == PostInvalid.code else Conflict)(worded) from None
            raise
        click.echo(json.dumps(out))
        if not out["queued"]:
            click.echo(f"skyhub: {out['id']} was already queued with the same content; nothing new was written", err=True)
        for sentence in [*notes, *out.get("warnings", [])]:
            click.echo(f"skyhub: {sentence}", err=True)

    return command


# The sentences are shared by every door and name no flag; the CLI says which of its options is the fix.
CLI_HINTS = (
    ("needs alt text", lambda s: f"{s} (give it with --alt right after its --image)"),
    ("to post a file from your machine, upload it first",
     lambda s: s.replace("upload it first", "give it to `skyhub publish bsky --image FILE`, which uploads it")),
    ("choose another slug", lambda s: s.replace("choose another slug", "choose another --slug")),
    ("check the images and retry the post", lambda s: f"{s} (`skyhub publish retry ID`)"),
    ("say which of them it became", lambda s: f"{s} (`skyhub publish resolve ID --media MEDIA_ID`)"),
)


def cli_words(reason: str) -> str:
    """A refusal's sentences as the CLI says them: each one's fix named by its option."""
    out = []
    for sentence in reason.split("; "):
        for marker, word in CLI_HINTS:
            if marker in sentence:
                sentence = word(sentence)
        out.append(sentence)
    return "; ".join(out)


def _read(path: str) -> Picture:
    """A Bluesky image from this machine, upright and without its metadata (``media.clean``),
    refused here in one sentence when it cannot be an image."""
    from pathlib import Path

    from .images import sniff

    file = Path(path).expanduser()
    if not file.is_file():
        raise Usage(f"image {path} is not a file here (give a file on this machine, or a public https URL)")
    size = file.stat().st_size
    if size > media.MAX_BYTES:
        raise Usage(f"image {path} is {size:,} bytes; the most the hub takes is {media.MAX_BYTES:,} "
                    "(Bluesky's copy is scaled to fit its limit)")
    data = file.read_bytes()[:media.MAX_BYTES + 1]
    if sniff(data)[0] is None:
        raise Usage(f"image {path} is not a JPEG, PNG, GIF or WebP image")
    try:
        return media.clean(data, name=os.path.basename(path))
    except ContentProblem as exc:
        raise Usage(exc.reason) from None


for _platform in PLATFORMS:
    publish_group.add_command(_queue_command(_platform))
for _command in commands(_read):
    publish_group.add_command(_command)


def _window(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    when = parse_at(value if "T" in value else f"{value}T00:00:00+00:00")
    if when is None:
        raise Usage(f"--{name} must be a date (2026-12-01, UTC) or a time with its zone, got {value[:40]!r}")
    return when


@publish_group.command("ls")
@click.option("--platform", type=click.Choice(list(PLATFORMS)), help="Only this platform.")
@click.option("--status", type=click.Choice(list(PUBLISH.states)), help="Only this status.")
@click.option("--from", "since", metavar="DATE|TIME", help="Only posts whose time is at or after this (a UTC date, or a time with its zone).")
@click.option("--to", "until", metavar="DATE|TIME", help="Only posts whose time is before this.")
@click.option("--posts", "by_post", is_flag=True, help="One row (JSON: one object with its variants) per post instead of per network.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=200, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="JSON output (an array) instead of a table.")
@click.pass_obj
def publish_ls(env: Env, platform: str | None, status: str | None, since: str | None, until: str | None, by_post: bool,
               limit: int, as_json: bool) -> None:
    """List posts by time (when they go out, then when they were written): status, caption, next step, and the permalink or the last error.

    Example: skyhub publish ls --from 2026-12-01 --to 2026-12-08
    """
    lo, hi = _window(since, "from"), _window(until, "to")
    if by_post:
        if env.remote:
            from .remote import posts_list

            params = {"status": status, "platform": platform, "from": since, "to": until, "limit": min(limit, 1000)}
            found = posts_list(cast(Any, env.store), {k: v for k, v in params.items() if v is not None})
        else:
            found = list_posts(env.store, status=status, platform=platform, since_ms=lo, until_ms=hi, limit=limit)
        if as_json:
            click.echo(json.dumps(found, ensure_ascii=False))
            return
        click.echo(table(["time", "post", "status", "networks", "caption"], [
            [p["time"] or "", p["id"], p["status"], " ".join(v["_id"].rsplit(":", 1)[0] for v in p["variants"]), p["caption"]]
            for p in found]))
        return
    docs = by_time(env.store, platform=platform, status=status, since_ms=lo, until_ms=hi, limit=limit)
    if as_json:
        click.echo(json.dumps([variant_view(d) for d in docs], ensure_ascii=False))
        return
    click.echo(table(["time", "id", "status", "caption", "attempts", "next step", "permalink / last error"], [  # nothing cut but the caption
        [iso(time_ms(d)) if time_ms(d) else "", d["_id"], str(d.get("status")), excerpt(d.get("caption", d.get("text")), 40),
         str(d.get("attempts") or 0), whole(next_step(d)), d.get("permalink") or whole(cli_words(str(d["lastError"])) if d.get("lastError") else None)]
        for d in docs
    ]))


def _get(env: Env, request: str) -> dict[str, Any]:
    try:
        doc = env.store.get(DB, request)
    except NotFound:
        raise NotFound(f"no queued post {request!r} (ids look like ig:ACCOUNT:SLUG; see `skyhub publish ls`)") from None
    if doc.get("kind") != KIND:
        raise NotFound(f"{request!r} is not a queued post")
    return doc


@publish_group.command("show")
@click.argument("request", metavar="ID")
@click.pass_obj
def publish_show(env: Env, request: str) -> None:
    """One post as JSON: a request with its steps (every revision) and errors, or by its slug every variant's.

    For a post's slug: the post (status, time, review, comments), its variants and each one's steps.

    Example: skyhub publish show ig:17841400000000000:launch
    """
    if ":" not in request:
        post = get_post(env.store, request)
        post["steps"] = {v["_id"]: _steps(env, v["_id"]) for v in post["variants"]}
        click.echo(json.dumps(post, ensure_ascii=False))
        return
    doc = _get(env, request)
    click.echo(json.dumps({"request": doc, "nextStep": next_step(doc), "steps": _steps(env, request)}, ensure_ascii=False))


def _steps(env: Env, request: str) -> list[dict[str, Any]]:
    return [
        {"seq": c.seq, "at": c.at, "actor": c.actor, "status": c.doc.get("status"),
         **{k: c.doc[k] for k in ("intent", "lastError", "held", "notBefore", "review") if c.doc.get(k) is not None}}
        for c in env.store.history(DB, request)
    ]


def _moved(env: Env, request: str, status: str, out: dict[str, Any]) -> None:
    click.echo(json.dumps({"id": request, "status": status, "rev": out["_rev"]}))


@publish_group.command("retry")
@click.argument("request", metavar="ID")
@click.pass_obj
def publish_retry(env: Env, request: str) -> None:
    """Put a post that ended in error back in the queue (it starts over with fresh attempts).

    Example: skyhub publish retry ig:17841400000000000:launch
    """
    _moved(env, request, "pending", retry(env.ledger(), request))


@publish_group.command("cancel")
@click.argument("request", metavar="ID")
@click.pass_obj
def publish_cancel(env: Env, request: str) -> None:
    """Cancel a post that has not been published (a draft, in review, approved or pending): a post's slug cancels each of its networks.

    Example: skyhub publish cancel ig:17841400000000000:launch
    """
    if ":" in request:
        _moved(env, request, "cancelled", cancel(env.ledger(), request))
        return
    if env.remote:
        from .remote import post_act

        click.echo(json.dumps(post_act(cast(Any, env.store), request, "cancel")))
        return
    ledger = env.ledger()
    click.echo(json.dumps(cancel_post(ledger, request, now_ms=ledger.now())))


@publish_group.command("resolve")
@click.argument("request", metavar="ID")
@click.option("--media", "media_id", required=True, metavar="MEDIA_ID", help="The candidate media this post became.")
@click.pass_obj
def publish_resolve(env: Env, request: str, media_id: str) -> None:
    """Say which media a post that needs a person became (`publish show ID` lists its candidates).

    A publish that went live without a clear answer is matched to the account's recent media by
    its caption; when another unresolved post has the same caption, a person chooses.

    Example: skyhub publish resolve ig:17841400000000000:launch --media 17890000000000001
    """
    _moved(env, request, "done", resolve(env.ledger(), request, media_id))


__all__ = ["next_step", "publish_group", "request_id"]
