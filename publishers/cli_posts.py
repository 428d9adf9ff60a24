"""skyhub publish post|submit|approve|reject|queue|comment|edit|reschedule|duplicate|import: a post for
several networks, its review and its edits, and the bulk import.

A thin layer: locally each command calls ``publishers.queue``/``publishers.posts``/``publishers.importer``
on the ledger as the command's actor; with ``--hub`` it calls the same functions' routes
(``publishers.api_posts``), so the hub's settings and the person's role decide. ``ID`` is a post's
slug (every variant) or a variant's ``PLATFORM:ACCOUNT:SLUG`` (that one). Output is JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from ledger import Env, Ledger, Usage

from . import media
from .errors import PostInvalid
from .validate import is_local

if TYPE_CHECKING:
    from .imaging import Picture

NETWORK_HELP = "A network: ig, threads or bsky, optionally with :ACCOUNT (ig:17841400000000000, bsky:shop.bsky.social); repeat."


def _ledger(env: Env) -> Ledger:
    return env.ledger()


def _hub(env: Env) -> Any:
    return cast(Any, env.store)


def _echo(out: dict[str, Any]) -> None:
    click.echo(json.dumps(out, ensure_ascii=False))


def _targets(values: tuple[str, ...]) -> list[tuple[str, str | None]]:
    from .queue import parse_target

    out = []
    for value in values:
        try:
            out.append(parse_target(value))
        except PostInvalid as exc:
            raise Usage(f"--to {exc.reason}") from None
    return out


Reader = Callable[[str], "Picture"]  # a file on this machine, upright and without EXIF; Usage when it cannot be a Bluesky image


def _images(read: Reader, ledger: Ledger, images: tuple[str, ...], alts: tuple[str, ...], *, bluesky: bool = True,
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The images as given (URLs, or paths: refused by Instagram's and Threads' rules), and as Bluesky takes
    them (a file on this machine uploaded, when the post goes to Bluesky: its bytes travel with it, never its path)."""
    if len(alts) > len(images):
        raise Usage(f"{len(alts)} --alt for {len(images)} --image: give each image's alt text right after it")
    files = {url: read(url) for url in images if bluesky and is_local(url)}  # read before anything is written
    given, bsky = [], []
    for i, url in enumerate(images):
        alt = alts[i] if i < len(alts) else ""
        given.append({"url": url, "alt": alt})
        if url in files:
            picture = files[url]
            bsky.append({"upload": media.store(ledger, picture.data, name=os.path.basename(url), mime=picture.mime), "alt": alt})
            for note in picture.notes:  # what was done to the file that its owner would want to know
                click.echo(f"skyhub: {note}", err=True)
        else:
            bsky.append({"url": url, "alt": alt})
    return given, bsky


def _when(at: str | None) -> str | None:
    return at.strip() if at else None


def _post_command(read: Reader) -> click.Command:
    @click.command("post")
    @click.option("--to", "to", multiple=True, required=True, metavar="NETWORK[:ACCOUNT]", help=NETWORK_HELP)
    @click.option("--caption", default="", help="The post's words, on every network.")
    @click.option("--caption-ig", help="The words on Instagram instead.")
    @click.option("--caption-threads", help="The words on Threads instead.")
    @click.option("--caption-bsky", help="The words on Bluesky instead.")
    @click.option("--image", "images", multiple=True, metavar="URL", help="An image (repeat for a carousel): a public https JPEG "
                  "URL; for Bluesky also a file on this machine (its bytes are uploaded with the post).")
    @click.option("--alt", "alts", multiple=True, metavar="TEXT", help="Alt text of the image before it (repeat, in the same order).")
    @click.option("--first-comment", metavar="TEXT", help="A first comment, posted once after the post on every network.")
    @click.option("--at", "at", metavar="TIME", help="Publish no sooner than this, with its time zone: 2026-12-01T09:00:00+01:00.")
    @click.option("--slug", help="A name for the post (made from its content when left out: the same content is the same post).")
    @click.option("--draft", is_flag=True, help="Save it as a draft (to submit for review, approve or queue later).")
    @click.option("--dry-run", is_flag=True, help="Check it and say what would happen; write nothing.")
    @click.pass_obj
    def post_command(env: Env, to: tuple[str, ...], caption: str, caption_ig: str | None, caption_threads: str | None,
                     caption_bsky: str | None, images: tuple[str, ...], alts: tuple[str, ...], first_comment: str | None,
                     at: str | None, slug: str | None, draft: bool, dry_run: bool) -> None:
        """Queue one post for several networks: shared words and images, per-network captions, a first comment.

        An editor's post waits for an approver when the hub requires review (publish.require_review).
        Queued again with the same content, it is the same post; under the same --slug with other
        content, it is updated while no step has been taken.

        Example: skyhub publish post --to ig --to threads --to bsky:shop.bsky.social --caption "It's here" --image https://cdn.example.org/a.jpg --alt "The box" --first-comment "Shop: https://shop.example.org"
        """
        targets = _targets(to)
        ledger = _ledger(env)
        given, bsky = _images(read, ledger, images, alts, bluesky=any(p == "bsky" for p, _ in targets))
        captions = {"ig": caption_ig, "threads": caption_threads, "bsky": caption_bsky}
        if env.remote:
            from .remote import post_queue

            variants = [{k: v for k, v in {"platform": p, "account": a, "caption": captions[p],
                                           "images": bsky if p == "bsky" else None}.items() if v is not None} for p, a in targets]
            body = {"variants": variants, "caption": caption, "images": given, "firstComment": first_comment, "at": _when(at),
                    "slug": slug, "draft": draft, "dryRun": dry_run}
            out = post_queue(_hub(env), {k: v for k, v in body.items() if v is not None})
        else:
            from .queue import PostIn, VariantIn, submit_post

            post = PostIn(variants=[VariantIn(platform=p, account=a, caption=captions[p], images=bsky if p == "bsky" else None)
                                    for p, a in targets],
                          caption=caption, images=given, first_comment=first_comment, at=_when(at), slug=slug, draft=draft)
            out = submit_post(ledger, env, post, now_ms=ledger.now(), dry_run=dry_run).as_dict()
        _echo(out)
        if not dry_run and not out["queued"] and not out["updated"]:
            click.echo(f"skyhub: post {out['id']} was already queued with the same content; nothing new was written", err=True)

    return post_command


