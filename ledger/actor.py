"""Actors: who writes a document, and patterns that name who may.

An actor is a string ``kind:name`` (``user:ana``, ``device:builder``,
``handler:on_change``, ``tick:sweep``) or the bare ``admin``.
"""

from __future__ import annotations

import re
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


@dataclass(frozen=True)
class ActorPattern:
    """Matches actors of one kind, optionally with one name."""

    kind: str
    name: str | None = None

    def matches(self, actor: str) -> bool:
        """Whether ``actor`` is one this pattern admits."""
        kind, _, name = actor.partition(":")
        return kind == self.kind and (self.name is None or name == self.name)

    def __str__(self) -> str:
        if self.kind == "admin":
            return "admin"
        return f"{self.kind}:{self.name or '*'}"


def user(name: str | None = None) -> ActorPattern:
    """People: ``user:<name>``, or any user."""
    return ActorPattern("user", name)


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
