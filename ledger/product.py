"""A product is one declaration: what it adds to a hub.

Each product package (``vault``, ``bot``, ``publishers``, and the engine's own reference jobs)
exports a ``Product``: its machines, who may write its free-form databases, the fields its
ticks and handlers query (so indexes are declared, never a side effect of a read), its
settings section, its ticks and handlers (built from that section, and only when the product
is configured), and its CLI groups. The hub composes the products and holds no product logic.

Keep the module that declares a product light: the ``ticks``/``handlers`` factories import
what they run (atproto, say) inside their body, so a product that is not configured costs
nothing to a hub or to a CLI command that does not use it.

    PRODUCT = Product(
        "bot", "Mention builds",
        machines=[MENTIONS], settings=BotSettings,
        ticks=bot_ticks,                      # (section) -> [Tick("ingest", section.ingest_every, ingest, section)]
        cli={"build": "bot.cli:build_group"},
    )
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from .actor import ActorPattern
from .document import check_db, check_field
from .feed import Handler
from .machine import Machine, Rules
from .scheduler import Tick, parse_interval

try:  # settings sections are pydantic models; the engine itself runs without pydantic
    from pydantic import BeforeValidator

    Interval = Annotated[float, BeforeValidator(parse_interval)]
    """A duration in settings: ``"30s"``, ``"1m"``, ``"250ms"`` or seconds; read as seconds."""
except ImportError:  # pragma: no cover - pydantic is a dependency of the hub
    Interval = float  # type: ignore[misc]


@dataclass(frozen=True)
class Policy:
    """Who may write free-form documents (no machine governs them) in ``db``, and who blind."""

    db: str
    free: tuple[ActorPattern, ...] | None = None
    blind: tuple[ActorPattern, ...] | None = None


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
    settings: type[Any] | None = None  # the pydantic model of its settings section
    ticks: Callable[[Any], Sequence[Tick]] = _none  # (its settings section) -> the ticks to run
    handlers: Callable[[Any], Sequence[Handler]] = _none
    cli: Mapping[str, str] = field(default_factory=dict)  # command group -> "module:attribute", imported when used

    def __post_init__(self) -> None:
        for db, name in self.indexes:
            check_db(db)
            check_field(name)

    def declare(self, rules: Rules) -> None:
        """Add this product's machines, write policies and indexes to ``rules``."""
        for machine in self.machines:
            rules.declare(machine)
        for policy in self.policies:
            rules.allow(policy.db, free=policy.free, blind=policy.blind)
        for db, name in self.indexes:
            rules.index(db, name)