def _act(verb: str, remote_verb: str, doc: str, example: str) -> click.Command:
    @click.command(verb, help=f"{doc}\n\nExample: {example}")
    @click.argument("post_id", metavar="ID")
    @click.pass_obj
    def command(env: Env, post_id: str) -> None:
        if env.remote:
            from .remote import post_act

            _echo(post_act(_hub(env), post_id, remote_verb))
            return
        from . import posts

        fn = {"submit": posts.submit_for_review, "approve": posts.approve, "queue": posts.queue_post}[verb]
        ledger = _ledger(env)
        _echo(fn(ledger, post_id, now_ms=ledger.now()))

    return command


submit_command = _act("submit", "submit", "Submit a draft for review: it waits for an approver.", "skyhub publish submit launch")
approve_command = _act("approve", "approve", "Approve a post (approvers and admins): it is queued at its time.",
                       "skyhub publish approve launch")
queue_command = _act("queue", "queue", "Queue a draft directly, without review (approvers and admins; editors too unless "
                     "the hub requires review).", "skyhub publish queue launch")


@click.command("reject")
@click.argument("post_id", metavar="ID")
@click.option("--reason", required=True, help="What to change: the editor reads it on the post.")
@click.pass_obj
def reject_command(env: Env, post_id: str, reason: str) -> None:
    """Reject a post in review (approvers and admins): it goes back to draft with the reason.

    Example: skyhub publish reject launch --reason "Say when the shop opens"
    """
    if env.remote:
        from .remote import post_act

        _echo(post_act(_hub(env), post_id, "reject", {"reason": reason}))
        return
    from .posts import reject

    ledger = _ledger(env)
    _echo(reject(ledger, post_id, reason, now_ms=ledger.now()))


@click.command("comment")
@click.argument("post_id", metavar="ID")
@click.argument("text")
@click.pass_obj
def comment_command(env: Env, post_id: str, text: str) -> None:
    """Comment on a post (kept on it, with who and when): for the review, before the queue starts it.

    Example: skyhub publish comment launch "Can we say 'today'?"
    """
    if env.remote:
        from .remote import post_act

        _echo(post_act(_hub(env), post_id, "comments", {"text": text}))
        return
    from .posts import comment

    ledger = _ledger(env)
    _echo(comment(ledger, post_id, text, now_ms=ledger.now()))


def _edit_command(read: Reader) -> click.Command:
    @click.command("edit")
    @click.argument("post_id", metavar="ID")
    @click.option("--caption", help="New words, on every network.")
    @click.option("--caption-ig", help="New words on Instagram.")
    @click.option("--caption-threads", help="New words on Threads.")
    @click.option("--caption-bsky", help="New words on Bluesky.")
    @click.option("--image", "images", multiple=True, metavar="URL", help="New images (all of them, in order; repeat).")
    @click.option("--alt", "alts", multiple=True, metavar="TEXT", help="Alt text of the image before it.")
    @click.option("--first-comment", metavar="TEXT", help='A new first comment ("" removes it).')
    @click.option("--at", "at", metavar="TIME", help="A new time, with its zone.")
    @click.pass_obj
    def edit_command(env: Env, post_id: str, caption: str | None, caption_ig: str | None, caption_threads: str | None,
                     caption_bsky: str | None, images: tuple[str, ...], alts: tuple[str, ...], first_comment: str | None,
                     at: str | None) -> None:
        """Change a post's content while no step has been taken (each change is a revision in its history).

        An editor's change to an approved post sends it back to review. Once the publish tick has
        started a variant, its content is fixed: cancel and duplicate it instead.

        Example: skyhub publish edit launch --caption-threads "It's here, on Threads too"
        """
        captions = {k: v for k, v in (("ig", caption_ig), ("threads", caption_threads), ("bsky", caption_bsky)) if v is not None}
        if caption is None and not captions and not images and first_comment is None and at is None:
            raise Usage("nothing to change: give --caption, --caption-ig/-threads/-bsky, --image, --first-comment or --at")
        ledger = _ledger(env)
        pictures: list[dict[str, Any]] | None = None
        if images:
            given, bsky = _images(read, ledger, images, alts)
            pictures = bsky if any("upload" in i for i in bsky) else given
        if env.remote:
            from .remote import post_edit

            body = {"caption": caption, "captions": captions or None, "images": pictures, "firstComment": first_comment, "at": _when(at)}
            _echo(post_edit(_hub(env), post_id, {k: v for k, v in body.items() if v is not None}))
            return
        from .posts import Change, edit

        change = Change(caption=caption, captions=captions or None, images=pictures, first_comment=first_comment, at=_when(at))
        _echo(edit(ledger, env, post_id, change, now_ms=ledger.now()))

    return edit_command


