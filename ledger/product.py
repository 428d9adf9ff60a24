"""A product is one declaration: what it adds to a hub.

Each product package (``vault``, ``bot``, ``publishers``, and the engine's own reference jobs)
exports a ``Product``: its machines, who may write its free-form databases, the fields its
ticks and handlers query (so indexes are declared, never a side effect of a read), its
settings section, its ticks and handlers (built from that section, and only when the product
is configured), its CLI groups, its HTTP routes, its console pages and its metrics. The hub composes the products and holds no
product logic.

Keep the module that declares a product light: the ``ticks``/``handlers`` factories import
what they run (the Bluesky adapter, say) inside their body, and the settings section (a pydantic model,
``ledger.section.Section``) is named as ``"module:Class"``, so a product that is not
configured costs nothing to a hub, and the CLI lists commands without loading pydantic.

    PRODUCT = Product(
        "bot", "Mention builds",
        machines=[MENTIONS], settings="bot.settings:BotSettings",
        ticks=bot_ticks,                      # (section) -> [Tick("ingest", section.ingest_every, ingest, section)]
        cli={"build": "bot.cli:build_group"},
    )
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .actor import ActorPattern
from .clock import Clock
from .context import Context
from .document import check_db, check_field
from .feed import Handler
from .machine import Machine, Rules
from .scheduler import Tick
from .store import Documents, Ledger, StatusCount, Store


@dataclass(frozen=True)
class Policy:
    """Who may write free-form documents (no machine governs them) in ``db``, and who blind."""

    db: str
    free: tuple[ActorPattern, ...] | None = None
    blind: tuple[ActorPattern, ...] | None = None


class Env(Protocol):
    """What a product's CLI commands get from the hub as click's ``ctx.obj``."""

    @property
    def remote(self) -> bool:
        """True when the command talks to a hub over HTTP (``--hub``)."""

    @property
    def store(self) -> Documents:
        """The local store, or the hub's over HTTP."""

    def actor(self, as_actor: str | None = None) -> str:
        """Who the command writes as: ``--as``, the settings, or (over a hub) the credential."""

    @property
    def clock(self) -> Clock:
        """The command's clock (the CLI's composition root makes it)."""

    def ledger(self, as_actor: str | None = None) -> Ledger:
        """The store bound to the command's actor (``actor(as_actor)``), on the command's clock."""

    def section(self, name: str) -> Any:
        """A product's settings section."""

    def context(self, product: str, actor: str) -> Context:
        """A backend context on the local store (``vault put --verify`` acts as ``tick:vault``)."""


class Web(Protocol):
    """What the hub hands a product's HTTP routes (``Product.api``): the product builds its own
    ``fastapi.APIRouter`` from it, and the hub mounts it behind its gate. The gate has checked
    the credential before any route runs; ``principal`` is the FastAPI dependency that gives the
    authenticated person or device (``.actor``), whose writes the machines judge as usual."""

    @property
    def store(self) -> Store:
        """The hub's store."""

    @property
    def settings(self) -> Any:
        """The hub's settings (``section(name)`` gives a product's section)."""

    @property
    def principal(self) -> Callable[..., Any]:
        """The FastAPI dependency: the authenticated principal (``.actor``)."""

    @property
    def clock(self) -> Clock:
        """The hub's one clock."""

    def ledger(self, actor: str) -> Ledger:
        """The hub's store bound to ``actor`` (the principal's), on the hub's clock."""

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Await ``fn(*args, **kwargs)`` in the API's threads (store calls never run on the event loop)."""

    def context(self, product: str, actor: str) -> Context:
        """A backend context for ``actor`` of ``product`` (an endpoint that acts as a tick, e.g. "verify now")."""


