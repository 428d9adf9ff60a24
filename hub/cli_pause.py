"""``skyhub pause`` and ``skyhub resume``: a tick, a platform or an account stopped while something is
being fixed, for every hub process (``ledger/pause.py``), on the local database or a hub's (``/v1/pauses``)."""

from __future__ import annotations

import json
from typing import Any

import click

from ledger.text import cell, iso, table, whole

from .cliutil import State, as_option, json_option


def _known() -> tuple[list[str], dict[str, str]]:
    from .app import tick_help
    from .products import products

    return sorted(tick_help()), {scope: why for p in products() for scope, why in p.pausable.items()}


def _show(docs: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"paused": docs}, ensure_ascii=False))
        return
    if not docs:
        click.echo("nothing is paused")
        return
    click.echo(table(["paused", "since", "by", "why"], [
        [d["_id"], iso(d["pausedAt"]) if isinstance(d.get("pausedAt"), int) else "", cell(d.get("by")), whole(d.get("reason") or "")]
        for d in docs
    ]))


@click.command("pause")
@click.argument("target", required=False)
@click.option("--reason", help="Why, for whoever looks next (shown with the pause).")
@as_option
@json_option
@click.pass_obj
def pause_cmd(state: State, target: str | None, reason: str | None, as_actor: str | None, as_json: bool) -> None:
    """Pause TARGET for every hub process: a tick (publish, or tick:publish), a platform (ig, threads, bsky) or one
    account (ig:ACCOUNT, threads:ACCOUNT, bsky:HANDLE). A paused tick's runs are recorded as paused; a paused
    platform's or account's posts wait (not an attempt). Without TARGET: what is paused now.

    Example: skyhub pause publish --reason "Meta's API is down"
    """
    if state.remote:
        remote: Any = state.store
        state.actor(as_actor)
        if target is None:
            _show(remote.request("GET", "/v1/pauses")["paused"], as_json)
            return
        doc = remote.request("POST", "/v1/pauses", json={"target": target, "reason": reason})
    else:
        from ledger.pause import parse_target, pause, paused

        if target is None:
            _show(list(paused(state.store).values()), as_json)
            return
        ticks, scopes = _known()
        doc = pause(state.ledger(as_actor), parse_target(target, ticks, scopes), reason)
    click.echo(json.dumps(doc, ensure_ascii=False) if as_json else f"{doc['_id']} paused")


@click.command("resume")
@click.argument("target")
@as_option
@json_option
@click.pass_obj
def resume_cmd(state: State, target: str, as_actor: str | None, as_json: bool) -> None:
    """Resume a paused TARGET (as it was paused: publish, ig, ig:ACCOUNT ...): the tick runs at its next slot, the posts
    go on at the next publish run.

    Example: skyhub resume publish
    """
    if state.remote:
        remote: Any = state.store
        state.actor(as_actor)
        doc = remote.request("POST", "/v1/pauses/resume", json={"target": target})
    else:
        from ledger.pause import parse_target, resume

        ticks, scopes = _known()
        doc = resume(state.ledger(as_actor), parse_target(target, ticks, scopes))
    click.echo(json.dumps(doc, ensure_ascii=False) if as_json else f"{doc['_id']} resumed")