@click.command("reschedule")
@click.argument("post_id", metavar="ID")
@click.option("--at", "at", metavar="TIME", help="The new time, with its zone: 2026-12-02T09:00:00+01:00.")
@click.option("--now", "asap", is_flag=True, help="No time: publish as soon as it is queued.")
@click.pass_obj
def reschedule_command(env: Env, post_id: str, at: str | None, asap: bool) -> None:
    """Move a post to another time, while no step has been taken.

    Example: skyhub publish reschedule launch --at 2026-12-02T09:00:00+01:00
    """
    if (at is None) == (not asap):
        raise Usage("give --at TIME or --now")
    if env.remote:
        from .remote import post_act

        _echo(post_act(_hub(env), post_id, "reschedule", {"at": _when(at)}))
        return
    from .posts import reschedule

    ledger = _ledger(env)
    _echo(reschedule(ledger, env, post_id, _when(at), now_ms=ledger.now()))


@click.command("duplicate")
@click.argument("post_id", metavar="ID")
@click.option("--slug", help="The copy's name (default: ID-copy).")
@click.option("--at", "at", metavar="TIME", help="The copy's time (default: the original's, if it is still ahead).")
@click.pass_obj
def duplicate_command(env: Env, post_id: str, slug: str | None, at: str | None) -> None:
    """Make a new draft with the same content as a post (every network, images, alt texts, first comment).

    Example: skyhub publish duplicate launch --slug launch-again --at 2026-12-08T09:00:00+01:00
    """
    if env.remote:
        from .remote import post_act

        _echo(post_act(_hub(env), post_id, "duplicate", {k: v for k, v in {"slug": slug, "at": _when(at)}.items() if v}))
        return
    from .posts import duplicate

    ledger = _ledger(env)
    _echo(duplicate(ledger, env, post_id, slug=slug, at=_when(at), now_ms=ledger.now()).as_dict())


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Check every row and say what would happen; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON instead of a table.")
@click.pass_obj
def import_command(env: Env, file: Path, dry_run: bool, as_json: bool) -> None:
    """Import a content calendar: a CSV or JSON file, one row a post (columns in docs/guides/publishing.md).

    Every row is checked on its own; a bad row is reported (its row number and column) and nothing
    is written for it; the others are queued. Importing a fixed file again queues only what is new
    or changed. Exit 2 when a row is invalid.

    Example: skyhub publish import week-49.csv --dry-run
    """
    from ledger.text import table

    if not file.is_file():
        raise Usage(f"{file} is not a file here")
    data = file.read_bytes()
    if env.remote:
        from .remote import posts_import

        report = posts_import(_hub(env), data, json_file=file.suffix.lower() == ".json", dry_run=dry_run)
    else:
        from .importer import import_rows, read_rows

        ledger = _ledger(env)
        report = import_rows(ledger, env, read_rows(data, file.name), dry_run=dry_run, now_ms=ledger.now()).as_dict()
    if as_json:
        _echo(report)
    else:
        click.echo(table(["row", "outcome", "post", "status", "problems"], [
            [str(r["row"]), r["outcome"], r["post"] or "", r["status"] or "", "; ".join(r["problems"])] for r in report["rows"]]))
    counts = report["counts"]
    would = "would be " if dry_run else ""
    click.echo(f"skyhub: {counts['new']} {would}new, {counts['updated']} {would}updated, {counts['unchanged']} unchanged, "
               f"{counts['invalid']} invalid{' (nothing was written)' if dry_run else ''}", err=True)
    for row in report["rows"]:
        for problem in row["problems"]:
            click.echo(f"skyhub: {problem}", err=True)
    if counts["invalid"]:
        raise click.exceptions.Exit(2)


def commands(read: Reader) -> tuple[click.Command, ...]:
    """The commands of the module docstring, for ``skyhub publish``; ``read`` reads a Bluesky image from this machine."""
    return (_post_command(read), submit_command, approve_command, reject_command, queue_command, comment_command,
            _edit_command(read), reschedule_command, duplicate_command, import_command)


__all__ = ["commands"]
