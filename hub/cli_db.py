"""skyhub db ...: documents, queries, history, the change log, machines."""

from __future__ import annotations

import json
import re
import sys
import threading
from typing import Any, cast

import click

from ledger import LedgerError, Store
from ledger.text import cell, iso, table

from .cliutil import (
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    State,
    as_option,
    db_option,
    fail,
    json_option,
    print_changes,
)


# ---- db --------------------------------------------------------------------------------
@click.group()
def db() -> None:
    """Documents: put, get, query, history, changes, machines, bulk actions.

    Example: skyhub db get --db jobs 4f1c...
    """


def _read_document(text: str) -> dict[str, Any]:
    if text == "-":
        text = sys.stdin.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail("usage", f"malformed JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): pass one JSON object, e.g. '{{\"status\": \"pending\"}}'", EXIT_USAGE)
    return value  # type: ignore[no-any-return]  # the store checks that it is an object


def _actor(state: State, as_actor: str | None) -> str:
    return state.actor(as_actor)  # over a hub the credential decides; --as must agree with it




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
            fail(exc.code, f"line {number}: {exc.reason}; the lines before it were written", exc.exit_code)
        click.echo(json.dumps({"id": out["_id"], "rev": out["_rev"]}))


@db.command("get")
@db_option
@click.argument("doc_id", metavar="ID")
@click.pass_obj
def db_get(state: State, dbname: str, doc_id: str) -> None:
    """Print one document as JSON (with _id and _rev).

    Example: skyhub db get --db jobs 4f1c2d...
    """
    click.echo(json.dumps(state.reader.get(dbname, doc_id), ensure_ascii=False))


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
    """List documents whose FIELD equals KEY, by id, a page at a time (an index, or a bounded scan).

    Example: skyhub db query --db jobs --field status --key pending --limit 20
    """
    reader = state.reader
    page = reader.query(dbname, field, key, limit, after)
    has_db = getattr(reader, "has_db", None)  # the hub answers for itself (404) over --hub
    if not page.docs and page.next is None and after is None and has_db is not None and not has_db(dbname):
        from ledger import NotFound
        from ledger.sql import no_database

        raise NotFound(no_database(dbname))
    if page.scanned:
        click.echo(f"skyhub: {dbname}.{field} has no index, so this page scanned documents in id order "
                   f"(an index: skyhub db index add --db {dbname} {field})", err=True)
    if as_json:
        click.echo(json.dumps({"docs": page.docs, "next": page.next, "scanned": page.scanned}, ensure_ascii=False))
        return
    columns = ["_id", "_rev"] + [c for c in ("type", "kind", "status", field) if any(c in d for d in page.docs)]
    columns = list(dict.fromkeys(columns))
    click.echo(table(columns, [[cell(d.get(c)) for c in columns] for d in page.docs]))
    if page.next:
        click.echo(f"more: --after {page.next}", err=True)


@db.command("search")
@db_option
@click.argument("text")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--after", help="The cursor printed by the previous page.")
@json_option
@click.pass_obj
def db_search(state: State, dbname: str, text: str, limit: int, after: str | None, as_json: bool) -> None:
    """Find documents whose id starts with TEXT, or whose text, caption or lastError holds its words.

    Words match the start of a word, whatever the case ("time" finds "Timeout"); every word must
    match. Results come in id order, a page at a time, with the number of all matches.

    Example: skyhub db search --db requests pomodoro
    """
    page = state.reader.search(dbname, text, limit, after)
    if as_json:
        click.echo(json.dumps(page.as_dict(), ensure_ascii=False))
        return
    columns = ["_id", "_rev"] + [c for c in ("type", "kind", "status", "text", "caption", "lastError") if any(c in d for d in page.docs)]
    click.echo(table(columns, [[cell(d.get(c), 60) for c in columns]
                               for d in page.docs]))
    shown = f"{len(page.docs)} shown" if page.docs else "none"
    click.echo(f"{page.total}{'+' if page.capped else ''} found, {shown}", err=True)
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
    changes = state.reader.history(dbname, doc_id)
    if not changes:
        fail("not_found", f"no document {doc_id!r} in {dbname!r} has ever been written", EXIT_NOT_FOUND)
    print_changes(changes, as_json)


