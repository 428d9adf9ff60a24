"""The overview: counts by database, kind and status, each machine's states with their live
counts, and what needs a person first. One function serves the console's front page,
``GET /v1/overview`` and ``skyhub status``, so the three always agree.

Everything here is bounded, whatever the size of the databases: the counts come from the
store's counters (``store.counts()``, kept in each write's transaction), and every list comes
from an indexed query of at most ``PER_STATE`` documents (``status`` is indexed in every
database; credentials through ``vault.kind``). What needs a person is found generically, from
the machines (their states and terminal states) and the conventional fields (``held``,
``leaseUntil`` with ``claimId``, ``lastError``, ``needsReauth``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ledger import DEADLETTERS, LedgerError, Machine, Rules, Store
from ledger.fingerprint import error_groups
from ledger.pause import paused
from ledger.text import duration

from ..auth import AUTH_DB
from ..samples import is_failure

if TYPE_CHECKING:
    from ..app import App

log = logging.getLogger(__name__)
PER_STATE = 50  # documents read per state when looking for held work and expired leases
FAILED_SHOWN = 20  # documents shown per failure state a person's retry does not leave
GROUP_SCAN = 500  # documents read per state a retry leaves, grouped by their error (past that a group says "at least")
PERSON_STATES = frozenset({"needs-person"})  # work that waits for a person's choice (a publish that cannot be told apart)
HIDDEN_DBS = frozenset({AUTH_DB})

# the order "needs a person" is shown in, what blocks work first: a product's items say their own rank
# (the vault's missing key 0, a credential that needs re-auth 1, a failing probe 9) and the engine's fit between
ORDER = ("held", "needs-person", "failed", "deadletter", "lease-expired", "tick-failed", "tick-late")
RANKS = {what: i + 2 for i, what in enumerate(ORDER)}  # 0 and 1: what blocks every product (the vault's key, credentials)


@dataclass
class Item:
    """One thing that needs a person: what, where, and why in words."""

    what: str
    title: str
    reason: str = ""
    db: str | None = None
    id: str | None = None
    status: str | None = None
    since: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    rank: int = -1  # lower comes first; -1: the rank of its kind in ORDER

    def __post_init__(self) -> None:
        if self.rank < 0:
            self.rank = RANKS.get(self.what, len(ORDER) + 2)

    def as_dict(self) -> dict[str, Any]:
        """The item as JSON-ready data."""
        out: dict[str, Any] = {"what": self.what, "title": self.title, "reason": self.reason}
        for key in ("db", "id", "status", "since"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update(self.extra)
        return out


def _item(d: dict[str, Any]) -> Item:
    """A product's item (a dict) as an Item."""
    known = {k: d[k] for k in ("db", "id", "status", "since") if d.get(k) is not None}
    extra = {k: v for k, v in d.items() if k not in ("what", "title", "reason", "db", "id", "status", "since", "rank")}
    return Item(str(d["what"]), str(d["title"]), str(d.get("reason") or ""), **known, extra=extra, rank=int(d.get("rank", -1)))


def overview(app: App, *, started_at: int | None = None) -> dict[str, Any]:
    """The whole overview as JSON-ready data (see the module docstring)."""
    store = app.store
    now = app.clock.now_ms()
    counts = [c for c in store.counts() if c.db not in HIDDEN_DBS]
    machines = app.rules.machines
    by_machine = {(m.db, m.kind): m for m in machines}

    databases: dict[str, dict[str, Any]] = {}
    for c in counts:
        entry = databases.setdefault(c.db, {"db": c.db, "total": 0, "kinds": {}})
        entry["total"] += c.n
        kind = entry["kinds"].setdefault(c.kind, {"kind": c.kind, "total": 0, "counts": {}})
        m = by_machine.get((c.db, c.kind))
        kind["machine"] = m.name if m else None
        kind["total"] += c.n
        kind["counts"][c.status] = kind["counts"].get(c.status, 0) + c.n
    for entry in databases.values():
        entry["kinds"] = sorted(entry["kinds"].values(), key=lambda k: (k["machine"] is None, k["kind"]))

    machine_rows = []
    for m in machines:
        live = databases.get(m.db, {}).get("kinds", [])
        found: dict[str, int] = next((k["counts"] for k in live if k["kind"] == m.kind), {})
        machine_rows.append({
            "name": m.name, "db": m.db, "kind": m.kind, "field": m.kind_field,
            "counts": {s: int(found.get(s, 0)) for s in m.states}, "terminal": sorted(m.terminal), "start": list(m.start),
        })

    items: list[Item] = []
    more: dict[str, Any] = {}
    for o in app.offers.values():  # each product's own items and parts (the vault's credentials, the probes' lanes)
        try:
            if o.attention is not None:
                items += [_item(d) for d in o.attention(store, now)]
            if o.overview is not None:
                more.update(o.overview(store))
        except LedgerError as exc:
            log.warning("overview: a product's part could not be read: %s", exc.reason)
    grouped = {(m.db, m.kind, s) for m in machines if "retry" in m.moves for s in m.moves["retry"].src}
    items += _machine_items(store, machines, databases, now, grouped)
    items += _groups(store, app.rules, databases)
    try:
        stopped = paused(store)
    except LedgerError as exc:
        log.warning("overview: the pauses could not be read: %s", exc.reason)
        stopped = {}
    ticks, tick_items = _ticks(app, now, started_at, stopped)
    items += tick_items
    items.sort(key=lambda i: (i.rank, -(i.since or 0)))

    try:
        head = store.head_seq()
    except LedgerError:
        head = 0
    return {
        "at": now,
        "headSeq": head,
        "databases": sorted(databases.values(), key=lambda d: d["db"]),
        "machines": machine_rows,
        "attention": [i.as_dict() for i in items],
        "ticks": ticks,
        "paused": [_pause(d, app.pausable) for d in sorted(stopped.values(), key=lambda d: d["_id"])],
        "handlers": _handlers(app),
        "probes": [],
        **more,
    }


