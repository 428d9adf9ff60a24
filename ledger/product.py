"""A product is one declaration: what it adds to a hub.

Each product package (``vault``, ``bot``, ``publishers``, and the engine's own reference jobs)
exports a ``Product``: its machines, who may write its free-form databases, the fields its
ticks and handlers query (so indexes are declared, never a side effect of a read), its
settings section, its ticks and handlers (built from that section, and only when the product
is configured), and its CLI groups. The hub composes the products and holds no product logic.

Keep the module that declares a product light: the ``ticks``/``handlers`` factories import
what they run (atproto, say) inside their body, and the settings section (a pydantic model,
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
from typing import Any, Protocol

from .actor import ActorPattern
from .context import Context
from .document import check_db, check_field
from .feed import Handler
from .machine import Machine, Rules
from .scheduler import Tick
from .store import Documents


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

    def section(self, name: str) -> Any:
        """A product's settings section."""

    def context(self, product: str, actor: str) -> Context:
        """A backend context on the local store (``vault put --verify`` acts as ``tick:vault``)."""


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

    def declare(self, rules: Rules) -> None:
        """Add this product's machines, write policies and indexes to ``rules``."""
        for machine in self.machines:
            rules.declare(machine)
        for policy in self.policies:
            rules.allow(policy.db, free=policy.free, blind=policy.blind)
        for db, name in self.indexes:
            rules.index(db, name)
