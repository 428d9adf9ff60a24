"""The step runner the platforms share: one request's document, the writes that move it, and
what a platform error means for it.

**Intent, then call, then read.** Before a call that creates something remote, a step writes
``intent: {"step", "at", ...}`` with ``if_rev`` (an X -> X edge): a ``Conflict`` means another
process has the request, and this one leaves it. The first intent also writes ``startedAt``
(ISO 8601 UTC), kept until a retry: from then on the post's content is fixed (the machine's
``content`` invariant), so no person can change what a call may already have sent. The call's result is written with ``if_rev``
of the intent's write, clearing the intent. An intent found on a later run is resolved by
reading the platform (each platform's module says how), never by calling again blind.

**What an error means** (``Step.failed``), on any call but a publish (a publish's failure is
ambiguous: the platform modules keep its intent and read it back):

    AuthFailure     the vault flags the credential NEEDS RE-AUTH; the request is held   not an attempt
    RateLimited     the account is blocked until the reset (all its requests wait)     not an attempt
    QuotaExceeded   ``notBefore`` moves by ``publish.quota_wait``                       not an attempt
    NotReady        tried again on the next run                                         not an attempt
    Transient       tried again on the next run (reads were already retried)            not an attempt
    Rejected        ``error`` (2207052, the image could not be fetched: once more first, an attempt)
    Failed          ``error``

Every write drops ``held``: a step runs only once the credential is usable again, so the hold
is released in the same write as the next step.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from ledger import Conflict, Context, Forbidden, NotFound
from platforms.errors import AuthFailure, NotReady, PlatformError, QuotaExceeded, RateLimited, Rejected, Transient
from vault import held_for

from .accounts import Account
from .errors import ContentProblem
from .listing import iso
from .machine import DB, PUBLISH

log = logging.getLogger(__name__)
FETCH_AGAIN = 2207052  # Meta could not fetch the image: worth one more try (a CDN hiccup), then it is the content


class Run:
    """What one run of the tick shares: its context, its settings and what happened."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.counts: Counter[str] = Counter()

    def now(self) -> int:
        """Epoch milliseconds from the store's clock (``ctx.now``)."""
        return self.ctx.now()

    def ms(self, seconds: float) -> int:
        """``seconds`` (a setting) in whole milliseconds."""
        return int(seconds * 1000)


