"""``skyhub status``: the console's overview in the terminal, from the same function
(``hub.console.overview``), on the local database or a hub's (``GET /v1/overview``)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from ledger.text import cell, iso, table, whole

from .cliutil import State, json_option


def render(data: dict[str, Any]) -> str:
    """The overview as tables for people."""
    out: list[str] = []
    attention = data.get("attention", [])
    out.append(f"NEEDS A PERSON ({len(attention)})")
    if attention:
        out.append(table(["what", "", "since", "why (what to do)"], [  # the last column whole: it says what to do
            [a["what"], cell(a["title"], 60), iso(a["since"]) if a.get("since") else "", whole(a.get("reason"))] for a in attention
        ]))
    else:
        out.append("nothing")
    out.append("")
    out.append("DOCUMENTS")
    rows = [[d["db"], k["kind"] or "-", status, f"{n:,}"] for d in data.get("databases", []) for k in d["kinds"]
            for status, n in sorted(k["counts"].items())]
    out.append(table(["db", "kind", "status", "documents"], rows) if rows else "none")
    stopped = data.get("paused", [])
    out.append("")
    out.append(f"PAUSED ({len(stopped)})")
    out.append(table(["paused", "what waits", "since", "by", "why"], [
        [p["target"], p["what"], iso(p["since"]) if p.get("since") else "", cell(p.get("by")), whole(p.get("reason") or "")]
        for p in stopped
    ]) if stopped else "nothing (skyhub pause TARGET stops a tick, a platform or an account)")
    ticks = data.get("ticks", [])
    if ticks:
        out.append("")
        out.append("TICKS")
        out.append(table(["tick", "every", "last run", "outcome"], [
            [t["name"] + (" (paused)" if t.get("paused") else ""), t["every"], (iso(t["lastRun"]["scheduledAt"]) if t.get("lastRun") else "never") + (" LATE" if t["late"] else ""),
             whole(((t.get("lastRun") or {}).get("outcome") or "") + (f": {t['lastRun']['error']}" if (t.get("lastRun") or {}).get("error") else ""))]
            for t in ticks
        ]))
    handlers = data.get("handlers", [])
    if handlers:
        out.append("")
        out.append("CHANGE FEED")
        out.append(table(["handler", "databases", "behind", "in flight"], [
            [h["name"], ",".join(h["dbs"]), str(h["pending"] if h.get("pending") is not None else h["behind"]), str(h["inFlight"])]
            for h in handlers
        ]))
    return "\n".join(out)


def _reader(state: State) -> tuple[Callable[[], dict[str, Any]], Callable[[], None]]:
    if state.remote:
        remote: Any = state.store
        # RemoteStore's one request path: retries, error mapping and the credential
        return (lambda: remote.request("GET", "/v1/overview")), (lambda: None)
    from .app import build_app
    from .console.overview import overview

    app = build_app(state.settings, clock=state.clock)
    return (lambda: overview(app)), app.stop


def _stop_on_ctrl_c() -> None:
    """Make Ctrl-C (SIGINT) stop ``--watch`` even when the process was started with SIGINT ignored
    (a shell starts background jobs so, and Python then installs no KeyboardInterrupt handler)."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@click.command("status")
@json_option
@click.option("--watch", is_flag=True, help="Refresh until Ctrl-C.")
@click.option("--every", default="2s", show_default=True, metavar="INTERVAL", help="How often --watch refreshes (2s, 500ms, 1m).")
@click.pass_obj
def status(state: State, as_json: bool, watch: bool, every: str) -> None:
    """The overview: what needs a person, documents by status, ticks and the change feed (the console's front page as a table).

    Example: skyhub status --watch --every 2s
    """
    from ledger import parse_interval

    seconds = parse_interval(every)
    if watch:
        _stop_on_ctrl_c()
    try:
        read, close = _reader(state)
    except KeyboardInterrupt:  # Ctrl-C before the first screen: stopped, as asked
        return
    try:
        while True:
            data = read()
            text = json.dumps(data, ensure_ascii=False) if as_json else render(data)
            if watch and not as_json and sys.stdout.isatty():
                click.echo("\x1b[H\x1b[2J", nl=False)
            click.echo(text)
            if not watch:
                return
            if not as_json:
                click.echo(f"\n(every {every}; Ctrl-C to stop)")
            time.sleep(seconds)
    except KeyboardInterrupt:
        return
    finally:
        close()