@db.command("changes")
@click.option("--since", type=click.IntRange(0), default=0, show_default=True, help="Start after this sequence number.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--follow", is_flag=True, help="Keep printing new changes as they commit (Ctrl-C stops).")
@json_option
@click.pass_obj
def db_changes(state: State, since: int, limit: int, follow: bool, as_json: bool) -> None:
    """The change log in commit order (--json: an array; with --follow, one JSON object per line).

    Example: skyhub db changes --since 120 --follow --json
    """
    store = state.reader
    if not follow:
        print_changes(store.changes(since, limit), as_json)
        return
    if state.remote:
        from .remote import RemoteStore

        try:
            header = True
            for change in cast(RemoteStore, store).follow(since):
                print_changes([change], as_json, lines=True, header=header)
                header = False
                sys.stdout.flush()
        except KeyboardInterrupt:
            return
        return
    local = cast(Store, store)  # a local store: it tells this process of every commit
    woke = threading.Event()
    local.subscribe(lambda _change: woke.set())
    header = True
    try:
        while True:
            woke.clear()
            batch = local.changes(since, limit)
            if batch:
                print_changes(batch, as_json, lines=True, header=header)
                header = False
                since = batch[-1].seq
                sys.stdout.flush()
                continue
            woke.wait(1.0)
    except KeyboardInterrupt:
        return


@db.command("bulk")
@click.argument("action", type=click.Choice(["retry", "cancel", "dismiss"]))
@db_option
@click.option("--status", help="Only documents in this status.")
@click.option("--kind", help="Only documents of this kind (the machine's type or kind).")
@click.option("--field", help="With --key: only documents whose FIELD equals KEY.")
@click.option("--key", help="The value of --field to match (a string).")
@click.option("--error", "error", help="Words of lastError (any case), or a group's fp:... from `skyhub errors`.")
@click.option("--dry-run", is_flag=True, help="Write nothing: print the count, a sample and the warnings.")
@click.option("--expect", metavar="DIGEST", help="Act only if the same documents are selected as when a dry run printed DIGEST.")
@as_option
@json_option
@click.pass_obj
def db_bulk(state: State, action: str, dbname: str, status: str | None, kind: str | None, field: str | None, key: str | None,
            error: str | None, dry_run: bool, expect: str | None, as_actor: str | None, as_json: bool) -> None:
    """Retry, cancel or dismiss every document a filter selects, through each machine's person move, as you.

    Each document is written with the revision it was read at; one the machine refuses, or that changed
    meanwhile, is listed and left as it is. The action is recorded in the audit database. Exit 0 once
    the action ran, whatever it refused (the output counts and lists the refusals).

    A dry run prints the selection's digest; `--expect DIGEST` then acts only on that same selection
    (if documents came or went meanwhile, nothing is written and the command exits 3, a conflict, with the new count).

    Example: skyhub db bulk retry --db jobs --status failed --dry-run
    """
    from ledger import Conflict
    from ledger.bulk import Filter

    if expect is not None and not re.fullmatch(r"[0-9a-f]{16}", expect):
        raise click.UsageError(f"--expect takes the 16-character digest a dry run printed, not {expect[:40]!r}")
    flt = Filter(status=status, kind=kind, field=field, key=key, error=error)
    if state.remote:
        body = {"action": action, **flt.as_dict(), "dry_run": dry_run, **({"expect": expect} if expect else {})}
        out = cast(Any, state.store).request("POST", f"/v1/db/{dbname}/bulk", json=body)
    else:
        from ledger import Ledger
        from ledger.bulk import bulk

        from .app import build_rules

        actor = _actor(state, as_actor)
        store = state.local_store("skyhub db bulk")
        out = bulk(Ledger(store, actor, state.clock), getattr(store, "rules", None) or build_rules(), dbname, action, flt,
                   dry_run=dry_run, expect=expect).as_dict()
    if out.get("changed"):
        raise Conflict(f"the selection changed since digest {expect}: {out['matched']:,} documents match now (digest "
                       f"{out['digest']}); nothing was written: look again with --dry-run")
    for w in out["warnings"]:
        click.echo(f"skyhub: warning: {w['id']}: {w['warning']}" if w["id"] else f"skyhub: warning: {w['warning']}", err=True)
    if as_json:
        click.echo(json.dumps(out, ensure_ascii=False))
        return
    shown = ", ".join(f"{k}={v}" for k, v in out["filter"].items()) or "no filter"
    verb = "would move" if out["dryRun"] else "moved"
    click.echo(f"{action} {dbname} ({shown}): {out['matched']:,} matched, {verb} {out['written']:,}, "
               f"refused {out['refused']:,} ({out['conflicts']:,} changed meanwhile)"
               + (f"; recorded as audit/{out['audit']}" if out.get("audit") else "")
               + (f"; digest {out['digest']} (to act on exactly these: --expect {out['digest']})" if out["dryRun"] and out.get("digest") else ""))
    if out["dryRun"] and out["sample"]:
        click.echo(table(["id", "status", "error"], [[cell(s["id"]), cell(s["status"]), cell(s["error"], 80)] for s in out["sample"]]))
    if out["refusals"]:
        click.echo(table(["refused", "status", "why"], [[cell(r["id"]), cell(r["status"]), r["reason"]] for r in out["refusals"][:50]]))
        if len(out["refusals"]) > 50:
            click.echo(f"... and {len(out['refusals']) - 50:,} more (--json lists them all)")


