"""Moves: the person edges of a machine, named for what an operator does (``retry``, ``cancel``,
``dismiss``), with the fields each one resets.

A machine declares its moves beside its edges (``Machine(moves=[...])``); a move is only a name
and a body for an edge a person may already take, so the machine's guards still judge every
write. Bulk actions (``ledger.bulk``), the console's buttons and the CLI apply a move the same
way: read the document, ``Move.body`` it, write it with the revision that was read.

    Move("retry", "failed", "pending", reset={"attempts": 0, "claimId": None, "leaseUntil": None},
         count="retries", stamp="retriedAt")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Doc = dict[str, Any]

VERBS = ("retry", "cancel", "dismiss")
"""What an operator can do to many documents at once (``skyhub db bulk VERB``)."""


@dataclass(frozen=True)
class Move:
    """A named person edge: documents in ``src`` go to ``dst`` with ``reset`` applied (a value of None
    removes the field), ``count`` counted up by one and ``stamp`` set to the time of the move.
    ``warn(doc)``: a sentence when making the move repeats a side effect that may have happened."""

    verb: str
    src: tuple[str, ...]
    dst: str
    reset: Mapping[str, Any] = field(default_factory=dict)
    count: str | None = None
    stamp: str | None = None
    warn: Callable[[Doc], str | None] | None = None
    label: str = ""

    def __init__(self, verb: str, src: str | Sequence[str], dst: str, *, reset: Mapping[str, Any] | None = None,
                 count: str | None = None, stamp: str | None = None, warn: Callable[[Doc], str | None] | None = None,
                 label: str = "") -> None:
        object.__setattr__(self, "verb", verb)
        object.__setattr__(self, "src", (src,) if isinstance(src, str) else tuple(src))
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "reset", dict(reset or {}))
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "stamp", stamp)
        object.__setattr__(self, "warn", warn)
        object.__setattr__(self, "label", label or verb.capitalize())

    def body(self, doc: Doc, now_ms: int) -> Doc:
        """The new body of ``doc`` (a head, with ``_id`` and ``_rev``) after this move at ``now_ms``."""
        body = {k: v for k, v in doc.items() if not k.startswith("_")}
        body["status"] = self.dst
        for name, value in self.reset.items():
            if value is None:
                body.pop(name, None)
            else:
                body[name] = value
        if self.count is not None:
            before = body.get(self.count, 0)
            body[self.count] = (before if isinstance(before, int) and not isinstance(before, bool) else 0) + 1
        if self.stamp is not None:
            body[self.stamp] = now_ms
        return body

    def describe(self) -> dict[str, Any]:
        """The move as plain data (for the API and the reference)."""
        return {"verb": self.verb, "label": self.label, "from": list(self.src), "to": self.dst,
                "reset": sorted(self.reset), "count": self.count, "stamp": self.stamp, "warns": self.warn is not None}
