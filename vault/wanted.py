"""Credentials the hub wants and the vault does not have: the credentials page lists each as
missing, with a paste button.

Two things want a credential:

- **the settings**: each product's settings section names the credentials it needs through a
  ``credentials()`` method returning ``[(vault ids, where)]``, the ids any one of which will do
  (the first is the one to paste): ``publish.accounts.bsky = "shop.bsky.social"`` wants
  ``bluesky:shop.bsky.social``, ``bot.handle`` the bot's account;
- **held work**: a document in a working state (not an end state of its machine) whose ``held``
  names a ``fix`` (``vault.hold``). They are found as the overview finds held work, through the
  status index, reading at most ``HELD_SCAN`` documents per state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ledger import LedgerError, Machine, Store

from .credentials import DB, PLATFORMS
from .hold import fix_for

HELD_SCAN = 1000  # documents read per working state (the store's largest page); the publish tick reads them all every run


@dataclass
class Missing:
    """A credential that something wants and the vault does not have."""

    platform: str
    account: str
    named_in: list[str] = field(default_factory=list)  # the settings that name it (``publish.accounts.bsky``)
    held: dict[str, int] = field(default_factory=dict)  # database -> documents held for it

    @property
    def id(self) -> str:
        """Its vault id."""
        return f"{self.platform}:{self.account}"

    def why(self) -> str:
        """Who wants it, in words."""
        parts = [f"named in {', '.join(self.named_in)}"] if self.named_in else []
        parts += [f"{n:,} held document{'s' if n != 1 else ''} in {db}" for db, n in sorted(self.held.items())]
        return "; ".join(parts)


def named(settings: Any) -> list[tuple[tuple[str, ...], str]]:
    """Every credential the settings' sections name (see the module docstring)."""
    out: list[tuple[tuple[str, ...], str]] = []
    for name in getattr(type(settings), "model_fields", {}):
        wants = getattr(getattr(settings, name, None), "credentials", None)
        if callable(wants):
            out += [(tuple(ids), str(where)) for ids, where in wants()]
    return out


def missing(store: Store, settings: Any, machine_for: Callable[[str, dict[str, Any]], Machine | None],
            have: Iterable[str]) -> list[Missing]:
    """The credentials wanted and not in ``have`` (the vault's ids), those the settings name first."""
    present = set(have)
    found: dict[str, Missing] = {}

    def want(cred_id: str) -> Missing | None:
        fix = fix_for(cred_id)
        if fix is None or cred_id in present:
            return None
        return found.setdefault(cred_id, Missing(fix["platform"], fix["account"]))

    for ids, where in named(settings):
        if ids and not present.intersection(ids) and (entry := want(ids[0])) is not None:
            entry.named_in.append(where)
    for db, doc in _held(store, machine_for):
        fix = doc["held"]["fix"]
        if isinstance(fix, dict) and fix.get("platform") in PLATFORMS and isinstance(fix.get("account"), str):
            entry = want(f"{fix['platform']}:{fix['account']}")
            if entry is not None:
                entry.held[db] = entry.held.get(db, 0) + 1
    return list(found.values())


def _held(store: Store, machine_for: Callable[[str, dict[str, Any]], Machine | None]) -> Iterable[tuple[str, dict[str, Any]]]:
    """(database, document) for held work with a fix, in the working states of every machine."""
    try:
        counts = store.counts()
    except LedgerError:
        return
    for c in counts:
        if c.db == DB or not c.n:
            continue
        # a count names the kind, not the field that holds it (kind, or type for jobs): ask with both
        machine = machine_for(c.db, {"kind": c.kind}) or machine_for(c.db, {"type": c.kind})
        if machine is None or c.status in machine.at_rest:  # held work waits in a state an actor moves on from
            continue
        try:
            page = store.query(c.db, "status", c.status, HELD_SCAN)
        except LedgerError:
            continue
        for doc in page.docs:
            held = doc.get("held")
            if machine.governs(doc) and isinstance(held, dict) and "fix" in held:
                yield c.db, doc


__all__ = ["HELD_SCAN", "Missing", "missing", "named"]