class Step:
    """One request during one run: its head document and the writes that move it. ``credential``
    is the vault id of the account's credential (what a hold names, what a refusal flags)."""

    def __init__(self, run: Run, doc: dict[str, Any], account: Account, credential: str) -> None:
        self.run = run
        self.doc = doc
        self.account = account
        self.credential = credential

    @property
    def db(self) -> Any:
        """The run's ledger (``ctx.db``, bound to the tick's actor)."""
        return self.run.ctx.db

    def now(self) -> int:
        """Epoch milliseconds from the store's clock."""
        return self.run.now()

    @property
    def intent(self) -> dict[str, Any] | None:
        """The request's pending ``intent`` (see the module docstring), or None."""
        value = self.doc.get("intent")
        return value if isinstance(value, dict) else None

    # ---- writes ---------------------------------------------------------------------------
    def body(self, status: str | None, fields: dict[str, Any]) -> dict[str, Any]:
        """The body that moves the request to ``status`` (None: the same) with ``fields``: without ``held`` and
        stamped ``updatedAt``; a field that is None is left out."""
        body = {k: v for k, v in self.doc.items() if not k.startswith("_") and k != "held"}
        body.update(fields)
        if isinstance(fields.get("intent"), dict) and not body.get("startedAt"):
            body["startedAt"] = iso(self.now())  # the first intent: from here on the content is fixed
        if status is not None:
            body["status"] = status
        body["updatedAt"] = self.now()
        return {k: v for k, v in body.items() if v is not None}

    def write(self, status: str | None = None, **fields: Any) -> bool:
        """Write the request forward with ``if_rev`` of what this step read; False when
        another process moved it meanwhile (this run leaves it alone)."""
        try:
            self.doc = self.db.put(DB, self.body(status, fields), self.doc["_id"], if_rev=self.doc["_rev"])
            return True
        except Conflict:
            log.info("publish: %s moved under this run; leaving it", self.doc["_id"], extra={"db": DB, "id": self.doc["_id"]})
            return False

    def settle(self, status: str, **fields: Any) -> bool:
        """Write a result that must not be lost (a publish went live): on a conflict, read the
        head again and write onto it, unless another process already wrote the same end."""
        for _ in range(5):
            if self.write(status, **fields):
                return True
            try:
                self.doc = self.db.get(DB, self.doc["_id"])
            except NotFound:
                return False
            if self.doc.get("status") == status:
                return True
        return False

    def published(self) -> dict[str, Any]:
        """What a write to ``done`` carries besides the result: ``commentDue`` when the post has a first comment
        (the next step; the machine checks it)."""
        return {"commentDue": True} if self.doc.get("firstComment") else {}

    def mark(self, step: str, **extra: Any) -> bool:
        """Write the intent to call (see the module docstring); False: another process has it."""
        return self.write(intent={"step": step, "at": self.now(), **extra}, lastError=None)

    def error(self, reason: str, **fields: Any) -> str:
        """End in ``error`` with ``reason`` (one sentence a manager can act on)."""
        if not self.write("error", **{"intent": None, **fields, "lastError": reason}):
            return "moved"  # another process moved it first: this run wrote nothing
        log.warning("publish: %s failed: %s", self.doc["_id"], reason, extra={"db": DB, "id": self.doc["_id"]})
        return "error"

    def attempt(self, reason: str) -> int | None:
        """The attempt number of one more attempt, or None (after ending in ``error``) when
        they are used up."""
        used = int(self.doc.get("attempts") or 0)
        if used >= PUBLISH.max_attempts:
            self.error(f"gave up after {used} attempts: {reason}")
            return None
        return used + 1

    def wait(self, until: int, reason: str, **fields: Any) -> str:
        """Not yet (not an attempt): come back at ``until``."""
        self.write(notBefore=until, lastError=reason, **fields)
        return "waiting"

    def hold(self, reason: str, **fields: Any) -> str:
        """Held until a person pastes a fresh credential (not an attempt)."""
        held_now = self.doc.get("held")
        before: dict[str, Any] = held_now if isinstance(held_now, dict) else {}
        held = held_for(self.credential, reason, before.get("since") or self.now())  # held since the first time
        self.write(lastError=reason, held=held, **fields)
        return "held"

    # ---- errors ---------------------------------------------------------------------------
    def failed(self, exc: PlatformError | ContentProblem, **fields: Any) -> str:
        """What ``exc`` (from any call but a publish) means for this request; see the module docstring."""
        now = self.now()
        s = self.run.settings
        if isinstance(exc, ContentProblem):
            return self.error(exc.reason, **fields) if exc.permanent else self.retry_later(exc.reason, **fields)
        if isinstance(exc, AuthFailure):
            self.report_dead(exc.reason)
            return self.hold(exc.reason, **fields)
        if isinstance(exc, RateLimited):
            self.account.block(exc.reset_at or now + self.run.ms(s.rate_limit_wait), exc.reason)
            self.write(lastError=exc.reason, **fields)
            return "rate-limited"
        if isinstance(exc, QuotaExceeded):
            return self.wait(now + self.run.ms(s.quota_wait), exc.reason, **fields)
        if isinstance(exc, (NotReady, Transient)):
            return self.retry_later(exc.reason, **fields)
        if isinstance(exc, Rejected) and exc.error_subcode == FETCH_AGAIN and not self.doc.get("fetchedAgain"):
            attempt = self.attempt(exc.reason)
            if attempt is None:
                return "error"
            self.write(attempts=attempt, fetchedAgain=True, lastError=exc.reason, **fields)
            return "retry"
        return self.error(exc.reason, **fields)

    def retry_later(self, reason: str, **fields: Any) -> str:
        """Leave the request for the next run with ``reason`` as its ``lastError`` (not an attempt)."""
        self.write(lastError=reason, **fields)
        return "retry-later"

    def report_dead(self, reason: str) -> None:
        """Tell the vault the credential was refused (it flags NEEDS RE-AUTH)."""
        try:
            self.run.ctx.vault.report_dead(self.credential, reason)
        except (Conflict, Forbidden, NotFound) as exc:  # changed meanwhile (a fresh paste?): the next run sees
            log.info("publish: could not flag %s: %s", self.credential, exc)
