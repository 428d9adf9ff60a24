"""Actors: who writes a document, and patterns that name who may.

An actor is a string ``kind:name`` (``user:ana``, ``device:builder``,
``handler:on_change``, ``tick:sweep``) or the bare ``admin``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from .errors import Invalid

KINDS = ("user", "device", "handler", "tick")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")


@lru_cache(maxsize=1024)
def parse_actor(actor: str) -> tuple[str, str]:
    """Split ``kind:name`` (or ``admin``) and check both halves; raise Invalid otherwise."""
    if actor == "admin":
        return "admin", ""
    kind, sep, name = actor.partition(":")
    if not sep or kind not in KINDS or not _NAME.match(name):
        raise Invalid(
            f"actor {actor!r} is not valid: use admin or one of "
            + ", ".join(f"{k}:NAME" for k in KINDS)
        )
    return kind, name


RoleOf = Callable[[], "str | None"]
"""The writing actor's role, asked for only when a pattern or a guard needs it (see ``Rules.roles_from``)."""


@dataclass(frozen=True)
class ActorPattern:
    """Matches actors of one kind, optionally with one name, and for people optionally only those
    holding one of ``roles``.

    Roles are plain names the engine does not interpret: the hub tells the rules how to find a
    person's role (``Rules.roles_from``), in the write's transaction. Where no role can be known
    (rules without a role source: the engine on its own, a test), a pattern with roles admits
    every actor of its kind."""

    kind: str
    name: str | None = None
    roles: tuple[str, ...] | None = None

    def matches(self, actor: str, role: RoleOf | None = None) -> bool:
        """Whether ``actor`` is one this pattern admits (``role``: the actor's role, when the rules can say)."""
        kind, _, name = actor.partition(":")
        if kind != self.kind or (self.name is not None and name != self.name):
            return False
        return self.roles is None or role is None or role() in self.roles

    def __str__(self) -> str:
        if self.kind == "admin":
            return "admin"
        base = f"{self.kind}:{self.name or '*'}"
        return f"{base} ({' or '.join(self.roles)})" if self.roles is not None else base


def user(name: str | None = None, *, roles: Sequence[str] | None = None) -> ActorPattern:
    """People: ``user:<name>``, or any user; with ``roles``, only people holding one of them."""
    return ActorPattern("user", name, tuple(roles) if roles is not None else None)


def device(name: str | None = None) -> ActorPattern:
    """Devices signing requests: ``device:<name>``, or any device."""
    return ActorPattern("device", name)


def handler(name: str | None = None) -> ActorPattern:
    """Feed handlers: ``handler:<name>``, or any handler."""
    return ActorPattern("handler", name)


def tick(name: str | None = None) -> ActorPattern:
    """Scheduled ticks: ``tick:<name>``, or any tick."""
    return ActorPattern("tick", name)


ADMIN = ActorPattern("admin")
