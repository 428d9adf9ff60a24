"""skyhub vault ...: the write-only vault."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ledger.actor import parse_actor

from .cliutil import (
    EXIT_ERROR,
    EXIT_USAGE,
    State,
    cell,
    fail,
    iso,
    json_option,
    table,
)


# ---- the vault ---------------------------------------------------------------------------
@click.group("vault")
def vault_group() -> None:
    """The write-only vault: secrets go in, only metadata comes out.

    Example: skyhub vault list
    """


@vault_group.command("init")
@click.option("--key-file", "key_file", type=click.Path(dir_okay=False), help="Write the new master key to this file (mode 0600) instead of the OS keyring.")
@click.option("--print", "print_key", is_flag=True, help="Print a new key for SKYHUB_VAULT_KEY instead of storing it anywhere.")
def vault_init(key_file: str | None, print_key: bool) -> None:
    """Make the vault's master key: in the OS keyring, a key file, or printed for SKYHUB_VAULT_KEY.

    Example: skyhub vault init --key-file /etc/skyhub/vault.key
    """
    from vault import init_key, new_key_text

    if print_key:
        click.echo(new_key_text())
        click.echo("skyhub: keep this as SKYHUB_VAULT_KEY (a CI or service secret); it is shown once", err=True)
        return
    click.echo(json.dumps({"stored": init_key(key_file)}))


def _vault(state: State) -> Any:
    from ledger import Ledger
    from vault import Vault

    from .app import KeyLoader

    if state.remote:
        return None
    actor = state.settings.actor
    parse_actor(actor)
    return Vault(Ledger(state.store, actor), KeyLoader(state.settings.vault.key_file))


def _read_secret() -> str:
    if sys.stdin.isatty():
        secret = click.prompt("secret (not shown)", hide_input=True, err=True, default="", show_default=False)
    else:
        secret = sys.stdin.read()
    if not secret.strip():
        fail("usage", "no secret given: pipe it on stdin or type it at the prompt (never as an argument)", EXIT_USAGE)
    return str(secret)


@vault_group.command("put")
@click.argument("platform", type=click.Choice(["bluesky", "instagram", "threads", "facebook"]))
@click.argument("account")
@click.argument("extra", nargs=-1)
@click.option("--verify", is_flag=True, help="Check the secret with the platform now, not at the next vault tick.")
@click.pass_obj
def vault_put(state: State, platform: str, account: str, extra: tuple[str, ...], verify: bool) -> None:  # noqa: D417
    """Store a new version of a credential, read from stdin or a no-echo prompt (never from argv).

    Example: skyhub vault put bluesky ourbot.bsky.social --verify
    """
    if extra:  # a secret typed as an argument: refuse without echoing it
        fail("usage", "secrets are never taken as arguments (they would stay in shell history): pipe the secret on stdin or type it at the prompt", EXIT_USAGE)
    secret = _read_secret()
    if state.remote:
        meta = state.store.vault_put(platform, account, secret, verify)
    else:
        meta = _vault(state).put(platform, account, secret)
        if verify:
            from ledger import Ledger
            from vault import DB as VAULT_DB
            from vault import Maintainer, public

            from .app import KeyLoader, platforms_for, vault_policy

            s = state.settings
            maintainer = Maintainer(Ledger(state.store, "tick:vault"), KeyLoader(s.vault.key_file), platforms_for(s), vault_policy(s))
            maintainer.maintain(state.store.get(VAULT_DB, meta["id"]))
            meta = public(state.store.get(VAULT_DB, meta["id"]))
    click.echo(json.dumps(meta))
    if meta.get("needsReauth"):
        fail("needs_reauth", f"{meta['id']} was refused: {meta.get('lastError')}", EXIT_ERROR)


@vault_group.command("list")
@json_option
@click.pass_obj
def vault_list(state: State, as_json: bool) -> None:
    """List credentials: metadata only; NEEDS RE-AUTH marks the ones a person must paste again.

    Example: skyhub vault list --json
    """
    creds = state.store.vault_list() if state.remote else _vault(state).list()
    if as_json:
        click.echo(json.dumps(creds))
        return
    table(["id", "version", "status", "refreshed", "expires", "fingerprint", "attention"], [
        [c["id"], str(c["version"]), c["status"], iso(c["refreshedAt"]) if c.get("refreshedAt") else "",
         iso(c["expiresAt"]) if c.get("expiresAt") else "", c.get("fingerprint") or "",
         ("NEEDS RE-AUTH: " + cell(c.get("lastError"))) if c.get("needsReauth") else cell(c.get("lastError"))]
        for c in creds
    ])


@vault_group.command("show")
@click.argument("cred_id", metavar="PLATFORM:ACCOUNT")
@click.pass_obj
def vault_show(state: State, cred_id: str) -> None:
    """One credential's metadata as JSON (never the secret).

    Example: skyhub vault show bluesky:ourbot.bsky.social
    """
    click.echo(json.dumps(state.store.vault_show(cred_id) if state.remote else _vault(state).show(cred_id)))


@vault_group.command("rm")
@click.argument("cred_id", metavar="PLATFORM:ACCOUNT")
@click.pass_obj
def vault_rm(state: State, cred_id: str) -> None:
    """Delete a credential (its history keeps the metadata).

    Example: skyhub vault rm instagram:17841400000000000
    """
    if state.remote:
        state.store.vault_rm(cred_id)
    else:
        _vault(state).remove(cred_id)
    click.echo(json.dumps({"removed": cred_id}))