def _machine_items(store: Store, machines: Iterable[Machine], databases: dict[str, dict[str, Any]], now: int,
                   grouped: set[tuple[str, str, str]]) -> list[Item]:
    out: list[Item] = []
    for m in machines:
        live: dict[str, int] = next((k["counts"] for k in databases.get(m.db, {}).get("kinds", []) if k["kind"] == m.kind), {})
        for status in m.states:
            n = int(live.get(status, 0))
            if not n:
                continue
            if status in PERSON_STATES:
                for doc in _docs(store, m, status, FAILED_SHOWN):
                    out.append(Item("needs-person", f"{doc['_id']} needs a person", str(doc.get("lastError") or ""),
                                    db=m.db, id=doc["_id"], status=status, since=_updated(doc),
                                    extra={"machine": m.name, "count": n}))
            elif (m.db, m.kind, status) in grouped:
                continue  # shown by its errors' groups (_groups)
            elif is_failure(m, status):
                for doc in _docs(store, m, status, FAILED_SHOWN):
                    out.append(Item("failed", f"{doc['_id']} is {status}", str(doc.get("lastError") or doc.get("skipReason") or ""),
                                    db=m.db, id=doc["_id"], status=status, since=_updated(doc),
                                    extra={"machine": m.name, "count": n}))
            elif status not in m.terminal:
                for doc in _docs(store, m, status, PER_STATE):
                    held = doc.get("held")
                    if isinstance(held, dict):
                        out.append(_held(m, doc, status, held))
                    lease = doc.get("leaseUntil")
                    if doc.get("claimId") and isinstance(lease, int) and lease < now:
                        out.append(Item("lease-expired", f"{doc['_id']}'s lease expired", f"{status} since the lease ran out "
                                        f"{(now - lease) // 1000} s ago; the sweep takes it back", db=m.db, id=doc["_id"],
                                        status=status, since=lease, extra={"machine": m.name}))
    return out


def _held(m: Machine, doc: dict[str, Any], status: str, held: dict[str, Any]) -> Item:
    """Held work: the reason as the CLI says it; ``problem`` (the reason without a command) and ``fix``
    (the platform and account to paste a secret for) for pages, which link the fix instead."""
    credential = str(held.get("credential", ""))
    extra: dict[str, Any] = {"machine": m.name}
    if isinstance(held.get("problem"), str):
        extra["problem"] = f"{credential}: {held['problem']}"
    fix = held.get("fix")
    if isinstance(fix, dict) and isinstance(fix.get("platform"), str) and isinstance(fix.get("account"), str):
        extra["fix"] = {"platform": fix["platform"], "account": fix["account"]}
    return Item("held", f"{doc['_id']} is held", f"{credential}: {held.get('reason', '')}", db=m.db, id=doc["_id"], status=status,
                since=held.get("since") if isinstance(held.get("since"), int) else None, extra=extra)


def _docs(store: Store, m: Machine, status: str, limit: int) -> list[dict[str, Any]]:
    try:
        page = store.query(m.db, "status", status, limit)
    except LedgerError:
        return []
    return [d for d in page.docs if d.get(m.kind_field) == m.kind]


def _updated(doc: dict[str, Any]) -> int | None:
    for key in ("updatedAt", "finishedAt", "at", "createdAt"):
        value = doc.get(key)
        if isinstance(value, int):
            return value
    return None


