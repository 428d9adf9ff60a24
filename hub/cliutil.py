"""What every ``skyhub`` command shares: settings and store (``State``, the ``ledger.Env`` the
products' command groups get), one-line errors, the exit codes, options and output.

The commands themselves are a thin layer over the library. Results go to stdout, logs and
errors to stderr, as one line: ``skyhub: <code>: <reason>``. Exit codes come from the error
tree (``ledger/errors.py``): 0 ok, 1 error, 2 usage, 3 conflict, 4 forbidden, 5 not found.
Nothing is written when a command fails.

``--json`` follows one rule everywhere: a command prints one JSON value (a listing is an
array, a page an object with its ``next`` cursor); a command that follows a stream
(``--follow``) prints one JSON object per line as they come.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ledger import Change, Clock, Context, Documents, Invalid, Ledger, LedgerError, Store, Usage
from ledger.actor import parse_actor
from ledger.errors import EXIT_CONFLICT, EXIT_ERROR, EXIT_FORBIDDEN, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE
from ledger.text import cell, iso, table

from .config import Core, core, default_actor, user_file

if TYPE_CHECKING:
    from .settings import Settings

__all__ = [
    "EXIT_CONFLICT", "EXIT_ERROR", "EXIT_FORBIDDEN", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_USAGE", "Group", "State",
    "as_option", "cell", "configure_logging", "db_option", "fail", "iso", "json_option", "print_changes",
]


def fail(code: str, reason: str, exit_code: int) -> NoReturn:
    """Print one line on stderr and exit."""
    click.echo(f"skyhub: {code}: {' '.join(reason.split())}", err=True)
    sys.exit(exit_code)


class State:
    """The command line's settings and store; what product command groups get as ``ctx.obj``.

    ``core`` (a few settings read without pydantic) is all a command that reads the ledger
    needs; ``settings`` (every section, validated) loads when a command asks for more. The
    arguments are the global options: ``--config``, ``--database-url``, ``--hub``, and the
    credentials for a hub (``token``, ``device``, ``device_key_file``), and the command's ``clock``."""

    def __init__(self, config: str | None, database_url: str | None, hub: str | None = None, *, clock: Clock,
                 **credentials: str | None) -> None:
        self.config = config
        self.clock = clock  # the command's one clock (``skyhub``'s entry point makes it): its writes' times, its contexts
        self.database_url = database_url
        self.hub = hub
        self.credentials = credentials
        self._core: Core | None = None
        self._settings: Settings | None = None
        self._store: Any = None
        self._reader: Any = None
        self._services: Any = None

    @property
    def core(self) -> Core:
        """The few settings every command needs, read without pydantic on first use."""
        if self._core is None:
            self._core = core(self.config, database_url=self.database_url, hub_url=self.hub, **self.credentials)
            if user_file(self.config) is not None:
                self.settings  # noqa: B018 - a settings file is checked whole (a typo'd key is refused) by every command
        return self._core

    @property
    def settings(self) -> Settings:
        """Every settings section, validated; loaded on first use (Usage when they are not valid)."""
        if self._settings is None:
            from .settings import load_settings

            self._settings = load_settings(self.config, database_url=self.database_url, hub_url=self.hub, **self.credentials)
        return self._settings

    @property
    def remote(self) -> bool:
        """Whether commands go to a hub over HTTP (--hub / SKYHUB_HUB_URL) instead of a local database."""
        return bool(self.core.hub_url)

    @property
    def store(self) -> Documents:
        """The local store with every product's rules, or the hub's over HTTP (--hub / SKYHUB_HUB_URL)."""
        if self._store is None:
            if self.remote:
                self._store = self.reader
            else:
                from .app import open_app_store

                self._store = open_app_store(self.settings, None, self.clock)
        return self._store  # type: ignore[no-any-return]

    @property
    def reader(self) -> Documents:
        """A store to read from: the one already open, else the local database without the
        products' rules (reads need none, and loading them costs more than the read), or the hub."""
        if self._store is not None:
            return self._store  # type: ignore[no-any-return]
        if self._reader is None:
            if self.remote:
                self._reader = self._remote_store()
            else:
                from ledger import open_store

                c = self.core
                self._reader = open_store(c.database_url, None, self.clock, pool_size=c.pool_size or None,
                                          statement_timeout=c.statement_timeout, connect_timeout=c.connect_timeout,
                                          create=False)  # a read creates nothing
        return self._reader  # type: ignore[no-any-return]

    def local_store(self, what: str) -> Store:
        """The local store; a usage error over --hub (``what`` runs on the hub itself)."""
        if self.remote:
            raise Usage(f"{what} runs on the hub itself, against its database: drop --hub / SKYHUB_HUB_URL")
        return self.store  # type: ignore[return-value]

    def actor(self, as_actor: str | None = None) -> str:
        """Who this command writes as: over a hub, the credential decides (``--as`` must agree)."""
        if self.remote:
            hub_actor: str = self.store.actor  # type: ignore[attr-defined]
            if as_actor is not None and as_actor != hub_actor:
                parse_actor(as_actor)
                raise Invalid(f"this hub credential acts as {hub_actor}, not {as_actor}")
            return hub_actor
        actor = as_actor or self.core.actor or default_actor()
        parse_actor(actor)
        return actor

    def section(self, name: str) -> Any:
        """The settings section of product ``name`` (``bot``, ``vault``, ...)."""
        return self.settings.section(name)

    def ledger(self, as_actor: str | None = None) -> Ledger:
        """The store bound to the command's actor (``actor(as_actor)``), on the command's clock."""
        return Ledger(self.store, self.actor(as_actor), self.clock)

    def context(self, product: str, actor: str) -> Context:
        """A backend context on the local store, as the hub would give ``actor``."""
        from ledger.context import make_context

        from .app import services_for

        store = self.local_store(f"acting as {actor}")
        if self._services is None:
            self._services = services_for(self.settings)
        return make_context(Ledger(store, actor, self.clock), actor.partition(":")[2], self._services, settings=self.section(product))

    def _remote_store(self) -> Any:
        from .auth import load_key
        from .remote import DeviceAuth, RemoteStore, TokenAuth

        c = self.core
        auth: Any
        if c.token:
            auth = TokenAuth(c.token)
        elif c.device:
            key = load_key(name=c.device, hub=c.hub_url, key_file=c.device_key_file or None, key_env=c.device_key or None)
            auth = DeviceAuth(c.device, key, self.clock)
        else:
            raise Usage("a hub needs a credential: --token / SKYHUB_TOKEN for a person, or --device NAME (SKYHUB_DEVICE) with its key")
        return RemoteStore(c.hub_url, auth)

    def close(self) -> None:
        """Close what the command opened: the HTTP client, the store and the reader."""
        if self._services is not None and hasattr(self._services.http, "close"):
            self._services.http.close()
        for opened in {id(s): s for s in (self._store, self._reader) if s is not None}.values():
            opened.close()


