"""``skyhub errors``: the documents that wait for a person's retry, grouped by the fingerprint of their
error (``ledger.fingerprint``), on the local database or a hub's (``GET /v1/errors``)."""

from __future__ import annotations

import json
from typing import Any, cast

import click

from ledger.text import cell, iso, table, whole

from .cliutil import State, json_option


@click.command("errors")
@click.option("--db", "dbname", help="Only this database.")
@json_option
@click.pass_obj
def errors(state: State, dbname: str | None, as_json: bool) -> None:
    """Errors grouped by fingerprint (ids, numbers and times normalised), largest group first, each with the
    bulk action that retries it.

    Example: skyhub errors --db jobs
    """
    if state.remote:
        query = f"?db={dbname}" if dbname else ""
        groups: list[dict[str, Any]] = cast(Any, state.store).request("GET", f"/v1/errors{query}")
    else:
        from ledger.fingerprint import error_groups

        from .app import build_rules

        store = state.local_store("skyhub errors")
        groups = [g.as_dict() for g in error_groups(store, getattr(store, "rules", None) or build_rules(), dbname)]
    if as_json:
        click.echo(json.dumps(groups, ensure_ascii=False))
        return
    if not groups:
        click.echo("no errors wait for a person")
        return
    click.echo(table(["count", "db", "kind", "status", "last seen", "fingerprint", "error"], [
        [f"{g['count']:,}{'+' if g['partial'] else ''}", g["db"], cell(g["kind"]), g["status"],
         iso(g["lastSeen"]) if g.get("lastSeen") else "", g["fingerprint"], whole(g["pattern"])] for g in groups
    ]))
    first = groups[0]
    click.echo(f"retry a group: skyhub db bulk retry --db {first['db']} --status {first['status']} --error {first['fingerprint']} --dry-run",
               err=True)