class Pages(Protocol):
    """What the hub's console hands a product's pages (``Product.pages``): the console's frame
    (sign-in, sessions, CSRF on every form, the templates' base and macros, security headers),
    so a product's page is its handler and its template and nothing else. Handlers are
    ``async def page(request) -> Response`` wrapped with ``page``; templates extend
    ``base.html`` and live in the product's own ``templates/`` folder (``Product.templates``)."""

    @property
    def store(self) -> Store:
        """The hub's store."""

    @property
    def settings(self) -> Any:
        """The hub's settings."""

    @property
    def clock(self) -> Clock:
        """The hub's one clock."""

    def ledger(self, actor: str) -> Ledger:
        """The hub's store bound to ``actor`` (the signed-in person's), on the hub's clock: the machines judge its writes."""

    def page(self, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """The handler, sending a person without a session to sign in and answering a refused form."""

    async def session(self, request: Any) -> Any:
        """The signed-in person's session (``.actor``, ``.csrf``); raises to send them to sign in."""

    async def form(self, request: Any, session: Any) -> dict[str, str]:
        """A POSTed form, its CSRF value and origin checked (a refusal answers 403 and writes nothing)."""

    def render(self, template: str, request: Any, session: Any, *, status_code: int = 200, **values: Any) -> Any:
        """A page from a template (``title=`` names it), with the frame's navigation and live updates."""

    def error(self, request: Any, session: Any, status: int, reason: str) -> Any:
        """The error page: ``reason`` as said, answered with ``status``."""

    def done(self, url: str, sentence: str) -> Any:
        """After a form that wrote: back to ``url``, which shows ``sentence`` (303)."""

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Await ``fn(*args, **kwargs)`` off the event loop."""

    def context(self, product: str, actor: str) -> Context:
        """A backend context for ``actor`` of ``product``."""

    def machine_for(self, db: str, doc: dict[str, Any]) -> Machine | None:
        """The machine that governs ``doc`` in ``db``."""

    def set_zone(self, session: Any, zone: str | None) -> None:
        """Store the signed-in person's time zone (an IANA name, checked: ``Invalid`` otherwise; None: their
        browser's again), as ``skyhub user zone`` does; their next page (``session.zone``) is in it."""


@dataclass
class Offered:
    """What a configured product offers the hub and the other products (``Product.services``).

    ``secrets`` is the vault as one actor sees it (``ctx.vault`` in every tick and handler);
    ``health`` a section of ``/health`` (``{"ok": ...}``; not ok makes the hub unhealthy);
    ``notice`` one line the hub says when it starts (or None); ``attention`` the product's items
    for "needs a person" (dicts with ``what``, ``title``, ``reason`` and optionally ``db``,
    ``id``, ``status``, ``since``, ``rank``: lower comes first). Each is called when asked for."""

    secrets: Callable[[Any], Any] | None = None
    health: Callable[[Store], dict[str, Any]] | None = None
    notice: Callable[[], str | None] | None = None
    attention: Callable[[Store, int], list[dict[str, Any]]] | None = None
    overview: Callable[[Store], dict[str, Any]] | None = None  # more of the overview's data (the probes' table)


@dataclass(frozen=True)
class Metric:
    """One metric family a product adds to ``/metrics`` (the hub writes it in Prometheus's text format):
    ``kind`` "gauge" or "counter" (a counter's samples are written as ``<name>_total``), ``samples`` the
    label values (one per name in ``labels``) and the value of each."""

    name: str
    help: str
    kind: Literal["gauge", "counter"] = "gauge"
    labels: tuple[str, ...] = ()
    samples: Sequence[tuple[tuple[str, ...], float]] = ()


class Readings(Protocol):
    """What a product's metrics are read from on each scrape of ``/metrics``: bookkeeping the hub
    already keeps, cheap to read (no table scans)."""

    def counts(self) -> Sequence[StatusCount]:
        """Live documents by database, kind and status (``store.counts()``, read once a scrape; empty when the store failed)."""

    def outcomes(self) -> Sequence[tuple[str, str, str, int]]:
        """(machine name, platform, status, count) of every write that put a document in a terminal or failed
        state, read from the change log since the hub started (``platform``: the document's, or "")."""


def _none(section: Any) -> Sequence[Any]:
    return ()


@dataclass(frozen=True)
class Product:
    """What a product adds to a hub. See the module docstring."""

    name: str  # also the name of its settings section
    summary: str
    machines: Sequence[Machine] = ()
    policies: Sequence[Policy] = ()
    indexes: Sequence[tuple[str, str]] = ()  # (db, field) its ticks and handlers query
    settings: str | type[Any] | None = None  # its section ``[<name>]``: a ``ledger.Section``, or "module:Class" to load it only when settings are read
    ticks: Callable[[Any], Sequence[Tick]] = _none  # (its settings section) -> the ticks to run
    tick_help: Mapping[str, str] = field(default_factory=dict)  # every tick it can run -> what it does (help, README)
    handlers: Callable[[Any], Sequence[Handler]] = _none
    cli: Mapping[str, str] = field(default_factory=dict)  # command group -> "module:attribute", imported when used
    api: str | None = None  # "module:function": function(web: Web) -> its fastapi.APIRouter, imported when the hub serves
    api_paths: Sequence[str] = ()  # its routes' path prefixes: given, the hub makes the router on the first request under one
    uploads: Mapping[str, int] = field(default_factory=dict)  # path of one of its routes -> the most bytes of a binary body there
    services: str | None = None  # "module:function": function(settings) -> Offered, what it offers the hub and the others
    pages: str | None = None  # "module:function": function(pages: Pages) -> its console routes (starlette Routes)
    nav: Sequence[tuple[str, str]] = ()  # (path, label) of its pages in the console's navigation
    templates: str | None = None  # the package whose templates/ folder holds its pages' templates
    doc_actions: str | None = None  # "module:function": function(db, doc, actor, machine) -> [(to, label, form URL)], or None
    doc_images: str | None = None  # "module:function": function(db, doc) -> {field: [{"src": its console URL, "alt": ...}]}, or None
    metrics: str | None = None  # "module:function": function(readings: Readings) -> [Metric], called on every scrape of /metrics
    private: Mapping[str, str] = field(default_factory=dict)  # db -> why the documents API does not reach it
    redact: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # db -> fields no change stream or page shows
    pausable: Mapping[str, str] = field(default_factory=dict)  # platform -> what waits while it (or one of its accounts) is paused

    def __post_init__(self) -> None:
        for db, name in self.indexes:
            check_db(db)
            check_field(name)

    def section_model(self) -> type[Any] | None:
        """The settings section's model class (imported now if declared by name)."""
        if self.settings is None or not isinstance(self.settings, str):
            return self.settings
        module, _, name = self.settings.partition(":")
        model: type[Any] = getattr(importlib.import_module(module), name)
        return model

    def offered(self, settings: Any) -> Offered:
        """What this product offers, built from the hub's ``settings`` (nothing when it declares no services)."""
        if self.services is None:
            return Offered()
        module, _, name = self.services.partition(":")
        made: Offered = getattr(importlib.import_module(module), name)(settings)
        return made

    def console_routes(self, pages: Pages) -> list[Any]:
        """The product's console routes made for ``pages`` ([] when it has none)."""
        if self.pages is None:
            return []
        module, _, name = self.pages.partition(":")
        routes: list[Any] = list(getattr(importlib.import_module(module), name)(pages))
        return routes

    def metric_reader(self) -> Callable[[Readings], Sequence[Metric]] | None:
        """The product's metrics function (``metrics``), or None."""
        if self.metrics is None:
            return None
        module, _, name = self.metrics.partition(":")
        found: Callable[[Readings], Sequence[Metric]] = getattr(importlib.import_module(module), name)
        return found

    def actions(self) -> Callable[..., Any] | None:
        """The product's document actions for the console's document page, or None."""
        if self.doc_actions is None:
            return None
        module, _, name = self.doc_actions.partition(":")
        found: Callable[..., Any] = getattr(importlib.import_module(module), name)
        return found

    def images(self) -> Callable[[str, dict[str, Any]], Mapping[str, Sequence[Mapping[str, str]]] | None] | None:
        """How the document page shows the images of this product's documents (``doc_images``), or None: given
        (db, doc), the thumbnails of each image field, each a console URL that the product serves itself
        (through the guarded fetcher: the browser never loads an address a document names), or None."""
        if self.doc_images is None:
            return None
        module, _, name = self.doc_images.partition(":")
        found: Callable[[str, dict[str, Any]], Mapping[str, Sequence[Mapping[str, str]]] | None] = getattr(importlib.import_module(module), name)
        return found

    def router(self, web: Web) -> Any:
        """The product's HTTP routes (a ``fastapi.APIRouter``) made for ``web``, or None when it has none."""
        if self.api is None:
            return None
        module, _, name = self.api.partition(":")
        return getattr(importlib.import_module(module), name)(web)

    def declare(self, rules: Rules) -> None:
        """Add this product's machines, write policies and indexes to ``rules``."""
        for machine in self.machines:
            rules.declare(machine)
        for policy in self.policies:
            rules.allow(policy.db, free=policy.free, blind=policy.blind)
        for db, name in self.indexes:
            rules.index(db, name)