class Group(click.Group):
    """A command group whose failures are one line with the documented exit code.

    ``lazy`` maps command names to ``"module:attribute"``: those commands (the products'
    groups) are imported only when they are used or listed.
    """

    def __init__(self, *args: Any, lazy: Callable[[], dict[str, tuple[str, str]]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy
        self._lazy_names: dict[str, tuple[str, str]] | None = None

    @property
    def lazy(self) -> dict[str, tuple[str, str]]:
        """Command name -> ("module:attribute", one line of help), asked for only when a command
        is not one of ours; the listing in --help uses the line without importing the command."""
        if self._lazy_names is None:
            self._lazy_names = dict(self._lazy()) if self._lazy else {}
        return self._lazy_names

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's help; then, if a settings file is in use and is not valid, that on stderr (help still works,
        and says what every other command would refuse)."""
        super().format_help(ctx, formatter)
        state = ctx.obj if isinstance(ctx.obj, State) else None
        config = state.config if state is not None else ctx.params.get("config")
        if ctx.parent is None and user_file(config) is not None:
            from .settings import load_settings

            try:
                load_settings(config)
            except LedgerError as exc:
                click.echo(f"skyhub: note: {exc.reason}", err=True)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The Commands section of --help; a lazy command shows its line of help without being imported."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                command = self.commands[name]
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
            else:
                rows.append((name, self.lazy[name][1]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, the lazy ones included, sorted."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, imported first if it is a lazy one; None when there is no such command."""
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The top group's options work after the subcommand too (``skyhub status --hub URL``,
        ``skyhub run --config FILE``): one the subcommand does not define itself is moved in front of it."""
        if ctx.parent is None:
            args = self._hoist(ctx, list(args))
        return super().parse_args(ctx, args)

    def _hoist(self, ctx: click.Context, args: list[str]) -> list[str]:
        mine: dict[str, bool] = {}  # the group's option names -> whether the option takes a value
        for param in self.params:
            if isinstance(param, click.Option):
                for name in (*param.opts, *param.secondary_opts):
                    mine[name] = not param.is_flag
        # the command path: the first words that are not options (or values of the group's options)
        i = 0
        while i < len(args) and args[i].startswith("-"):
            name = args[i].split("=", 1)[0]
            i += 2 if mine.get(name) and "=" not in args[i] else 1
        if i >= len(args) or args[i] == "--":
            return args
        theirs: set[str] = set()
        command: click.Command | None = self
        j = i
        while isinstance(command, click.Group) and j < len(args) and not args[j].startswith("-"):
            try:
                command = command.get_command(ctx, args[j])
            except LedgerError:
                return args
            if command is None:
                return args
            for param in command.params:
                if isinstance(param, click.Option):
                    theirs.update((*param.opts, *param.secondary_opts))
            j += 1
        kept, moved = args[:j], []
        k = j
        while k < len(args):
            token = args[k]
            if token == "--":
                kept.extend(args[k:])
                break
            name = token.split("=", 1)[0]
            if name in mine and name not in theirs and name not in ("-h", "--help"):
                takes = mine[name] and "=" not in token
                moved.extend(args[k:k + 2] if takes else [token])
                k += 2 if takes else 1
                continue
            kept.append(token)
            k += 1
        return moved + kept

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a LedgerError ends it with one line on stderr and the error's exit code, Ctrl-C with 130."""
        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            fail(exc.code, exc.reason, exc.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)