def _groups(store: Store, rules: Rules, databases: dict[str, dict[str, Any]]) -> list[Item]:
    """What waits for a person's retry (failed jobs, failed builds, posts in error, open dead letters), one
    item per group of documents that failed the same way (``ledger.fingerprint``, as ``skyhub errors``
    and ``GET /v1/errors``), with the group's bulk action; documents that carry no error make one item
    per state."""
    try:
        groups = error_groups(store, rules, scan=GROUP_SCAN)
    except LedgerError as exc:
        log.warning("overview: the error groups could not be read: %s", exc.reason)
        return []
    out: list[Item] = []
    found: dict[tuple[str, str | None, str], int] = {}
    for g in groups:
        if g.db in HIDDEN_DBS:
            continue
        found[(g.db, g.kind, g.status)] = found.get((g.db, g.kind, g.status), 0) + g.count
        out.append(_group_item(g.db, g.kind, g.status, g.count, g.partial, g.filter(), g.actions, machine=g.machine,
                               pattern=g.pattern, error=g.example_error, examples=g.examples, first=g.first_seen,
                               last=g.last_seen, fingerprint=g.fingerprint))
    for m in rules.machines:  # what the groups do not count: documents without an error
        if "retry" not in m.moves or m.db in HIDDEN_DBS:
            continue
        live: dict[str, int] = next((k["counts"] for k in databases.get(m.db, {}).get("kinds", []) if k["kind"] == m.kind), {})
        for status in m.moves["retry"].src:
            rest = int(live.get(status, 0)) - found.get((m.db, m.kind, status), 0)
            if rest > 0 and found.get((m.db, m.kind, status), 0) < GROUP_SCAN:
                examples = [str(d["_id"]) for d in _docs(store, m, status, 3) if not (d.get("lastError") or d.get("error"))]
                actions = [{"verb": v.verb, "label": v.label} for v in m.moves.values() if status in v.src]
                out.append(_group_item(m.db, m.kind, status, rest, False, {"status": status, "kind": m.kind}, actions,
                                       machine=m.name, pattern="", error="(no error recorded)", examples=examples,
                                       first=None, last=None, fingerprint=None))
    return out


def _group_item(db: str, kind: str | None, status: str, count: int, partial: bool, flt: dict[str, Any],
                actions: list[dict[str, Any]], *, machine: str | None, pattern: str, error: str, examples: list[str],
                first: int | None, last: int | None, fingerprint: str | None) -> Item:
    noun = kind or "document"
    n = f"{count}+" if partial else str(count)
    title = f"{n} {noun}{'s' if count != 1 else ''} {status}" + (f": {pattern}" if pattern else "")
    bulk = [{**a, "url": bulk_url(db, a["verb"], flt)} for a in actions]
    return Item("deadletter" if db == DEADLETTERS else "failed", title, error, db=db, id=examples[0] if examples else None,
                status=status, since=last,
                extra={"group": True, "count": count, "partial": partial, "firstSeen": first, "lastSeen": last,
                       "examples": examples, "fingerprint": fingerprint, "filter": flt, "machine": machine, "bulk": bulk})


def bulk_url(db: str, verb: str, flt: dict[str, Any]) -> str:
    """The console's confirm page for ``verb`` on the documents of ``db`` that ``flt`` selects."""
    return "/console/bulk?" + urlencode({"db": db, "action": verb, **flt})


def _pause(doc: dict[str, Any], scopes: dict[str, str]) -> dict[str, Any]:
    target = doc["_id"]
    head, _, rest = target.partition(":")
    if head == "tick":
        what = f"tick {rest}: its runs are recorded as paused"
    else:
        what = scopes.get(head, "its work waits") if not rest else f"posts of {target} wait"
    return {"target": target, "what": what, "reason": doc.get("reason"), "by": doc.get("by"), "since": doc.get("pausedAt"),
            "rev": doc["_rev"]}


def _ticks(app: App, now: int, started_at: int | None, stopped: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Item]]:
    rows: list[dict[str, Any]] = []
    items: list[Item] = []
    for t in app.ticks:
        try:
            runs = app.store.tick_runs(t.name, limit=1)
        except LedgerError:
            runs = []
        grace = max(3 * t.seconds, t.seconds + 60) * 1000
        every = every_text(t.seconds)
        row: dict[str, Any] = {"name": t.name, "every": every, "seconds": t.seconds, "late": False,
                               "paused": f"tick:{t.name}" in stopped}
        if runs:
            r = runs[0]
            row["lastRun"] = {"scheduledAt": r.scheduled_at, "finishedAt": r.finished_at, "outcome": r.outcome, "error": r.error}
            if now - r.scheduled_at > grace and not row["paused"]:
                row["late"] = True
                items.append(Item("tick-late", f"tick {t.name} has not run on time",
                                  f"every {every}; last run {(now - r.scheduled_at) // 1000} s ago", since=r.scheduled_at))
            if r.outcome == "error":
                items.append(Item("tick-failed", f"tick {t.name} failed", str(r.error or ""), since=r.finished_at))
        elif started_at is not None and now - started_at > grace and not row["paused"]:
            row["late"] = True
            items.append(Item("tick-late", f"tick {t.name} has not run on time", f"every {every}; it has never run", since=started_at))
        rows.append(row)
    return rows, items


def every_text(seconds: float) -> str:
    """An interval as people write it: ``30s``, ``1m``, ``1h``."""
    return duration(seconds)


def _handlers(app: App) -> list[dict[str, Any]]:
    out = []
    for h in app.handlers:
        try:
            pos = app.store.feed_position(h.cursor, list(h.dbs))
        except LedgerError:
            continue
        out.append({"name": h.name, "dbs": list(h.dbs), "done": pos.done, "head": pos.head, "behind": pos.behind,
                    "pending": pos.pending, "inFlight": len(pos.leases)})
    return out