@db.command("machines")
@json_option
@click.pass_obj
def db_machines(state: State, as_json: bool) -> None:
    """Print every registered machine as Markdown with a Mermaid state diagram each.

    Example: skyhub db machines > machines.md
    """
    from .app import build_rules

    machines = build_rules().machines
    if as_json:
        click.echo(json.dumps([m.describe() for m in machines]))
        return
    click.echo("\n".join(m.markdown() for m in machines), nl=False)


# ---- indexes ---------------------------------------------------------------------------
@db.group("index")
def db_index() -> None:
    """Indexes: the fields queries find documents by (run on the hub).

    Example: skyhub db index list
    """


@db_index.command("list")
@json_option
@click.pass_obj
def db_index_list(state: State, as_json: bool) -> None:
    """List every index: built in (status), declared by a product, or added by an admin.

    Example: skyhub db index list --json
    """
    found = state.local_store("skyhub db index list").indexes()
    if as_json:
        click.echo(json.dumps([i.as_dict() for i in found]))
        return
    click.echo(table(["db", "field", "origin", "created", "name"], [
        [i.db, i.field, i.origin, iso(i.created_at) if i.created_at else "", i.name] for i in found
    ]))


@db_index.command("add")
@db_option
@click.argument("field")
@click.pass_obj
def db_index_add(state: State, dbname: str, field: str) -> None:
    """Index a field of a database, so queries on it stop scanning (every hub process sees it).

    Example: skyhub db index add --db requests authorDid
    """
    click.echo(json.dumps(state.local_store("skyhub db index add").add_index(dbname, field).as_dict()))


@db_index.command("drop")
@db_option
@click.argument("field")
@click.pass_obj
def db_index_drop(state: State, dbname: str, field: str) -> None:
    """Drop an index an admin added (queries on the field scan again, a bounded page at a time).

    Example: skyhub db index drop --db requests authorDid
    """
    state.local_store("skyhub db index drop").drop_index(dbname, field)
    click.echo(json.dumps({"dropped": {"db": dbname, "field": field}}))
