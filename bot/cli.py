"""skyhub build ...: the builder lane."""

from __future__ import annotations

import json
import os

import click

from ledger import Env, Usage

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

    The [codegen] settings go to the command as SKYHUB_CODEGEN__* variables; with a language model
    (codegen.provider openai or anthropic) the key must be in SKYHUB_CODEGEN_API_KEY. Once the day's
    codegen.daily_token_budget is spent, pending builds wait for the next day (UTC).

    Example: skyhub build run --max 5
    """
    s, codegen = env.section("bot"), env.section("codegen")
    problem = codegen.key_problem(os.environ)
    if problem is not None:  # before anything is claimed: every build would fail the same way
        raise Usage(problem)
    actor = env.actor(None if env.remote else as_actor)
    settings = BuildSettings(command=s.codegen, lease_ms=int(s.build_lease * 1000), timeout_s=s.build_timeout, max_jobs=max_jobs,
                             budget=codegen.daily_token_budget, env=codegen.as_env())
    builder = Builder(env.ledger(actor), settings, progress=lambda line: click.echo(f"skyhub: {line}", err=True))
    click.echo(json.dumps(builder.run(max_jobs)))
