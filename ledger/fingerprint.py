"""Grouped errors: a fingerprint of a document's ``lastError`` (a dead letter's ``error``) with the
parts that differ from one occurrence to the next normalised, so ten jobs that failed the same
way are one group of ten.

    >>> pattern("lease expired during attempt 3 of 3 (job 4f1c2d9e0a7b)")
    'lease expired during attempt <n> of <n> (job <id>)'

Normalised, in this order: addresses (``https://...``, ``at://...``) to ``<url>``, DIDs to
``<did>``, UUIDs and hex strings of 8 or more characters holding a digit to ``<id>``, ISO 8601
times to ``<time>``, numbers to ``<n>``, quoted text to ``'<text>'``, runs of spaces to one. A
group's id is ``fp:`` and 10 hex digits of the pattern's SHA-256 (``fingerprint``); ``--error
fp:...`` selects exactly the documents of that group.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .errors import LedgerError
from .machine import Rules
from .store import Documents

Doc = dict[str, Any]
MAX_PATTERN = 300  # characters of a pattern kept (errors can be whole logs: the first lines decide)
EXAMPLES = 3  # example documents kept per group
SCAN = 2_000  # documents read per state when grouping: past that a group's count is "at least" (partial)
TIME_FIELDS = ("updatedAt", "finishedAt", "sweptAt", "at", "createdAt")  # when a document last moved, by convention

_RULES = [
    (re.compile(r"\b(?:https?|wss?|at)://\S+"), "<url>"),
    (re.compile(r"\bdid:[a-z0-9]+:[A-Za-z0-9._:%-]+"), "<did>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"), "<time>"),
    (re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"), "<id>"),
    (re.compile(r"(?<![<\w])[-+]?\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"'[^'\n]{1,200}'"), "'<text>'"),
    (re.compile(r'"[^"\n]{1,200}"'), '"<text>"'),
    (re.compile(r"\s+"), " "),
]


def error_of(doc: Doc) -> str | None:
    """The error a document carries: ``lastError``, else ``error`` (dead letters); None when it has none."""
    for name in ("lastError", "error"):
        value = doc.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


def pattern(text: str) -> str:
    """``text`` with what differs between occurrences normalised (see the module docstring)."""
    out = text.strip()[: MAX_PATTERN * 4]
    for rule, to in _RULES:
        out = rule.sub(to, out)
    return out.strip()[:MAX_PATTERN]


def fingerprint(text: str) -> str:
    """The group id of an error: ``fp:`` and 10 hex digits of its pattern's SHA-256."""
    return "fp:" + hashlib.sha256(pattern(text).encode()).hexdigest()[:10]


def time_of(doc: Doc) -> int | None:
    """When a document last moved, from its conventional fields (None: it does not say)."""
    for name in TIME_FIELDS:
        value = doc.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


@dataclass
class Group:
    """Documents of one kind, in one state, that failed the same way."""

    fingerprint: str
    pattern: str
    db: str
    kind: str | None
    status: str
    count: int = 0
    first_seen: int | None = None
    last_seen: int | None = None
    examples: list[str] = field(default_factory=list)
    example_error: str = ""
    machine: str | None = None
    actions: list[dict[str, Any]] = field(default_factory=list)  # the moves that apply: {verb, label, filter}
    partial: bool = False  # the state held more documents than were read: count is at least this

    def add(self, doc: Doc, error: str, at: int | None) -> None:
        """Count ``doc`` in the group."""
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(str(doc.get("_id")))
        if at is not None:
            if self.first_seen is None or at < self.first_seen:
                self.first_seen = at
            if self.last_seen is None or at >= self.last_seen:
                self.last_seen = at
                self.example_error = error[:1000]
        elif not self.example_error:
            self.example_error = error[:1000]

    def filter(self) -> dict[str, Any]:
        """The bulk filter that selects exactly this group."""
        out: dict[str, Any] = {"status": self.status, "error": self.fingerprint}
        if self.kind is not None:
            out["kind"] = self.kind
        return out

    def as_dict(self) -> dict[str, Any]:
        """The group as JSON-ready data."""
        return {"fingerprint": self.fingerprint, "pattern": self.pattern, "db": self.db, "kind": self.kind,
                "status": self.status, "count": self.count, "firstSeen": self.first_seen, "lastSeen": self.last_seen,
                "examples": self.examples, "exampleError": self.example_error, "machine": self.machine,
                "filter": self.filter(), "actions": self.actions, "partial": self.partial}


def group(docs: Iterable[Doc], db: str, status: str, kind: str | None = None) -> list[Group]:
    """The documents of ``db`` in ``status`` (of ``kind``) that carry an error, by fingerprint, largest first."""
    found: dict[str, Group] = {}
    for doc in docs:
        error = error_of(doc)
        if error is None:
            continue
        p = pattern(error)
        fp = fingerprint(error)
        g = found.get(fp)
        if g is None:
            g = found[fp] = Group(fp, p, db, kind, status)
        g.add(doc, error, time_of(doc))
    return sorted(found.values(), key=lambda g: (-g.count, -(g.last_seen or 0), g.fingerprint))


def matches(doc: Doc, text: str) -> bool:
    """Whether a document's error is selected by ``text``: a group's ``fp:...`` exactly, else any
    error holding ``text`` (letters' case ignored)."""
    error = error_of(doc)
    if error is None:
        return False
    if re.fullmatch(r"fp:[0-9a-f]{10}", text):
        return fingerprint(error) == text
    return text.casefold() in error.casefold()


def retried_from(rules: Rules, db: str | None = None) -> list[tuple[Any, str]]:
    """The (machine, state) pairs a person's retry leaves: where work waits for a person (``failed``,
    ``build-failed``, ``error``, an open dead letter), of ``db`` or of every database."""
    return [(m, s) for m in rules.machines if (db is None or m.db == db) and "retry" in m.moves for s in m.moves["retry"].src]


def error_groups(reader: Documents, rules: Rules, db: str | None = None, *, scan: int = SCAN) -> list[Group]:
    """The documents in the states a person's retry leaves (``retried_from``), grouped by fingerprint,
    largest first; at most ``scan`` read per state (a group of a state with more says ``partial``)."""
    out: list[Group] = []
    for machine, state in retried_from(rules, db):
        docs: list[Doc] = []
        after: str | None = None
        more = False
        try:
            while len(docs) < scan:
                page = reader.query(machine.db, "status", state, min(500, scan - len(docs)), after)
                docs += [d for d in page.docs if machine.governs(d)]
                after = page.next
                if after is None:
                    break
            more = after is not None
        except LedgerError:
            continue  # a database not made yet
        actions = [{"verb": m.verb, "label": m.label} for m in machine.moves.values() if state in m.src]
        for g in group(docs, machine.db, state, machine.kind):
            g.machine, g.actions, g.partial = machine.name, actions, more
            if g.last_seen is None:  # the documents do not say when they moved: their heads' history does
                times = [h[-1].at for i in g.examples if (h := _history(reader, machine.db, i))]
                g.first_seen, g.last_seen = (min(times), max(times)) if times else (None, None)
            out.append(g)
    return sorted(out, key=lambda g: (-g.count, -(g.last_seen or 0), g.fingerprint))


def _history(reader: Documents, db: str, doc_id: str) -> list[Any]:
    try:
        return reader.history(db, doc_id)
    except LedgerError:
        return []
