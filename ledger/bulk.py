"""Bulk actions: one move (``retry``, ``cancel``, ``dismiss``) on every document a filter selects,
through the machines, recorded in the ``audit`` database.

    outcome = bulk(Ledger(store, "user:ana", clock), rules, "jobs", "retry", Filter(status="failed"))

Each selected document is written with the revision it was read at, through its machine's move
(``ledger.move``), as the person: the machine's guards judge every write, a refusal is counted
and listed with its reason (never forced), and a document another writer changed since it was
read is refused for that document only (``Conflict``), the others going ahead. A dry run writes
nothing and says what would happen: the count, a sample, the warnings (a publish that may have
gone out). A real run is recorded as one ``bulk-action`` document in ``audit``: who, when, the
filter, the counts and the ids.

The filter: ``status`` (indexed), ``kind`` (the machine's discriminator: ``type`` or ``kind``),
``field`` = ``key`` (a string, as ``skyhub db query`` takes it), ``error`` (words of
``lastError``, or a group's ``fp:...`` from ``ledger.fingerprint``). Without a status or a field,
the documents in the states the move leaves are read.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .actor import ADMIN, user
from .document import check_db, check_field
from .errors import Conflict, Forbidden, Invalid, LedgerError, NotFound, Usage
from .fingerprint import matches
from .machine import Machine, Rules
from .move import VERBS, Move
from .store import Documents, Ledger, Write
from .text import iso

Doc = dict[str, Any]
AUDIT = "audit"
AUDIT_KIND = "bulk-action"
SAMPLE = 5  # documents shown before a person confirms
MAX_LISTED = 5_000  # ids (and refusals) an audit document lists; past that it says how many more there were
PAGE = 500  # documents read per query
BATCH = 200  # moves written per transaction (``put_many``): each is still judged, and refused, on its own
NEWEST = 9_999_999_999_999  # epoch ms (year 2286) that audit ids count down from


def audit_machine() -> Machine:
    """Audit records: written once by the person who acted, never changed (an admin may delete one)."""
    return Machine(AUDIT, kind=AUDIT_KIND, start={"recorded": None}, edges=[], create_by=[user(), ADMIN])


@dataclass(frozen=True)
class Filter:
    """Which documents of a database a bulk action selects (see the module docstring)."""

    status: str | None = None
    kind: str | None = None
    field: str | None = None
    key: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if (self.field is None) != (self.key is None):
            raise Usage("a field filter needs both --field and --key (e.g. --field platform --key ig)")
        if self.field is not None:
            check_field(self.field)
        for name in ("status", "kind", "key", "error"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value or len(value) > 512):
                raise Invalid(f"filter {name} must be a non-empty string of at most 512 characters")

    def as_dict(self) -> dict[str, str]:
        """The filter's fields that are set."""
        return {k: v for k in ("status", "kind", "field", "key", "error") if (v := getattr(self, k)) is not None}

    def selects(self, doc: Doc, machine: Machine | None) -> bool:
        """Whether ``doc`` (read by an index on one of the fields) meets every part of the filter."""
        if self.status is not None and doc.get("status") != self.status:
            return False
        if self.kind is not None and (machine is None or doc.get(machine.kind_field) != self.kind):
            return False
        if self.field is not None and doc.get(self.field) != self.key:
            return False
        return self.error is None or matches(doc, self.error)


