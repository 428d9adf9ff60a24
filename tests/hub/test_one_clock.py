"""One clock. The rule, as these tests hold it:

1. The composition root makes the clock and hands it to every part: the store (which keeps it
   to itself, for its revisions and leases), the feed, the scheduler, the sweep, the gate's
   signature times, the console's sessions and activity, and every ``Ledger`` it binds to an
   actor (a tick's or handler's ``ctx.db``, a product route's ``web.ledger``, a page's
   ``pages.ledger``, a command's ``env.ledger``). None of them has a default: a fake clock in a
   test moves them all at once.
2. Nobody reads the time through a store: no store has a ``clock``, and no module of the hub or
   of a product reaches for one (``store.clock``, ``getattr(store, "clock")``, ``._clock``).
3. The wall clock is named in the hub by its entry point only (``hub/cli.py`` makes it for
   every command and for ``skyhub run``); products never read it (tests/test_layering.py).
4. A tick or handler reads the time from its context (``ctx.now()``), not through its ledger
   (``ctx.db.now()``); code without a context reads it from the ledger it was handed, whose
   clock is the one the composition root gave.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from starlette.requests import Request

from hub.api.web import Web
from hub.app import build_app
from hub.auth import add_user
from hub.cliutil import State
from hub.console.overview import overview
from hub.console.routes import _Pages
from hub.console.web import Console
from hub.settings import load_settings
from ledger import FakeClock, Ledger
from skyhub_testkit.memory import memory_store
from tests.conftest import open_backend

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_900_000_000_000
PRODUCTS = ("bot", "vault", "publishers")
STORES = {"ledger/sql.py", "ledger/sqlite.py", "ledger/postgres.py"}  # the stores themselves hold their clock


def test_a_fake_clock_moves_every_part_of_the_hub(tmp_path):
    clock = FakeClock(NOW)
    app = build_app(load_settings(database_url=f"sqlite:///{tmp_path}/hub.db"), clock=clock)
    try:
        for part in (app.feed, app.scheduler, app.sweeper):
            assert part.clock is clock, part
        console = Console.make(app)
        assert console.sessions.clock is clock and console.started_at == NOW
        doc = Ledger(app.store, "user:ana", clock).put("notes", {"v": 1})
        assert app.store.history("notes", doc["_id"])[0].at == NOW  # the store writes the clock's time
        clock.advance(90_000)
        later = NOW + 90_000
        assert overview(app)["at"] == later and app.context("vault", "tick:vault").now() == later
        assert app.scheduler.context(app.scheduler.ticks["sweep"]).db.now() == later  # a tick's ctx.db
        web, pages = Web(app.store, app.settings, clock, None, app.context), _Pages(console)  # what a product's routes and pages are handed
        for handed in (web.ledger("user:ana"), pages.ledger("user:ana")):
            assert handed.clock is clock and handed.now() == later
        written = pages.ledger("user:ana").put("notes", {"v": 2})
        assert app.store.history("notes", written["_id"])[0].at == later
        token = add_user(app.store, "ana", clock=clock)
        assert app.store.get("auth", f"token:{token.split('_')[1]}")["createdAt"] == later
        cookie, session = console.sessions.sign_in(token)
        assert session.expires_at > later  # sessions live on the same clock
        request = Request({"type": "http", "method": "GET", "path": "/metrics", "query_string": b"", "client": ("192.0.2.1", 1),
                           "headers": [(b"authorization", f"Bearer {token}".encode())]})
        assert console.metrics_allowed(request)
    finally:
        app.stop()


def test_a_command_writes_and_acts_at_the_time_its_entry_point_gave(tmp_path):
    clock = FakeClock(NOW)
    state = State(None, f"sqlite:///{tmp_path}/cli.db", clock=clock)
    try:
        written = state.ledger("user:ana").put("notes", {"v": 1})
        assert state.store.history("notes", written["_id"])[0].at == NOW
        clock.advance(5_000)
        assert state.context("vault", "tick:vault").now() == NOW + 5_000
    finally:
        state.close()


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_no_store_offers_its_clock(tmp_path, kind):
    clock = FakeClock(NOW)
    store = open_backend(f"sqlite:///{tmp_path}/s.db", None, clock) if kind == "sqlite" else memory_store(None, clock)
    try:
        assert not hasattr(store, "clock")
        store.put("notes", {"v": 1}, "n", actor="user:ana")
        assert store.history("notes", "n")[0].at == NOW
    finally:
        store.close()


def _modules(*packages: str):
    for package in packages:
        yield from sorted((ROOT / package).rglob("*.py"))


def _reaches_a_stores_clock(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("clock", "_clock"):
            base = node.value
            named = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""
            if "store" in named or (node.attr == "_clock" and named != "self"):  # its own clock, or another's
                found.append(f"line {node.lineno}: {named}.{node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value in ("clock", "_clock"):
                found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
    return found


@pytest.mark.parametrize("path", list(_modules("hub", *PRODUCTS, "ledger")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_reads_the_time_through_a_store(path):
    if str(path.relative_to(ROOT)) in STORES:
        return
    found = _reaches_a_stores_clock(ast.parse(path.read_text()))
    assert not found, f"{path.relative_to(ROOT)} reaches a store's clock ({'; '.join(found)}): use the clock it was given"


@pytest.mark.parametrize("path", list(_modules("hub")), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_hub_names_the_wall_clock_in_its_entry_point_only(path):
    if path.relative_to(ROOT) == Path("hub/cli.py"):
        return
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name) and node.id in ("SYSTEM", "SystemClock"):
            found.append(f"line {node.lineno}: {node.id}")
        if isinstance(node, ast.alias) and node.name in ("SYSTEM", "SystemClock"):
            found.append(f"import {node.name}")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in (("time", "time"), ("time", "time_ns"), ("datetime", "now"), ("datetime", "utcnow")):
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr}()")
    assert not found, f"{path.relative_to(ROOT)} reads the wall clock ({'; '.join(found)}): use the clock the composition root gave"


@pytest.mark.parametrize("path", list(_modules(*PRODUCTS)), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_tick_or_handler_reads_the_time_from_its_context(path):
    found = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        has_ctx = any(a.arg == "ctx" for a in (*fn.args.args, *fn.args.kwonlyargs))
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "now":
                target = node.func.value
                if isinstance(target, ast.Attribute) and target.attr == "db" and isinstance(target.value, ast.Name) and target.value.id == "ctx":
                    found.append(f"line {node.lineno}: ctx.db.now()")
                elif has_ctx and isinstance(target, ast.Name) and target.id in ("db", "ledger"):
                    found.append(f"line {node.lineno}: {target.id}.now() beside ctx")
    assert not found, f"{path.relative_to(ROOT)}: {'; '.join(found)}: read ctx.now()"
