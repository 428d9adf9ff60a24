"""skyhub vault ...: the write-only vault. Secrets go in; only metadata comes out."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, cast

import click

from ledger import Env, Usage
from ledger.text import iso, table, whole

from .credentials import PLATFORMS, Vault
from .errors import NeedsReauth
from .keys import KeyLoader, init_key, new_key_text

if TYPE_CHECKING:
    from .remote import RemoteVault


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
    if print_key:
        click.echo(new_key_text())
        click.echo("skyhub: keep this as SKYHUB_VAULT_KEY (a CI or service secret); it is shown once", err=True)
        return
    click.echo(json.dumps({"stored": init_key(key_file)}))


def _remote(env: Env) -> RemoteVault | None:
    from .remote import RemoteVault

    return RemoteVault(cast(Any, env.store)) if env.remote else None


def _local(env: Env) -> Vault:
    return Vault(env.ledger(), KeyLoader(env.section("vault").key_file))


def _read_secret() -> str:
    if sys.stdin.isatty():
        secret = click.prompt("secret (not shown)", hide_input=True, err=True, default="", show_default=False)
    else:
        secret = sys.stdin.read()
    if not secret.strip():
        raise Usage("no secret given: pipe it on stdin or type it at the prompt (never as an argument)")
    return str(secret)


@vault_group.command("put")
@click.argument("platform", type=click.Choice(list(PLATFORMS)))
@click.argument("account")
@click.argument("extra", nargs=-1)
@click.option("--verify", is_flag=True, help="Check the secret with the platform now, not at the next vault tick.")
@click.pass_obj
def vault_put(env: Env, platform: str, account: str, extra: tuple[str, ...], verify: bool) -> None:  # noqa: D417
    """Store a new version of a credential, read from stdin or a no-echo prompt (never from argv).

    Example: skyhub vault put bluesky ourbot.bsky.social --verify
    """
    if extra:  # a secret typed as an argument: refuse without echoing it
        raise Usage("secrets are never taken as arguments (they would stay in shell history): pipe the secret on stdin or type it at the prompt")
    secret = _read_secret()
    remote = _remote(env)
    if remote is not None:
        meta = remote.put(platform, account, secret, verify)
    else:
        meta = _local(env).put(platform, account, secret)
        if verify:
            from .rotation import verify as verify_now

            meta = verify_now(env.context("vault", "tick:vault"), meta["id"])
    click.echo(json.dumps(meta))
    if meta.get("needsReauth"):
        raise NeedsReauth(f"{meta['id']} was refused: {meta.get('lastError')}")
    if verify and meta.get("status") != "ok" and meta.get("lastError"):
        click.echo(f"skyhub: {meta['id']} is stored but not verified yet: {meta['lastError']}; the vault tick will try again", err=True)


@vault_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="JSON output instead of a table.")
@click.pass_obj
def vault_list(env: Env, as_json: bool) -> None:
    """List credentials: metadata only; NEEDS RE-AUTH marks the ones a person must paste again.

    Example: skyhub vault list --json
    """
    remote = _remote(env)
    creds = remote.list() if remote is not None else _local(env).list()
    if as_json:
        click.echo(json.dumps(creds))
        return
    click.echo(table(["id", "version", "status", "refreshed", "expires", "fingerprint", "attention"], [
        [c["id"], str(c["version"]), c["status"], iso(c["refreshedAt"]) if c.get("refreshedAt") else "",
         iso(c["expiresAt"]) if c.get("expiresAt") else "", c.get("fingerprint") or "",
         ("NEEDS RE-AUTH: " + whole(c.get("lastError"))) if c.get("needsReauth") else whole(c.get("lastError"))]
        for c in creds
    ]))


@vault_group.command("show")
@click.argument("cred_id", metavar="PLATFORM:ACCOUNT")
@click.pass_obj
def vault_show(env: Env, cred_id: str) -> None:
    """One credential's metadata as JSON (never the secret).

    Example: skyhub vault show bluesky:ourbot.bsky.social
    """
    remote = _remote(env)
    click.echo(json.dumps(remote.show(cred_id) if remote is not None else _local(env).show(cred_id)))


@vault_group.command("rm")
@click.argument("cred_id", metavar="PLATFORM:ACCOUNT")
@click.pass_obj
def vault_rm(env: Env, cred_id: str) -> None:
    """Delete a credential (its history keeps the metadata).

    Example: skyhub vault rm instagram:17841400000000000
    """
    remote = _remote(env)
    if remote is not None:
        remote.remove(cred_id)
    else:
        _local(env).remove(cred_id)
    click.echo(json.dumps({"removed": cred_id}))