@dataclass
class Outcome:
    """What a bulk action did (or, for a dry run, would do)."""

    db: str
    verb: str
    filter: Filter
    actor: str
    at: int
    dry_run: bool
    matched: int = 0
    written: list[str] = field(default_factory=list)  # ids moved (dry run: that would be)
    refused: list[dict[str, str]] = field(default_factory=list)  # {id, status, reason}
    conflicts: int = 0  # of the refused: changed by another writer since they were read
    warnings: list[dict[str, str]] = field(default_factory=list)  # {id, warning}
    sample: list[dict[str, Any]] = field(default_factory=list)  # {id, status, error} of the first few
    audit: str | None = None  # the id of the audit record
    digest: str = ""  # of the selected set (``digest``)
    changed: bool = False  # the set was not the one expected: nothing was written

    def as_dict(self) -> dict[str, Any]:
        """The outcome as JSON-ready data."""
        return {
            "db": self.db, "action": self.verb, "filter": self.filter.as_dict(), "by": self.actor, "at": self.at,
            "dryRun": self.dry_run, "matched": self.matched, "written": len(self.written), "refused": len(self.refused),
            "conflicts": self.conflicts, "ids": self.written, "refusals": self.refused, "warnings": self.warnings,
            "sample": self.sample, "audit": self.audit, "digest": self.digest, "changed": self.changed,
        }


def moves_in(rules: Rules, db: str, verb: str) -> list[tuple[Machine, Move]]:
    """The machines of ``db`` that declare ``verb``, with the move."""
    return [(m, m.moves[verb]) for m in rules.machines if m.db == db and verb in m.moves]


def select(reader: Documents, rules: Rules, db: str, verb: str, flt: Filter) -> Iterator[Doc]:
    """Every head document of ``db`` the filter selects (by an index: status, the field, or the states
    ``verb`` leaves), each once."""
    if flt.status is not None:
        yield from _selected(reader, rules, db, flt, "status", flt.status)
    elif flt.field is not None:
        yield from _selected(reader, rules, db, flt, flt.field, flt.key)
    else:
        states = sorted({s for m, move in moves_in(rules, db, verb) for s in move.src
                         if flt.kind is None or m.kind == flt.kind})
        for state in states:
            yield from _selected(reader, rules, db, flt, "status", state)


def _selected(reader: Documents, rules: Rules, db: str, flt: Filter, name: str, key: Any) -> Iterator[Doc]:
    after: str | None = None
    while True:
        page = reader.query(db, name, key, PAGE, after)
        for doc in page.docs:
            if flt.selects(doc, rules.machine_for(db, doc)):
                yield doc
        if page.next is None:
            return
        after = page.next


def bulk(db: Ledger, rules: Rules, dbname: str, verb: str, flt: Filter, *, dry_run: bool = False,
         sample: int = SAMPLE, expect: str | None = None) -> Outcome:
    """Apply ``verb`` to every document of ``dbname`` that ``flt`` selects, as ``db.actor`` (see the module
    docstring); record it in ``audit`` unless ``dry_run``. ``expect``: the ``digest`` of the set a person
    confirmed; when the set read now differs, nothing is written and the outcome says ``changed``."""
    check_db(dbname)
    if verb not in VERBS:
        raise Usage(f"no bulk action {verb!r}: use one of {', '.join(VERBS)}")
    if not (db.actor == "admin" or db.actor.startswith("user:")):
        raise Forbidden(f"bulk actions are a person's: {db.actor} may not make them (sign in as a person)")
    if dbname == AUDIT:
        raise Forbidden("audit records are never moved: they say what was done")
    offered = moves_in(rules, dbname, verb)
    if not offered:
        where = sorted({m.db for m in rules.machines if verb in m.moves})
        raise NotFound(f"nothing in {dbname!r} can be {_past(verb)}: {verb} applies to {', '.join(where) or 'no database'}")
    out = Outcome(dbname, verb, flt, db.actor, db.now(), dry_run)
    docs = list(select(db.store, rules, dbname, verb, flt))  # read first: writing moves documents out of the index read
    out.matched = len(docs)
    out.digest = digest([str(d["_id"]) for d in docs])
    if expect is not None and expect != out.digest:
        out.changed, out.dry_run, dry_run = True, True, True  # say what is there now; act on nothing
    batch: list[tuple[Doc, Write]] = []  # moves judged here, written BATCH at a time
    for doc in docs:
        doc_id = str(doc["_id"])
        machine = rules.machine_for(dbname, doc)
        move = machine.moves.get(verb) if machine is not None else None
        if len(out.sample) < sample:
            out.sample.append({"id": doc_id, "status": doc.get("status"), "error": str(doc.get("lastError") or doc.get("error") or "")[:300]})
        if machine is None or move is None:
            what = f"a {machine.kind}" if machine is not None else "a document no machine governs"
            out.refused.append({"id": doc_id, "status": str(doc.get("status")), "reason": f"{what} cannot be {_past(verb)}"})
            continue
        if doc.get("status") not in move.src:
            out.refused.append({"id": doc_id, "status": str(doc.get("status")),
                                "reason": f"a {machine.kind} that is {doc.get('status')} cannot be {_past(verb)} "
                                          f"(only one that is {' or '.join(move.src)})"})
            continue
        warning = move.warn(doc) if move.warn is not None else None
        if warning:
            out.warnings.append({"id": doc_id, "warning": warning})
        if dry_run:
            out.written.append(doc_id)
            continue
        batch.append((doc, Write(move.body(doc, db.now()), doc_id, if_rev=doc["_rev"])))
        if len(batch) >= BATCH:
            _write(db, dbname, batch, out)
    if not dry_run:
        _write(db, dbname, batch, out)
        out.audit = record(db, out)
    return out


