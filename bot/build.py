"""The builder lane: claim ``pending-build`` mentions as ``device:builder``, run the codegen
command for each, and write ``built`` (with its result) or ``build-failed`` (with the tail of
its log). Works the same against a local store or a hub (the store interface over HTTP).
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger import Conflict, Forbidden, Ledger
from ledger.keeper import Keeper, Lease
from ledger.lease import claim, finish, heartbeat

from .machine import DB, MENTIONS

log = logging.getLogger(__name__)
TAIL = 2000


@dataclass
class BuildSettings:
    """The lane's knobs (from ``[bot]``: codegen, build_lease, build_timeout)."""

    command: str = "python -m bot.codegen"
    lease_ms: int = 15 * 60_000
    timeout_s: float = 10 * 60.0  # shorter than the lease
    max_jobs: int = 5


class Builder:
    """Claims and builds pending mentions as ``db.actor`` (the builder's device); ``progress`` is
    called with a line for a person at each step."""

    def __init__(self, db: Ledger, settings: BuildSettings, *, progress: Callable[[str], None] | None = None) -> None:
        self.db = db
        self.settings = settings
        self.progress = progress or (lambda line: None)

    def now(self) -> int:
        """Epoch milliseconds from the clock the builder's ledger was given."""
        return self.db.now()

    def run(self, max_jobs: int | None = None) -> dict[str, int]:
        """Claim and build pending mentions one after another, up to ``max_jobs`` (``settings.max_jobs`` when not
        given); how many ended in each outcome ("built", "build-failed", "stale", "lost"). Forbidden when
        ``db.actor`` may not claim mentions."""
        claims = [e for e in MENTIONS.edges if "pending-build" in e.src and e.dst == "building"]
        if not any(e.allows(self.db.actor) for e in claims):
            who = ", ".join(str(p) for e in claims for p in e.by)
            raise Forbidden(f"{self.db.actor} may not build mentions (only {who}): run the lane with the builder's credential")
        limit = max_jobs or self.settings.max_jobs
        counts: dict[str, int] = {}
        page = self.db.query(DB, "status", "pending-build", limit=min(100, limit * 3))
        candidates = [d for d in page.docs if d.get("kind") == "mention"]
        done = 0
        for doc in candidates:
            if done >= limit:
                break
            try:
                held = claim(self.db, DB, doc, "building", self.settings.lease_ms, self.now())
            except (Conflict, Forbidden):
                counts["lost"] = counts.get("lost", 0) + 1
                continue  # another builder took it, or its attempts are used up
            done += 1
            self.progress(f"[{done}/{limit}] building {held['_id']} (attempt {held['attempts']}): {held.get('text', '')[:60]!r}")
            outcome = self.build(held)
            counts[outcome] = counts.get(outcome, 0) + 1
        if not candidates:
            self.progress("nothing to build")
        return counts

    def build(self, held: dict[str, Any]) -> str:
        """Run the codegen command for one claimed mention under its lease (``ledger.keeper``: renewed while
        it runs; the command's own time limit kills it), then write ``built`` or ``build-failed``; the outcome
        ("stale" when the claim was lost before that write)."""
        state = {"doc": held}

        def renew() -> bool:  # a heartbeat: the new revision is the one to finish with
            try:
                state["doc"] = heartbeat(self.db, DB, state["doc"], self.settings.lease_ms, self.now())
                return True
            except (Conflict, Forbidden) as exc:  # taken back: the finish will say it is stale
                log.warning("build %s: lost the lease: %s", held["_id"], exc.reason)
                return False

        lease = Lease(renew, self.settings.lease_ms, self.db.clock, until=int(held.get("leaseUntil") or self.now()))
        with Keeper("build:keeper", tick=min(1.0, self.settings.lease_ms / 3000)) as keeper:
            outcome = keeper.call(self._codegen, held, lease=lease)
        if outcome.exception is not None:  # not the command's failure (those it reports): a fault of the lane itself
            raise outcome.exception
        result, log_tail = outcome.value
        try:
            if result is not None:
                finish(self.db, DB, state["doc"], "built", result=result, lastError=None)
                self.progress(f"    built: {result.get('url', result)}")
                return "built"
            finish(self.db, DB, state["doc"], "build-failed", lastError=log_tail)
            self.progress(f"    build failed: {log_tail.splitlines()[-1] if log_tail else 'no output'}")
            return "build-failed"
        except (Conflict, Forbidden) as exc:
            self.progress(f"    lost the claim before finishing: {exc.reason}")
            return "stale"

    def _codegen(self, doc: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        job = {k: v for k, v in doc.items() if k not in ("claimId", "leaseUntil")}
        argv = shlex.split(self.settings.command)
        if argv and argv[0] == "python":  # "python" means the Python that runs skyhub
            argv[0] = sys.executable
        try:
            proc = subprocess.run(
                argv, input=json.dumps(job), capture_output=True, text=True,
                timeout=self.settings.timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            out = "".join(part.decode(errors="replace") if isinstance(part, bytes) else (part or "") for part in (exc.stdout, exc.stderr))
            return None, (out + f"\ncodegen timed out after {self.settings.timeout_s:g} s")[-TAIL:]
        except OSError as exc:
            return None, f"cannot run the codegen command {self.settings.command!r}: {exc.strerror}"
        log_text = (proc.stdout + proc.stderr)[-TAIL:]
        if proc.returncode != 0:
            return None, (log_text + f"\ncodegen exited with {proc.returncode}")[-TAIL:]
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        try:
            result = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            result = None
        if not isinstance(result, dict):
            return None, (log_text + "\ncodegen printed no JSON result on its last line (e.g. {\"url\": ...})")[-TAIL:]
        return result, log_text
