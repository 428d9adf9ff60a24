"""The ``skyhub`` command: a thin layer over the library.

Results go to stdout (JSON for data; tables for people where ``--json`` switches to JSON),
logs and errors to stderr in one line. Exit codes: 0 ok, 1 error, 2 usage, 3 conflict,
4 forbidden, 5 not found. Nothing is written when a command fails. The hub's own groups live
in ``cli_db`` and ``cli_access``; each product brings its own (``vault``, ``build``, ...),
imported only when used.
"""

from __future__ import annotations

import json
import sys

import click

from ledger import SYSTEM, Usage

from .cli_access import device, user
from .cli_db import db
from .cli_errors import errors
from .cli_pause import pause_cmd, resume_cmd
from .cli_status import status
from .cliutil import EXIT_ERROR, Group, State, configure_logging, run_main


def _product_groups() -> dict[str, tuple[str, str]]:
    from .products import products

    return {name: (target, p.summary) for p in products() for name, target in p.cli.items()}


@click.group(cls=Group, lazy=_product_groups, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skyhub", message="skyhub %(version)s", version=None)
@click.option("--config", envvar="SKYHUB_CONFIG", type=click.Path(dir_okay=False), help="A settings file layered over config/skyhub.toml.")
@click.option(
    "--database-url",
    help="sqlite:///skyhub.db (a file here), sqlite:////var/lib/skyhub/skyhub.db (an absolute path: four slashes) "
    "or postgresql://USER@HOST:5432/DB (env SKYHUB_DATABASE_URL).",
)
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
    ctx.obj = State(config, database_url, hub, clock=SYSTEM, token=token, device=device, device_key_file=key_file)  # the one clock
    ctx.call_on_close(ctx.obj.close)


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
    from .server import listen, serve
    from .webapp import create_api

    settings = state.settings
    if state.remote:
        raise Usage("skyhub run runs on the hub itself, against its database: drop --hub / SKYHUB_HUB_URL")
    host, port = host or settings.host, settings.port if port is None else port
    sock = listen(host, port)  # first: a bad address or a taken port is the one line, and nothing started
    state.local_store("skyhub run")
    configure_logging(settings.log_level)
    app = build_app(settings, clock=state.clock)
    for line in app.notices():  # what the products want said (the vault has no key yet, ...)
        click.echo(f"skyhub: note: {line}", err=True)

    def ready(url: str) -> None:
        click.echo(f"skyhub: API on {url}; database {app.store!r}; stop with Ctrl-C", err=True)

    serve(app, create_api(app), host, port, on_ready=ready, sock=sock)


class TickCommand(click.Command):
    """``skyhub tick``: its help lists every tick a hub can run."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Click's help, then a Ticks section: every tick a hub can run, and what it does."""
        super().format_help(ctx, formatter)
        from .app import tick_help

        with formatter.section("Ticks"):
            formatter.write_dl(sorted(tick_help().items()))


@main.command("tick", cls=TickCommand)
@click.argument("name")
@click.pass_obj
def tick_cmd(state: State, name: str) -> None:
    """Run one tick once (for plain cron and tests), recorded like a scheduled run.

    Example: skyhub tick sweep
    """
    from .app import build_app, tick_help

    state.local_store("skyhub tick")
    configure_logging(state.settings.log_level, command=True)
    app = build_app(state.settings, clock=state.clock)
    try:
        if name not in app.scheduler.ticks:
            known = tick_help()
            if name in known:
                raise Usage(f"tick {name!r} is not configured here: it {known[name]}")
            raise Usage(f"no tick named {name!r}; ticks: {', '.join(sorted(known))} (see skyhub tick --help)")
        outcome = app.scheduler.run(name, manual=True)
        runs = app.store.tick_runs(name, limit=1)
    finally:
        app.stop()
    click.echo(json.dumps({"tick": name, "outcome": outcome, "error": runs[0].error if runs else None}))
    if outcome == "error":
        sys.exit(EXIT_ERROR)


for command in (db, user, device, status, errors, pause_cmd, resume_cmd):
    main.add_command(command)


def entry() -> None:
    """The ``skyhub`` console script."""
    run_main(main)
