"""The ``skyhub`` command: a thin layer over the library.

Results go to stdout (JSON for data; tables for people where ``--json`` switches to JSON),
logs and errors to stderr in one line. Exit codes: 0 ok, 1 error, 2 usage, 3 conflict,
4 forbidden, 5 not found. Nothing is written when a command fails.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

import click

from ledger import Change, LedgerError
from ledger.actor import parse_actor
from ledger.sql import SQLStore

from .settings import Settings, load_settings

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CONFLICT, EXIT_FORBIDDEN, EXIT_NOT_FOUND = 0, 1, 2, 3, 4, 5
EXIT_BY_CODE = {
    "conflict": EXIT_CONFLICT, "forbidden": EXIT_FORBIDDEN, "unauthorized": EXIT_FORBIDDEN, "not_found": EXIT_NOT_FOUND,
}  # every other code (invalid, too_large, backend, vault, no_master_key, ...) exits 1


def fail(code: str, reason: str, exit_code: int) -> NoReturn:
    click.echo(f"skyhub: {code}: {' '.join(reason.split())}", err=True)
    sys.exit(exit_code)


class State:
    def __init__(self, config: str | None, database_url: str | None, hub: str | None = None, **credentials: str | None) -> None:
        self.config = config
        self.database_url = database_url
        self.hub = hub
        self.credentials = credentials
        self._settings: Settings | None = None
        self._store: Any = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = load_settings(self.config, database_url=self.database_url, hub_url=self.hub, **self.credentials)
            except FileNotFoundError as exc:
                fail("config", str(exc), EXIT_USAGE)
            except ValueError as exc:
                fail("config", f"the settings are not valid: {exc}", EXIT_USAGE)
        return self._settings

    @property
    def remote(self) -> bool:
        return bool(self.settings.hub_url)

    @property
    def store(self) -> Any:
        """The local store, or the hub's over HTTP when --hub / SKYHUB_HUB_URL is set."""
        if self._store is None:
            if self.remote:
                self._store = self._remote_store()
            else:
                from .app import open_app_store

                self._store = open_app_store(self.settings)
        return self._store

    def local_store(self, what: str) -> SQLStore:
        if self.remote:
            fail("usage", f"{what} runs on the hub itself, against its database: drop --hub / SKYHUB_HUB_URL", EXIT_USAGE)
        return self.store  # type: ignore[no-any-return]

    def _remote_store(self) -> Any:
        from .auth import load_key
        from .remote import DeviceAuth, RemoteStore, TokenAuth

        s = self.settings
        auth: Any
        if s.token.get_secret_value():
            auth = TokenAuth(s.token.get_secret_value())
        elif s.device:
            key = load_key(
                name=s.device, hub=s.hub_url, key_file=s.device_key_file or None,
                key_env=s.device_key.get_secret_value() or None,
            )
            auth = DeviceAuth(s.device, key)
        else:
            fail("usage", "a hub needs a credential: --token / SKYHUB_TOKEN for a person, or --device NAME (SKYHUB_DEVICE) with its key", EXIT_USAGE)
        return RemoteStore(s.hub_url, auth)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


