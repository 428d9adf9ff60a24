"""Standard guards: conditions an edge checks against the head revision, in the write's
transaction. A guard returns ``None`` when the write may go ahead, or a sentence saying why
not (it becomes the ``Forbidden`` reason)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Doc = dict[str, Any]


@dataclass(frozen=True)
class GuardContext:
    """What a guard may look at besides the two bodies: which document, who writes, when, the attempt limit, and
    the hub's settings (``section("publish")``: the real ones the store was opened with, None
    for a store opened without settings, where a guard applies its own strict defaults)."""

    actor: str
    now_ms: int
    max_attempts: int
    noun: str  # "job", "mention", ... for messages
    settings: Callable[[str], Any] | None = None
    doc_id: str = ""  # the id of the document written
    role_of: Callable[[], str | None] | None = None  # the actor's role, read when asked (None: the rules know no roles)

    def section(self, name: str) -> Any | None:
        """A settings section by name (``"publish"``, ``"fetch"``), or None when the store has no settings."""
        return self.settings(name) if self.settings is not None else None

    def role(self) -> str | None:
        """The writing actor's role, read in the write's transaction (None: it has none, or the rules know no roles)."""
        return self.role_of() if self.role_of is not None else None

    def holds(self, *roles: str) -> bool:
        """Whether the writing actor holds one of ``roles``; True where no role can be known (rules without a
        role source), as for an ``ActorPattern`` with roles."""
        return self.role_of is None or self.role_of() in roles


@dataclass(frozen=True)
class Guard:
    """A named check on (old head, new body); ``label`` appears in diagrams."""

    name: str
    check: Callable[[Doc | None, Doc, GuardContext], str | None]

    def __call__(self, old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
        """None when the transition may happen, else the reason it may not."""
        return self.check(old, new, ctx)

    def __str__(self) -> str:
        return self.name


def guard(fn: Callable[[Doc | None, Doc, GuardContext], str | None]) -> Guard:
    """Decorator: make a guard from a function named after it."""
    return Guard(fn.__name__, fn)


def _attempts(doc: Doc | None) -> int:
    value = (doc or {}).get("attempts", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _lease(doc: Doc | None) -> int | None:
    value = (doc or {}).get("leaseUntil")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@guard
def attempts_left(old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
    """The document has attempts left (``attempts`` below the machine's maximum)."""
    used = _attempts(old)
    if used >= ctx.max_attempts:
        return f"no attempts left: {used} of {ctx.max_attempts} used"
    return None


@guard
def attempts_used_up(old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
    """The document has used up its attempts."""
    used = _attempts(old)
    if used < ctx.max_attempts:
        return f"attempts are not used up yet: {used} of {ctx.max_attempts} used"
    return None


@guard
def claim(old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
    """attempts + 1, a fresh claimId, leaseUntil in the future, attempts left."""
    refused = attempts_left(old, new, ctx)
    if refused:
        return refused
    if new.get("attempts") != _attempts(old) + 1 or isinstance(new.get("attempts"), bool):
        return f"claim must bump attempts by one (from {_attempts(old)} to {_attempts(old) + 1})"
    claim_id = new.get("claimId")
    if not isinstance(claim_id, str) or not claim_id:
        return "claim needs a claimId (a fresh random string)"
    if claim_id == (old or {}).get("claimId"):
        return "claim needs a fresh claimId, not the previous one"
    lease = _lease(new)
    if lease is None or lease <= ctx.now_ms:
        return "claim needs leaseUntil (epoch milliseconds) in the future"
    return None


@guard
def same_claim(old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
    """The write carries the claimId that holds the document now."""
    held = (old or {}).get("claimId")
    if not held or new.get("claimId") != held:
        return f"stale claim: this {ctx.noun} is now held by another claim"
    if new.get("attempts", 0) != _attempts(old):
        return "attempts may change only when a claim is made"
    return None


@guard
def renew(old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
    """A heartbeat: same claim, a lease that ends in the future and not earlier than before."""
    refused = same_claim(old, new, ctx)
    if refused:
        return refused
    lease = _lease(new)
    if lease is None or lease <= ctx.now_ms:
        return "heartbeat needs leaseUntil in the future"
    return None


@guard
def lease_expired(old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
    """The old head's lease (``leaseUntil``) has run out, or it had none."""
    lease = _lease(old)
    if lease is not None and lease > ctx.now_ms:
        return f"lease still held for {lease - ctx.now_ms} ms"
    return None


@guard
def fresh(old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
    """A new piece of work: no attempts, no claim, no lease."""
    if _attempts(new) != 0:
        return f"a new {ctx.noun} starts with no attempts"
    for field in ("claimId", "leaseUntil"):
        if field in new:
            return f"a new {ctx.noun} cannot carry {field}"
    return None


@guard
def started_over(old: Doc | None, new: Doc, ctx: GuardContext) -> str | None:
    """A person's retry: attempts back to 0, no claim or lease left, and ``retries`` counted up by one."""
    if _attempts(new) != 0 or isinstance(new.get("attempts"), bool):
        return f"a retried {ctx.noun} starts over with attempts at 0"
    for name in ("claimId", "leaseUntil"):
        if name in new:
            return f"a retried {ctx.noun} starts over without {name}"
    before = (old or {}).get("retries", 0)
    before = before if isinstance(before, int) and not isinstance(before, bool) else 0
    if new.get("retries") != before + 1:
        return f"a retry is recorded: retries must go from {before} to {before + 1}"
    return None
