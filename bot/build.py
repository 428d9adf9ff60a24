"""The builder lane: claim ``pending-build`` mentions as ``device:builder``, run the codegen
command for each, and write ``built`` (with its result) or ``build-failed`` (with the sentence
the command gave, else the tail of its log), and the tokens it spent (``tokens``). Works the
same against a local store or a hub (the store interface over HTTP).

The day's token budget (``bot.budget``) is asked before each claim: once it is spent the lane
claims nothing more that day, and the mentions wait in ``pending-build`` (no attempt used).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger import Conflict, Forbidden, Ledger, LedgerError
from ledger.keeper import Keeper, Lease
from ledger.lease import claim, finish, heartbeat

from .budget import TokenBudget
from .machine import DB, MENTIONS

log = logging.getLogger(__name__)
TAIL = 2000


@dataclass
class BuildSettings:
    """The lane's knobs (from ``[bot]``: codegen, build_lease, build_timeout; from ``[codegen]``: the daily token
    budget, and the settings handed to the command as ``SKYHUB_CODEGEN__*`` variables in ``env``)."""

    command: str = "python -m bot.codegen"
    lease_ms: int = 15 * 60_000
    timeout_s: float = 10 * 60.0  # shorter than the lease
    max_jobs: int = 5
    budget: int = 0  # tokens a UTC day (0: no limit)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Ran:
    """What one run of the codegen command gave: its result (None: it failed), why it failed, the tokens it spent."""

    result: dict[str, Any] | None
    log: str
    tokens: dict[str, int] | None = None


class Builder:
    """Claims and builds pending mentions as ``db.actor`` (the builder's device); ``progress`` is
    called with a line for a person at each step."""

    def __init__(self, db: Ledger, settings: BuildSettings, *, progress: Callable[[str], None] | None = None) -> None:
        self.db = db
        self.settings = settings
        self.progress = progress or (lambda line: None)
        self.budget = TokenBudget(db, settings.budget)

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
        for n, doc in enumerate(candidates):
            if done >= limit:
                break
            spent = self.budget.spent(self.now())
            if spent is not None:  # wait for tomorrow: nothing claimed, no attempt used
                counts["waiting"] = len(candidates) - n
                self.progress(f"the daily token budget is spent ({spent.used:,} of {spent.limit:,} tokens on {spent.day}, UTC): "
                              f"{len(candidates) - n} pending build(s) wait for the next day (codegen.daily_token_budget)")
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
        ran = outcome.value
        spent = {"tokens": ran.tokens} if ran.tokens is not None else {}
        if ran.tokens:  # counted before the result is written: a crash in between counts twice, never not at all
            try:
                self.budget.add(self.now(), ran.tokens.get("in", 0), ran.tokens.get("out", 0))
            except LedgerError as exc:  # the result must still be written; the day's count misses this build
                log.warning("build %s: could not add its tokens to the day's budget: %s", held["_id"], exc.reason)
        try:
            if ran.result is not None:
                finish(self.db, DB, state["doc"], "built", result=ran.result, lastError=None, **spent)
                title = ran.result.get("title")
                self.progress(f"    built: {ran.result.get('url', ran.result)}{f' ({title!r})' if title else ''}")
                return "built"
            finish(self.db, DB, state["doc"], "build-failed", lastError=ran.log, **spent)
            self.progress(f"    build failed: {ran.log.splitlines()[-1] if ran.log else 'no output'}")
            return "build-failed"
        except (Conflict, Forbidden) as exc:
            self.progress(f"    lost the claim before finishing: {exc.reason}")
            return "stale"

    def _codegen(self, doc: dict[str, Any]) -> Ran:
        job = {k: v for k, v in doc.items() if k not in ("claimId", "leaseUntil")}
        argv = shlex.split(self.settings.command)
        if argv and argv[0] == "python":  # "python" means the Python that runs skyhub
            argv[0] = sys.executable
        env = {**os.environ, **self.settings.env, "SKYHUB_BUILD_TIMEOUT": f"{self.settings.timeout_s:g}"}
        try:
            proc = subprocess.run(
                argv, input=json.dumps(job), capture_output=True, text=True,
                timeout=self.settings.timeout_s, env=env,
            )
        except subprocess.TimeoutExpired as exc:
            out = "".join(part.decode(errors="replace") if isinstance(part, bytes) else (part or "") for part in (exc.stdout, exc.stderr))
            return Ran(None, (out + f"\ncodegen timed out after {self.settings.timeout_s:g} s")[-TAIL:])
        except OSError as exc:
            return Ran(None, f"cannot run the codegen command {self.settings.command!r}: {exc.strerror}")
        log_text = (proc.stdout + proc.stderr)[-TAIL:]
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        try:
            last = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            last = None
        tokens = _tokens(last.get("tokens")) if isinstance(last, dict) else None
        if proc.returncode != 0:
            if isinstance(last, dict) and isinstance(last.get("error"), str) and last["error"].strip():
                return Ran(None, last["error"].strip()[-TAIL:], tokens)  # the command's own sentence
            return Ran(None, (log_text + f"\ncodegen exited with {proc.returncode}")[-TAIL:], tokens)
        if not isinstance(last, dict):
            return Ran(None, (log_text + "\ncodegen printed no JSON result on its last line (e.g. {\"url\": ...})")[-TAIL:])
        return Ran(last, log_text, tokens)


def _tokens(value: Any) -> dict[str, int] | None:
    """A result's ``tokens`` ({"in": n, "out": n}) when it is one, with whole numbers of at least 0."""
    if not isinstance(value, dict):
        return None
    counts = {k: value.get(k) for k in ("in", "out")}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()):
        return None
    return {k: int(v) for k, v in counts.items() if v is not None}
