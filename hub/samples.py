"""Queue depth sampled into the ledger, so the Activity page's history survives a restart.

The ``sample`` tick (every minute, registered by ``hub.app.build_app`` like the sweep) counts the
documents in each machine's working states (neither an end state nor a failure a person moves on
from) from the store's counters (``store.counts()``: no scan) and writes one document to the
``samples`` database: ``{"kind": "depth-sample", "status": "kept", "at": <the minute, epoch ms>,
"depth": {machine: n}}``.

**Bounded retention** without deletes: the samples are a ring of ``activity.samples_kept`` worth
of minutes (24 h by default: 1,440 documents). The document of a minute is ``depth:<slot>`` with
``slot = minute % ring``, so a new day overwrites the same day-old slot; the database never holds
more than the ring, and no tombstone is left behind. (Every overwrite is still a revision in the
change log, as every write is.) Two processes sampling the same minute write the same slot: the
second write replaces the first with the same counts, so a blind write by the tick is enough.
The page reads the last hour newest first with ``by_time`` and drops a slot older than its window.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger import Machine, Rules, StatusCount, Store

SAMPLES_DB = "samples"
KIND = "depth-sample"
ACTOR = "tick:sample"
MINUTE = 60_000
HELP = "samples the queue depth per machine into the samples database once a minute (the Activity page's history)"


FAILURE_STATES = frozenset({"error", "failed", "build-failed"})


def is_failure(machine: Machine | None, status: str) -> bool:
    """Whether ``status`` is a failure a person should look at: an end state, or one only a
    person moves on from (``error`` -> retry), named ``error``, ``failed`` or ``build-failed``."""
    if status not in FAILURE_STATES:
        return False
    return machine is None or status in machine.at_rest


def working(machine: Machine, status: str) -> bool:
    """Whether ``status`` is one where a document of ``machine`` still waits for work."""
    return status not in machine.ends and not is_failure(machine, status)


def depth_of(counts: Sequence[StatusCount], machines: Sequence[Machine]) -> dict[str, int]:
    """Documents in each machine's working states, from the store's counters."""
    depth = {m.name: 0 for m in machines}
    by_kind = {(m.db, m.kind): m for m in machines}
    for c in counts:
        m = by_kind.get((c.db, c.kind))
        if m is not None and working(m, c.status):
            depth[m.name] += c.n
    return depth


def ring_size(kept_s: float) -> int:
    """Minutes of samples kept (at least one hour: the page's window)."""
    return max(60, int(kept_s // 60))


def take_sample(store: Store, rules: Rules, now_ms: int, kept_s: float) -> dict[str, Any]:
    """Write this minute's sample into its slot of the ring; the document written."""
    minute = now_ms // MINUTE
    body = {"kind": KIND, "status": "kept", "at": minute * MINUTE, "depth": depth_of(store.counts(), rules.machines)}
    return store.put(SAMPLES_DB, body, f"depth:{minute % ring_size(kept_s)}", actor=ACTOR)


def read_samples(store: Any, since_ms: int, limit: int = 61) -> list[tuple[int, dict[str, int]]]:
    """The samples at or after ``since_ms`` (epoch ms), oldest first, as (minute, {machine: n})."""
    page = store.by_time(SAMPLES_DB, "kept", limit)
    out = []
    for doc in page.docs:
        at, depth = doc.get("at"), doc.get("depth")
        if isinstance(at, int) and at >= since_ms and isinstance(depth, dict):
            out.append((at, {str(k): int(v) for k, v in depth.items() if isinstance(v, int)}))
    return sorted(out)
