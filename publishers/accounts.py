"""The account documents in database ``publish``: one per account, id ``<platform>:<account>``.

    blockedUntil   epoch ms: a rate limit (or usage over 90 %) stops every request of the account
    blockedReason  why, in words
    containers     creation times (epoch ms) of the containers made in the last 24 hours, for
                   Meta's 400-per-account rule; every container counts, orphans included
    usage          the last rate-limit usage Meta reported, in percent

The tick reads each account's document once per run and writes it once, at the end of the
run, only when something changed. Two processes may write it at once: a lost race is merged
(the union of the creation times, the later block), never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger import Conflict, Ledger, NotFound

DB = "publish"
DAY_MS = 86_400_000
KIND = "publish-account"


def account_id(platform: str, account: str) -> str:
    """The id of an account's document: ``ig:17841400000000000``."""
    return f"{platform}:{account}"


@dataclass
class Account:
    """One account's document, as the tick holds it during a run."""

    platform: str
    account: str
    doc: dict[str, Any] | None = None
    blocked_until: int = 0
    blocked_reason: str = ""
    containers: list[int] = field(default_factory=list)
    usage: float | None = None
    changed: bool = False

    @property
    def id(self) -> str:
        """The document's id: ``<platform>:<account>``."""
        return account_id(self.platform, self.account)

    @classmethod
    def load(cls, db: Ledger, platform: str, account: str) -> Account:
        """The account's document (an empty one when it has none yet)."""
        out = cls(platform, account)
        try:
            out._read(db.get(DB, out.id))
        except NotFound:
            pass
        return out

    def _read(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.blocked_until = int(doc.get("blockedUntil") or 0)
        self.blocked_reason = str(doc.get("blockedReason") or "")
        self.containers = sorted(int(t) for t in doc.get("containers") or [] if isinstance(t, int))
        usage = doc.get("usage")
        self.usage = float(usage) if isinstance(usage, (int, float)) else None

    def blocked(self, now: int) -> bool:
        """Whether a block is still in force at ``now`` (epoch ms)."""
        return self.blocked_until > now

    def block(self, until: int, reason: str) -> None:
        """Stop every request of this account until ``until`` (a later block wins)."""
        if until > self.blocked_until:
            self.blocked_until, self.blocked_reason, self.changed = until, reason, True

    def created(self, count: int, at: int) -> None:
        """``count`` containers were (or may have been) created at ``at``."""
        if count > 0:
            self.containers.extend([at] * count)
            self.containers.sort()
            self.changed = True

    def in_window(self, now: int) -> int:
        """Containers created in the 24 hours before ``now``."""
        return sum(1 for t in self.containers if t > now - DAY_MS)

    def frees_at(self, now: int, needed: int, limit: int) -> int:
        """When ``needed`` more containers fit within ``limit`` per 24 hours."""
        recent = [t for t in self.containers if t > now - DAY_MS]
        over = len(recent) + needed - limit
        if over <= 0:
            return now
        return recent[min(over, len(recent)) - 1] + DAY_MS

    def saw_usage(self, percent: float) -> None:
        """Note the rate-limit usage Meta reported, in percent; 0 (none reported) and a change of less than
        a point are not worth a write."""
        if percent and (self.usage is None or abs(percent - self.usage) >= 1):
            self.usage, self.changed = percent, True

    def body(self, now: int) -> dict[str, Any]:
        """The document to write at ``now``: the stored one's other fields, with the block, the usage and the
        containers of the last 24 hours."""
        body = {k: v for k, v in (self.doc or {}).items() if not k.startswith("_")}
        body.update(kind=KIND, platform=self.platform, account=self.account,
                    containers=[t for t in self.containers if t > now - DAY_MS], updatedAt=now)
        body["blockedUntil"] = self.blocked_until or None
        body["blockedReason"] = self.blocked_reason or None
        if self.usage is not None:
            body["usage"] = self.usage
        return body

    def save(self, db: Ledger) -> None:
        """Write the document if anything changed; a lost race is merged and written again."""
        if not self.changed:
            return
        now = db.now()
        for _ in range(5):
            try:
                if self.doc is None:
                    self.doc = db.put(DB, self.body(now), self.id, create_only=True)
                else:
                    self.doc = db.put(DB, self.body(now), self.id, if_rev=self.doc["_rev"])
                self.changed = False
                return
            except Conflict:
                self._merge(db.get(DB, self.id))
        raise Conflict(f"the account document {DB}/{self.id} kept changing under five writes in a row")

    def _merge(self, head: dict[str, Any]) -> None:
        mine = list(self.containers)
        until, reason = self.blocked_until, self.blocked_reason
        self._read(head)
        theirs = list(self.containers)
        for t in mine:  # a multiset union: what both wrote stays once, what only one wrote is added
            if t in theirs:
                theirs.remove(t)
            else:
                self.containers.append(t)
        self.containers.sort()
        self.block(until, reason)