class Group(click.Group):
    """Turns ledger errors raised by any command into one line and the documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            fail(exc.code, exc.reason, EXIT_BY_CODE.get(exc.code, EXIT_ERROR))
        except KeyboardInterrupt:
            sys.exit(130)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", envvar="SKYHUB_CONFIG", type=click.Path(dir_okay=False), help="A settings file layered over config/skyhub.toml.")
@click.option("--database-url", help="sqlite:///PATH or postgresql://USER@HOST:PORT/DB (env SKYHUB_DATABASE_URL).")
@click.option("--hub", metavar="URL", help="Work against a hub over HTTP instead of a local database (env SKYHUB_HUB_URL).")
@click.option("--token", help="A person's token for --hub (env SKYHUB_TOKEN; prefer the environment).")
@click.option("--device", metavar="NAME", help="Sign requests to --hub as this device (env SKYHUB_DEVICE).")
@click.option("--key-file", type=click.Path(dir_okay=False), help="The device's private key file (env SKYHUB_DEVICE_KEY_FILE).")
@click.pass_context
def main(ctx: click.Context, config: str | None, database_url: str | None, hub: str | None, token: str | None,
         device: str | None, key_file: str | None) -> None:
    """skyhub: a bot pipeline in which the database is the interface.

    Example: skyhub db put --db jobs '{"type": "job", "status": "pending", "input": {"n": 1}}'
    """
    ctx.obj = State(config, database_url, hub, token=token, device=device, device_key_file=key_file)
    ctx.call_on_close(ctx.obj.close)


def configure_logging(level: str) -> None:
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


# ---- run / tick ------------------------------------------------------------------------
@main.command()
@click.option("--host", help="Address for the API (default 127.0.0.1; env SKYHUB_HOST).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port for the API (default 8470, 0 picks a free one; env SKYHUB_PORT).")
@click.pass_obj
def run(state: State, host: str | None, port: int | None) -> None:
    """Run the hub: the HTTP API, the change feed, the sweep and the scheduler, until SIGTERM or Ctrl-C.

    Example: skyhub run --port 8470
    """
    from .app import build_app

    state.local_store("skyhub run")
    settings = state.settings
    configure_logging(settings.log_level)
    app = build_app(settings)
    ready = lambda url: click.echo(f"skyhub: API on {url}; database {app.store!r}; stop with Ctrl-C", err=True)  # noqa: E731
    app.serve(host or settings.host, settings.port if port is None else port, on_ready=ready)


@main.command("tick")
@click.argument("name")
@click.pass_obj
def tick_cmd(state: State, name: str) -> None:
    """Run one tick once (for plain cron and tests), recorded like a scheduled run.

    Example: skyhub tick sweep
    """
    from .app import build_app

    state.local_store("skyhub tick")
    configure_logging(state.settings.log_level)
    app = build_app(state.settings)
    try:
        outcome = app.scheduler.run(name, manual=True)
        runs = app.store.tick_runs(name, limit=1)
    finally:
        app.store.close()
    click.echo(json.dumps({"tick": name, "outcome": outcome, "error": runs[0].error if runs else None}))
    if outcome == "error":
        sys.exit(EXIT_ERROR)


# ---- db --------------------------------------------------------------------------------
@main.group()
def db() -> None:
    """Documents: put, get, query, history, changes, machines.

    Example: skyhub db get --db jobs 4f1c...
    """


def _read_document(text: str) -> dict[str, Any]:
    if text == "-":
        text = sys.stdin.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail("usage", f"malformed JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): pass one JSON object, e.g. '{{\"status\": \"pending\"}}'", EXIT_USAGE)
    return value  # the store checks that it is an object


def _actor(state: State, as_actor: str | None) -> str | None:
    if state.remote:
        return as_actor  # the hub decides who this credential is; --as must agree with it
    actor = as_actor or state.settings.actor
    parse_actor(actor)
    return actor


db_option = click.option("--db", "dbname", required=True, metavar="NAME", help="The database, e.g. jobs.")
as_option = click.option("--as", "as_actor", metavar="ACTOR", envvar="SKYHUB_ACTOR", help="Write as this actor (default: user:$USER).")
json_option = click.option("--json", "as_json", is_flag=True, help="JSON output instead of a table.")


@db.command("put")
@db_option
@click.option("--id", "doc_id", help="The document id (default: _id in the document, else a new one).")
@click.option("--if-rev", help="Write only if the document is still at this revision.")
@click.option("--create-only", is_flag=True, help="Write only if no document has this id.")
@click.option("--lines", is_flag=True, help="The input holds one document per line; each is written in turn, stopping at the first failure.")
@as_option
@click.argument("document")
@click.pass_obj
def db_put(state: State, dbname: str, doc_id: str | None, if_rev: str | None, create_only: bool, lines: bool,
           as_actor: str | None, document: str) -> None:
    """Write a document (a JSON object, or - for stdin). Prints its id and new revision.

    Example: skyhub db put --db jobs '{"type": "job", "status": "pending", "input": {"n": 1}}'
    """
    actor = _actor(state, as_actor)
    if not lines:
        doc = _read_document(document)
        out = state.store.put(dbname, doc, doc_id, actor=actor, if_rev=if_rev, create_only=create_only)
        click.echo(json.dumps({"id": out["_id"], "rev": out["_rev"]}))
        return
    if doc_id or if_rev:
        fail("usage", "--lines takes ids and revisions from each document (_id, _rev), not --id / --if-rev", EXIT_USAGE)
    text = sys.stdin.read() if document == "-" else document
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            out = state.store.put(dbname, doc, None, actor=actor, create_only=create_only)
        except json.JSONDecodeError as exc:
            fail("usage", f"line {number}: malformed JSON ({exc.msg}); the lines before it were written", EXIT_USAGE)
        except LedgerError as exc:
            fail(exc.code, f"line {number}: {exc.reason}; the lines before it were written", EXIT_BY_CODE.get(exc.code, EXIT_ERROR))
        click.echo(json.dumps({"id": out["_id"], "rev": out["_rev"]}))


@db.command("get")
@db_option
@click.argument("doc_id", metavar="ID")
@click.pass_obj
def db_get(state: State, dbname: str, doc_id: str) -> None:
    """Print one document as JSON (with _id and _rev).

    Example: skyhub db get --db jobs 4f1c2d...
    """
    click.echo(json.dumps(state.store.get(dbname, doc_id), ensure_ascii=False))


@db.command("delete")
@db_option
@click.option("--if-rev", help="Delete only if the document is still at this revision.")
@as_option
@click.argument("doc_id", metavar="ID")
@click.pass_obj
def db_delete(state: State, dbname: str, if_rev: str | None, as_actor: str | None, doc_id: str) -> None:
    """Delete a document (a tombstone revision; history keeps every earlier one).

    Example: skyhub db delete --db notes --if-rev 2-ab12cd34ef56ab78 shopping
    """
    out = state.store.delete(dbname, doc_id, actor=_actor(state, as_actor), if_rev=if_rev)
    click.echo(json.dumps({"id": out["_id"], "rev": out["_rev"], "deleted": True}))


@db.command("query")
@db_option
@click.option("--field", required=True, help="A top-level field, e.g. status.")
@click.option("--key", required=True, help="The value to match (a string).")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--after", help="The cursor printed by the previous page.")
@json_option
@click.pass_obj
def db_query(state: State, dbname: str, field: str, key: str, limit: int, after: str | None, as_json: bool) -> None:
    """List documents whose FIELD equals KEY, by id, a page at a time (uses an index).

    Example: skyhub db query --db jobs --field status --key pending --limit 20
    """
    page = state.store.query(dbname, field, key, limit, after)
    if as_json:
        click.echo(json.dumps({"docs": page.docs, "next": page.next}, ensure_ascii=False))
        return
    columns = ["_id", "_rev"] + [c for c in ("type", "kind", "status", field) if any(c in d for d in page.docs)]
    columns = list(dict.fromkeys(columns))
    _table(columns, [[_cell(d.get(c)) for c in columns] for d in page.docs])
    if page.next:
        click.echo(f"more: --after {page.next}", err=True)


@db.command("history")
@db_option
@click.argument("doc_id", metavar="ID")
@json_option
@click.pass_obj
def db_history(state: State, dbname: str, doc_id: str, as_json: bool) -> None:
    """Every revision of a document, with the actor that wrote it and when.

    Example: skyhub db history --db jobs 4f1c2d... --json
    """
    changes = state.store.history(dbname, doc_id)
    if not changes:
        fail("not_found", f"no document {doc_id!r} in {dbname!r} has ever been written", EXIT_NOT_FOUND)
    _print_changes(changes, as_json)


@db.command("changes")
@click.option("--since", type=click.IntRange(0), default=0, show_default=True, help="Start after this sequence number.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--follow", is_flag=True, help="Keep printing new changes as they commit (Ctrl-C stops).")
@json_option
@click.pass_obj
def db_changes(state: State, since: int, limit: int, follow: bool, as_json: bool) -> None:
    """The change log in commit order (JSON lines with --json).

    Example: skyhub db changes --since 120 --follow --json
    """
    store = state.store
    if not follow:
        _print_changes(store.changes(since, limit), as_json, lines=True)
        return
    if state.remote:
        try:
            header = True
            for change in store.follow(since):
                _print_changes([change], as_json, lines=True, header=header)
                header = False
                sys.stdout.flush()
        except KeyboardInterrupt:
            return
        return
    woke = threading.Event()
    store.subscribe(lambda _change: woke.set())
    header = True
    try:
        while True:
            woke.clear()
            batch = store.changes(since, limit)
            if batch:
                _print_changes(batch, as_json, lines=True, header=header)
                header = False
                since = batch[-1].seq
                sys.stdout.flush()
                continue
            woke.wait(1.0)
    except KeyboardInterrupt:
        return


@db.command("machines")
@json_option
@click.pass_obj
def db_machines(state: State, as_json: bool) -> None:
    """Print every registered machine as a Mermaid state diagram.

    Example: skyhub db machines > machines.md
    """
    from .app import build_rules

    machines = build_rules().machines
    if as_json:
        click.echo(json.dumps([machine_json(m) for m in machines]))
        return
    for m in machines:
        click.echo(f"%% {m.name} ({m.kind_field} = {m.kind})")
        click.echo(m.mermaid())
        click.echo()


def machine_json(m: Any) -> dict[str, Any]:
    return {
        "db": m.db, "field": m.kind_field, "kind": m.kind, "states": list(m.states),
        "start": list(m.start), "terminal": sorted(m.terminal), "maxAttempts": m.max_attempts,
        "edges": [
            {"from": list(e.src), "to": e.dst, "by": [str(p) for p in e.by], "guards": [str(g) for g in e.guards]}
            for e in m.edges
        ],
        "mermaid": m.mermaid(),
    }


# ---- people and devices ----------------------------------------------------------------
@main.group()
def user() -> None:
    """Operator tokens for people (run on the hub).

    Example: skyhub user add ana
    """


@user.command("add")
@click.argument("name")
@click.pass_obj
def user_add(state: State, name: str) -> None:
    """Make a token for a person (actor user:NAME). The token is printed once; the hub keeps a hash.

    Example: skyhub user add ana
    """
    from .auth import add_user

    token = add_user(state.local_store("skyhub user add"), name)
    click.echo(token)
    click.echo(f"skyhub: token for user:{name} printed once; give it to them as SKYHUB_TOKEN", err=True)


@user.command("list")
@json_option
@click.pass_obj
def user_list(state: State, as_json: bool) -> None:
    """List tokens (metadata only: id, name, created, revoked).

    Example: skyhub user list --json
    """
    from .auth import list_tokens

    tokens = list_tokens(state.local_store("skyhub user list"))
    if as_json:
        click.echo(json.dumps(tokens))
        return
    _table(["id", "name", "actor", "created", "revoked"], [
        [t["id"], t["name"], t["actor"], _iso(t["createdAt"]), _iso(t["revokedAt"]) if t["revokedAt"] else ""] for t in tokens
    ])


@user.command("revoke")
@click.argument("which", metavar="ID|NAME")
@click.pass_obj
def user_revoke(state: State, which: str) -> None:
    """Revoke one token by id, or every token of a person by name.

    Example: skyhub user revoke ana
    """
    from .auth import revoke_token

    click.echo(json.dumps({"revoked": revoke_token(state.local_store("skyhub user revoke"), which)}))


@main.group()
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

    doc = approve_device(state.local_store("skyhub device approve"), name, as_actor, public_key)
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
    _table(["name", "actor", "fingerprint", "approved", "revoked"], [
        [d["name"], d["actor"], d["fingerprint"], _iso(d["approvedAt"]), _iso(d["revokedAt"]) if d["revokedAt"] else ""] for d in devices
    ])


@device.command("revoke")
@click.argument("name")
@click.pass_obj
def device_revoke(state: State, name: str) -> None:
    """Revoke a device: its signatures are refused from now on.

    Example: skyhub device revoke gha-builder
    """
    from .auth import revoke_device

    revoke_device(state.local_store("skyhub device revoke"), name)
    click.echo(json.dumps({"revoked": name}))


# ---- the builder lane ----------------------------------------------------------------------
@main.group("build")
def build_group() -> None:
    """The builder lane: turn pending-build mentions into built pages.

    Example: skyhub build run --max 5
    """


@build_group.command("run")
@click.option("--max", "max_jobs", type=click.IntRange(1, 100), default=5, show_default=True, help="Build at most this many mentions.")
@click.option("--as", "as_actor", metavar="ACTOR", default="device:builder", show_default=True, help="Locally: the actor to claim as (over --hub the credential decides).")
@click.pass_obj
def build_run(state: State, max_jobs: int, as_actor: str) -> None:
    """Claim pending-build mentions, run the codegen command for each, write built or build-failed.

    Example: skyhub build run --max 5
    """
    from bot import Builder, BuildSettings
    from ledger import Ledger

    s = state.settings.bot
    store = state.store
    actor = store.actor if state.remote else as_actor
    parse_actor(actor)
    settings = BuildSettings(command=s.codegen, lease_ms=int(s.build_lease * 1000), timeout_s=s.build_timeout, max_jobs=max_jobs)
    builder = Builder(Ledger(store, actor), settings, progress=lambda line: click.echo(f"skyhub: {line}", err=True))
    click.echo(json.dumps(builder.run(max_jobs)))


# ---- the vault ---------------------------------------------------------------------------
@main.group("vault")
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
    _table(["id", "version", "status", "refreshed", "expires", "fingerprint", "attention"], [
        [c["id"], str(c["version"]), c["status"], _iso(c["refreshedAt"]) if c.get("refreshedAt") else "",
         _iso(c["expiresAt"]) if c.get("expiresAt") else "", c.get("fingerprint") or "",
         ("NEEDS RE-AUTH: " + _cell(c.get("lastError"))) if c.get("needsReauth") else _cell(c.get("lastError"))]
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


# ---- output helpers --------------------------------------------------------------------
def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _print_changes(changes: Sequence[Change], as_json: bool, *, lines: bool = False, header: bool = True) -> None:
    if as_json:
        if lines:
            for c in changes:
                click.echo(json.dumps(c.as_dict(), ensure_ascii=False))
        else:
            click.echo(json.dumps([c.as_dict() for c in changes], ensure_ascii=False))
        return
    rows = [
        [str(c.seq), c.db, _cell(c.id), c.rev, c.actor, _iso(c.at), "(deleted)" if c.deleted else _cell(c.doc.get("status"))]
        for c in changes
    ]
    columns = ["seq", "db", "id", "rev", "actor", "at", "status"]
    if header:
        _table(columns, rows)
    else:
        widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
        for row in rows:
            click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
