"""skyhub user ... and skyhub device ...: who may use the hub."""

from __future__ import annotations

import json

import click

from ledger.text import iso, table

from .cliutil import (
    State,
    json_option,
)


# ---- people and devices ----------------------------------------------------------------
@click.group()
def user() -> None:
    """Operator tokens for people (run on the hub).

    Example: skyhub user add ana
    """


ROLE_HELP = ("editor (writes drafts and submits them), approver (approves, rejects, queues directly) or admin "
             "(everything a person may do)")


@user.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(["editor", "approver", "admin"]),
              help=f"What the person may do: {ROLE_HELP}. Left out: a new person is admin, an existing one keeps their role.")
@click.pass_obj
def user_add(state: State, name: str, role: str | None) -> None:
    """Make a token for a person (actor user:NAME). The token is printed once; the hub keeps a hash.

    Example: skyhub user add ana --role editor
    """
    from .auth import add_user, role_of

    store = state.local_store("skyhub user add")
    token = add_user(store, name, role, clock=state.clock)
    click.echo(token)
    click.echo(f"skyhub: token for user:{name} ({role_of(store, name)}) printed once; give it to them as SKYHUB_TOKEN", err=True)


@user.command("role")
@click.argument("name")
@click.argument("role", type=click.Choice(["editor", "approver", "admin"]))
@click.pass_obj
def user_role(state: State, name: str, role: str) -> None:
    """Change what a person may do: editor, approver or admin (their tokens stay; the next write is judged by the new role).

    Example: skyhub user role ana approver
    """
    from .auth import set_role

    set_role(state.local_store("skyhub user role"), name, role, clock=state.clock)
    click.echo(json.dumps({"user": f"user:{name}", "role": role}))


@user.command("zone")
@click.argument("name")
@click.argument("zone")
@click.pass_obj
def user_zone(state: State, name: str, zone: str) -> None:
    """Set the time zone a person's console shows times and the publishing calendar in: an IANA name, or
    "browser" for their browser's zone again (the default). They can change it on the console's zone form too.

    Example: skyhub user zone ana Europe/Berlin
    """
    from .auth import set_zone

    set_zone(state.local_store("skyhub user zone"), name, None if zone == "browser" else zone, clock=state.clock)
    click.echo(json.dumps({"user": f"user:{name}", "zone": None if zone == "browser" else zone}))


@user.command("list")
@json_option
@click.pass_obj
def user_list(state: State, as_json: bool) -> None:
    """List tokens (metadata only: id, name, role, created, revoked).

    Example: skyhub user list --json
    """
    from .auth import list_tokens

    tokens = list_tokens(state.local_store("skyhub user list"))
    if as_json:
        click.echo(json.dumps(tokens))
        return
    click.echo(table(["id", "name", "actor", "role", "created", "revoked"], [
        [t["id"], t["name"], t["actor"], t["role"], iso(t["createdAt"]), iso(t["revokedAt"]) if t["revokedAt"] else ""]
        for t in tokens
    ]))


@user.command("revoke")
@click.argument("which", metavar="ID|NAME")
@click.pass_obj
def user_revoke(state: State, which: str) -> None:
    """Revoke one token by id, or every token of a person by name.

    Example: skyhub user revoke ana
    """
    from .auth import revoke_token

    click.echo(json.dumps({"revoked": revoke_token(state.local_store("skyhub user revoke"), which, clock=state.clock)}))


@click.group()
def device() -> None:
    """Device credentials for lanes such as the GitHub Actions builder.

    Example: skyhub device register --name gha-builder --hub https://hub.example.org --key-file builder.pem
    """


@device.command("register")
@click.option("--name", required=True, help="The device's name, e.g. gha-builder.")
@click.option("--hub", "hub_url", required=True, metavar="URL", help="The hub this device will talk to.")
@click.option("--key-file", "key_file", type=click.Path(dir_okay=False), help="Write the private key here (mode 0600) instead of the OS keyring.")
def device_register(name: str, hub_url: str, key_file: str | None) -> None:
    """Make a key pair on this device and print the public key and the approval to run on the hub.

    Example: skyhub device register --name gha-builder --hub https://hub.example.org --key-file builder.pem
    """
    from .auth import _check_name, new_device_key, public_key_of, save_key

    _check_name(name, "device")
    key = new_device_key()
    where = save_key(key, name=name, hub=hub_url, key_file=key_file)
    public = public_key_of(key)
    click.echo(json.dumps({"device": name, "hub": hub_url, "publicKey": public}))
    click.echo(f"skyhub: private key stored in {where}; it never leaves this device", err=True)
    click.echo(f"skyhub: on the hub, run: skyhub device approve {name} --as device:builder --public-key {public}", err=True)


@device.command("approve")
@click.argument("name")
@click.option("--as", "as_actor", required=True, metavar="ACTOR", help="The actor the device acts as, e.g. device:builder.")
@click.option("--public-key", required=True, help="The key printed by `skyhub device register` (ed25519:...).")
@click.pass_obj
def device_approve(state: State, name: str, as_actor: str, public_key: str) -> None:
    """Record a device's public key and the actor it acts as (run on the hub).

    Example: skyhub device approve gha-builder --as device:builder --public-key ed25519:AAAA...
    """
    from .auth import approve_device

    doc = approve_device(state.local_store("skyhub device approve"), name, as_actor, public_key, clock=state.clock)
    click.echo(json.dumps({"device": name, "actor": as_actor, "fingerprint": doc["fingerprint"]}))


@device.command("list")
@json_option
@click.pass_obj
def device_list(state: State, as_json: bool) -> None:
    """List approved devices (name, actor, key fingerprint).

    Example: skyhub device list
    """
    from .auth import list_devices

    devices = list_devices(state.local_store("skyhub device list"))
    if as_json:
        click.echo(json.dumps(devices))
        return
    click.echo(table(["name", "actor", "fingerprint", "approved", "revoked"], [
        [d["name"], d["actor"], d["fingerprint"], iso(d["approvedAt"]), iso(d["revokedAt"]) if d["revokedAt"] else ""] for d in devices
    ]))


@device.command("revoke")
@click.argument("name")
@click.pass_obj
def device_revoke(state: State, name: str) -> None:
    """Revoke a device: its signatures are refused from now on.

    Example: skyhub device revoke gha-builder
    """
    from .auth import revoke_device

    revoke_device(state.local_store("skyhub device revoke"), name, clock=state.clock)
    click.echo(json.dumps({"revoked": name}))