def _write(db: Ledger, dbname: str, batch: list[tuple[Doc, Write]], out: Outcome) -> None:
    """Write the moves gathered so far in one transaction (``put_many``) and count each outcome; empties ``batch``."""
    if not batch:
        return
    for (doc, _), result in zip(batch, db.put_many(dbname, [w for _, w in batch]), strict=True):
        doc_id = str(doc["_id"])
        if isinstance(result, Conflict):
            out.conflicts += 1
            out.refused.append({"id": doc_id, "status": str(doc.get("status")),
                                "reason": "changed by another writer since it was read: left as it is now"})
        elif isinstance(result, LedgerError):
            out.refused.append({"id": doc_id, "status": str(doc.get("status")), "reason": result.reason})
        else:
            out.written.append(doc_id)
    batch.clear()


def record(db: Ledger, out: Outcome) -> str | None:
    """Write the outcome as a ``bulk-action`` document in ``audit``; its id (None: it could not be written,
    which is logged by the caller's store and said in the outcome)."""
    body: dict[str, Any] = {
        "kind": AUDIT_KIND, "status": "recorded", "action": out.verb, "db": out.db, "filter": out.filter.as_dict(),
        "by": out.actor, "at": out.at, "finishedAt": db.now(),
        "counts": {"matched": out.matched, "written": len(out.written), "refused": len(out.refused),
                   "conflicts": out.conflicts, "warnings": len(out.warnings)},
        "ids": out.written[:MAX_LISTED], "refusals": out.refused[:MAX_LISTED],
    }
    if len(out.written) > MAX_LISTED:
        body["idsNotListed"] = len(out.written) - MAX_LISTED
    if len(out.refused) > MAX_LISTED:
        body["refusalsNotListed"] = len(out.refused) - MAX_LISTED
    if out.warnings:
        body["warnings"] = out.warnings[:MAX_LISTED]
    try:
        doc_id = audit_id(out.at, out.verb)
        return str(db.put(AUDIT, body, doc_id, create_only=True)["_id"])
    except LedgerError as exc:
        out.warnings.append({"id": "", "warning": f"the audit record could not be written: {exc.reason}"})
        return None


def audit_id(at: int, verb: str) -> str:
    """An audit record's id: in id order (the order an index pages in) the newest record comes first,
    and the id still says when (``r8219...-2026-12-02T15:04:05.12Z-retry-1a2b3c``)."""
    return f"r{NEWEST - at:013d}-{iso(at)}-{verb}-{uuid.uuid4().hex[:6]}"


def digest(ids: list[str]) -> str:
    """What identifies a selected set: 16 hex digits of the SHA-256 of its sorted ids (a person confirms
    a set; the server acts only when the set it reads again is the same)."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def _past(verb: str) -> str:
    return {"retry": "retried", "cancel": "cancelled", "dismiss": "dismissed"}.get(verb, verb)

