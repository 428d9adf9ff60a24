"""skyhub build ...: the builder lane."""

from __future__ import annotations

import json

import click

from ledger import Env

from .build import Builder, BuildSettings


@click.group("build")
def build_group() -> None:
    """The builder lane: turn pending-build mentions into built pages.

    Example: skyhub build run --max 5
    """


@build_group.command("run")
@click.option("--max", "max_jobs", type=click.IntRange(1, 100), default=5, show_default=True, help="Build at most this many mentions.")
@click.option("--as", "as_actor", metavar="ACTOR", default="device:builder", show_default=True, help="Locally: the actor to claim as (over --hub the credential decides).")
@click.pass_obj
def build_run(env: Env, max_jobs: int, as_actor: str) -> None:
    """Claim pending-build mentions, run the codegen command for each, write built or build-failed.

    Example: skyhub build run --max 5
    """
    s = env.section("bot")
    actor = env.actor(None if env.remote else as_actor)
    settings = BuildSettings(command=s.codegen, lease_ms=int(s.build_lease * 1000), timeout_s=s.build_timeout, max_jobs=max_jobs)
    builder = Builder(env.ledger(actor), settings, progress=lambda line: click.echo(f"skyhub: {line}", err=True))
    click.echo(json.dumps(builder.run(max_jobs)))