def run_main(command: click.Command, args: Sequence[str] | None = None) -> NoReturn:
    """Run the CLI so that usage mistakes are one line too (click prints a usage block)."""
    try:
        result = command.main(args=list(args) if args is not None else None, prog_name="skyhub", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        sys.exit(EXIT_USAGE)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "skyhub"
        fail("usage", f"{exc.format_message()} (see: {where} --help)", EXIT_USAGE)
    except click.ClickException as exc:  # bad file arguments and the like
        fail("usage", exc.format_message(), EXIT_USAGE)
    except click.exceptions.Abort:
        fail("aborted", "stopped before anything was written", EXIT_ERROR)
    except LedgerError as exc:  # raised while click resolved the command (settings, lazy import)
        fail(exc.code, exc.reason, exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(result if isinstance(result, int) else EXIT_OK)


def configure_logging(level: str, *, command: bool = False) -> None:
    """Log to stderr at ``level`` (a name: "DEBUG", "info", ...; INFO when unknown), httpx and APScheduler
    from WARNING up. For entry points only. ``command``: a short command (not the long-running hub),
    whose log lines read like its other messages, ``skyhub: ...``, from WARNING up unless asked for more."""
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    wanted = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(
        level=max(wanted, logging.WARNING) if command and wanted > logging.DEBUG else wanted,
        stream=sys.stderr,
        format="skyhub: %(message)s" if command else "%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


db_option = click.option("--db", "dbname", required=True, metavar="NAME", help="The database, e.g. jobs.")
as_option = click.option("--as", "as_actor", metavar="ACTOR", envvar="SKYHUB_ACTOR", help="Write as this actor (default: user:$USER).")
json_option = click.option("--json", "as_json", is_flag=True, help="JSON output instead of a table.")


def print_changes(changes: Sequence[Change], as_json: bool, *, lines: bool = False, header: bool = True) -> None:
    """Changes as a table, a JSON array, or (``lines``: a stream) one JSON object per line."""
    import json

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
    text = table(["seq", "db", "id", "rev", "actor", "at", "status"], rows, header=header)
    if text:
        click.echo(text)
