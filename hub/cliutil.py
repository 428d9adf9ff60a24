"""What every ``skyhub`` command shares: settings and store, exit codes, options, output.

The commands themselves are a thin layer over the library.

Results go to stdout (JSON for data; tables for people where ``--json`` switches to JSON),
logs and errors to stderr in one line. Exit codes: 0 ok, 1 error, 2 usage, 3 conflict,
4 forbidden, 5 not found. Nothing is written when a command fails.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

import click

from ledger import Change, LedgerError
from ledger.errors import EXIT_CONFLICT, EXIT_ERROR, EXIT_FORBIDDEN, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE  # noqa: F401
from ledger.sql import SQLStore

from .settings import Settings, load_settings


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
            fail(exc.code, exc.reason, exc.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)


def configure_logging(level: str) -> None:
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


db_option = click.option("--db", "dbname", required=True, metavar="NAME", help="The database, e.g. jobs.")
as_option = click.option("--as", "as_actor", metavar="ACTOR", envvar="SKYHUB_ACTOR", help="Write as this actor (default: user:$USER).")
json_option = click.option("--json", "as_json", is_flag=True, help="JSON output instead of a table.")


# ---- output helpers --------------------------------------------------------------------
def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def cell(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def print_changes(changes: Sequence[Change], as_json: bool, *, lines: bool = False, header: bool = True) -> None:
    if as_json:
        if lines:
            for c in changes:
                click.echo(json.dumps(c.as_dict(), ensure_ascii=False))
        else:
            click.echo(json.dumps([c.as_dict() for c in changes], ensure_ascii=False))
        return
    rows = [
        [str(c.seq), c.db, cell(c.id), c.rev, c.actor, iso(c.at), "(deleted)" if c.deleted else cell(c.doc.get("status"))]
        for c in changes
    ]
    columns = ["seq", "db", "id", "rev", "actor", "at", "status"]
    if header:
        table(columns, rows)
    else:
        widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
        for row in rows:
            click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
