"""The vault tick: verify fresh pastes, rotate tokens before they expire, flag dead ones.

Idempotent: a missed or doubled tick changes nothing, because every action is decided from
the documents (status, refreshedAt, expiresAt) and taken under a short lease on the
credential (``rotating``), so exactly one writer stores a rotated secret (a Bluesky refresh
token is single-use: two copies would log each other out).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ledger import Conflict, Context, Forbidden, Ledger, NotFound, TickEvent
from platforms import AuthFailure, NetworkError, PlatformError
from platforms.errors import scrub

from .credentials import DB, Vault, new_claim, public
from .errors import WrongMasterKey
from .keys import MasterKey
from .seal import fingerprint, seal, unseal

if TYPE_CHECKING:  # the platform calls (httpx, tenacity, the Meta clients) load with the first call
    from platforms.bluesky import BlueskySession

    from .checks import Checks

log = logging.getLogger(__name__)
DAY_MS = 86_400_000
HOUR_MS = 3_600_000


@dataclass
class Policy:
    """When to refresh what, and how many Bluesky createSession fallbacks a day may spend."""

    refresh_after_ms: int = 7 * DAY_MS         # Meta long-lived tokens older than this are refreshed
    min_age_ms: int = DAY_MS                  # ... but never before they are a day old
    bluesky_refresh_before_ms: int = 15 * 60_000
    create_session_budget: int = 10           # per UTC day (Bluesky allows 300/day, 30 per 5 min)
    lease_ms: int = 120_000


class _Spent(Exception):
    """A createSession attempt that reached the PDS failed: it still spent one of the day's."""

    def __init__(self, error: PlatformError, budget: dict[str, Any]) -> None:
        super().__init__(error.reason)
        self.error = error
        self.budget = budget


class Maintainer:
    """The vault tick's work on each credential (see the module docstring). ``db`` is bound to
    ``tick:vault``; ``key`` and ``checks`` may be given as functions that make them on first use."""

    def __init__(self, db: Ledger, key: Any, checks: Checks | Callable[[], Checks], policy: Policy | None = None) -> None:
        self.db = db  # bound to tick:vault
        self._key = key
        self._checks = checks
        self.policy = policy or Policy()

    @property
    def checks(self) -> Checks:
        """The platform calls, made on first use (a pass with nothing due calls nothing)."""
        if callable(self._checks):
            self._checks = self._checks()
        return self._checks

    @property
    def key(self) -> MasterKey:
        """The master key, loaded on first use."""
        if callable(self._key):
            self._key = self._key()
        return self._key  # type: ignore[no-any-return]

    @classmethod
    def from_context(cls, ctx: Context) -> Maintainer:
        """The maintainer a ``tick:vault`` context describes: its ledger, the vault's key,
        the platforms at ``ctx.platforms`` over ``ctx.http``, the policy in ``ctx.settings``."""
        vault = vault_of(ctx)
        return cls(ctx.db, lambda: vault.key, lambda: checks_for(ctx), policy_for(ctx.settings))

    def now(self) -> int:
        """Epoch milliseconds from the store's clock."""
        return self.db.now()

    def run(self) -> dict[str, int]:
        """One pass over every credential. Returns how many ended in each outcome."""
        counts: dict[str, int] = {}
        for doc in list(self.db.query_all(DB, "kind", "credential")):
            outcome = self.maintain(doc)
            if outcome:
                counts[outcome] = counts.get(outcome, 0) + 1
        return counts

    def due(self, doc: dict[str, Any]) -> str | None:
        """What ``doc`` needs now: "verify" (a fresh paste), "refresh" (a Bluesky session near its expiry or
        without one, a Meta token old enough), or None."""
        now = self.now()
        status = doc.get("status")
        if status == "unverified":
            return "verify"
        if status != "ok":
            return None
        if doc.get("platform") == "bluesky":
            expires = doc.get("expiresAt")
            if not isinstance(expires, int) or expires - now < self.policy.bluesky_refresh_before_ms:
                return "refresh"
            return None
        age = now - int(doc.get("refreshedAt") or doc.get("createdAt") or now)
        if age >= max(self.policy.refresh_after_ms, self.policy.min_age_ms):
            return "refresh"
        return None

    def maintain(self, doc: dict[str, Any], key: MasterKey | None = None) -> str | None:
        """Verify or refresh ``doc`` if it is due, under a lease on it. Returns the outcome ("ok", "unverified",
        "needs-reauth", "error", "superseded"), or None when nothing was due or another writer holds it.
        Platform errors are recorded on the document, not raised; a missing master key raises before
        anything is written."""
        action = self.due(doc)
        if action is None:
            return None
        key = key or self.key  # no key: the tick fails visibly, before touching anything
        cred_id = doc["_id"]
        try:
            held = self.db.put(DB, new_claim(doc, self.policy.lease_ms, self.now()), cred_id, if_rev=doc["_rev"])
        except (Conflict, Forbidden):
            return None  # someone else is on it, or a paste just came in
        body = {k: v for k, v in held.items() if not k.startswith("_")}
        secret: dict[str, Any] = {}
        failed: PlatformError | None = None
        extra: dict[str, Any] = {}
        try:
            secret = unseal(key, cred_id, int(doc["version"]), doc["sealed"])
            updates = self._verify(doc, secret) if action == "verify" else self._refresh(doc, secret)
        except WrongMasterKey as exc:
            return self._finish(held, body, "unverified" if action == "verify" else "ok", lastError=exc.reason)
        except _Spent as spent:
            failed, extra = spent.error, {"createSessions": spent.budget}
        except PlatformError as exc:
            failed = exc
        if failed is not None:
            reason = scrub(failed.reason, _strings(secret))
            if isinstance(failed, AuthFailure):
                return self._finish(held, body, "needs-reauth", needsReauth=True, lastError=reason, **extra)
            status = "unverified" if action == "verify" else "ok"  # transient or other: the next tick tries again
            return self._finish(held, body, status, lastError=reason, outcome="error", **extra)
        new_secret = updates.pop("secret", None)
        if new_secret is not None:
            version = int(body["version"]) + 1
            updates.update(version=version, sealed=seal(key, cred_id, version, new_secret), fingerprint=fingerprint(key, new_secret))
        return self._finish(held, body, "ok", needsReauth=False, lastError=None, **updates)

    def _finish(self, held: dict[str, Any], body: dict[str, Any], status: str, outcome: str | None = None, **fields: Any) -> str:
        body = dict(body)
        body.pop("leaseUntil", None)
        body.update(fields)
        body["status"] = status
        try:
            self.db.put(DB, body, held["_id"], if_rev=held["_rev"])
        except (Conflict, Forbidden):
            log.info("vault: %s changed during its check (a new paste?); keeping that", held["_id"])
            return "superseded"
        level = logging.WARNING if status == "needs-reauth" or outcome == "error" else logging.INFO
        log.log(level, "vault: %s is %s%s", held["_id"], status, f" ({fields['lastError']})" if fields.get("lastError") else "",
                extra={"db": DB, "id": held["_id"], "actor": self.db.actor})
        return outcome or status

    # ---- per platform ------------------------------------------------------------------
    def _verify(self, doc: dict[str, Any], secret: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        platform = doc["platform"]
        if platform == "bluesky":
            return {**self._create_session(doc, secret), "verifiedAt": now}
        self.checks.verify(platform, secret)
        return {"verifiedAt": now}

    def _refresh(self, doc: dict[str, Any], secret: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        platform = doc["platform"]
        if platform == "bluesky":
            if not secret.get("session"):
                return self._create_session(doc, secret)
            try:
                session = self.checks.refresh_session(secret["session"])
            except AuthFailure as exc:
                log.info("vault: %s refresh refused (%s); falling back to createSession", doc["_id"], scrub(exc.reason, _strings(secret)))
                return self._create_session(doc, secret)
            return self._session_updates(secret, session, now)
        token = self.checks.refresh(platform, secret)
        return {
            "secret": {**secret, "accessToken": token.access_token},
            "refreshedAt": now,
            "expiresAt": now + int(token.expires_in) * 1000 if token.expires_in is not None else None,
        }

    def _create_session(self, doc: dict[str, Any], secret: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        today = datetime.fromtimestamp(now / 1000, tz=UTC).strftime("%Y-%m-%d")
        used = doc.get("createSessions") or {}
        count = int(used.get("count", 0)) if used.get("day") == today else 0
        if count >= self.policy.create_session_budget:
            raise AuthFailure(
                f"Bluesky: the session cannot be refreshed and today's createSession budget "
                f"({self.policy.create_session_budget}) is used up; paste the app password again tomorrow, or now to retry"
            )
        budget = {"day": today, "count": count + 1}
        try:
            session = self.checks.create_session(doc["account"], str(secret.get("appPassword", "")))
        except NetworkError:
            raise  # the PDS never saw the attempt: it spends none of the day's budget
        except PlatformError as exc:
            raise _Spent(exc, budget) from exc
        return {**self._session_updates(secret, session, now), "createSessions": budget}

    def _session_updates(self, secret: dict[str, Any], session: BlueskySession, now: int) -> dict[str, Any]:
        keep = session.as_dict()
        # the PDS the account lives on: its DID document says; else the one the session had, else the login host
        keep["pds"] = session.pds or (secret.get("session") or {}).get("pds") or self.checks.platforms.bluesky_pds
        return {
            "secret": {**secret, "session": keep},
            "refreshedAt": now,
            "expiresAt": session.expires_at or now + 2 * HOUR_MS,
        }


def _strings(value: Any) -> list[str]:
    """Every string inside a secret (to scrub from a message before it is stored or logged)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


# ---- the vault tick, and "verify now" ------------------------------------------------------
def vault_of(ctx: Context) -> Vault:
    """``ctx.vault`` as the vault package's own ``Vault`` (what the hub wires in)."""
    if not isinstance(ctx.vault, Vault):
        raise TypeError(f"{ctx.actor} was given {ctx.vault!r} as its vault, not a vault.Vault")
    return ctx.vault


def policy_for(section: Any) -> Policy:
    """The rotation policy from the ``[vault]`` settings section."""
    return Policy(
        refresh_after_ms=int(section.refresh_after * 1000), min_age_ms=int(section.min_age * 1000),
        bluesky_refresh_before_ms=int(section.bluesky_refresh_before * 1000),
        create_session_budget=section.create_session_budget,
    )


def checks_for(ctx: Context) -> Checks:
    """The platform calls at the hosts ``ctx.platforms`` names, through ``ctx.http``."""
    from platforms.graph import RetryPolicy

    from .checks import Checks

    retry = RetryPolicy(attempts=ctx.settings.retries, wait=ctx.settings.retry_wait)
    return Checks(ctx.http, ctx.platforms, retry=retry, now_ms=ctx.now)


def maintain(event: TickEvent, ctx: Context) -> dict[str, int]:
    """The ``vault`` tick: verify fresh pastes, rotate what is due, flag dead credentials."""
    return Maintainer.from_context(ctx).run()


def verify(ctx: Context, cred_id: str) -> dict[str, Any]:
    """Check one credential with its platform now (``vault put --verify``, ``?verify=true``),
    as the vault tick would; returns its metadata afterwards. ``ctx`` is a ``tick:vault`` context."""
    try:
        doc = ctx.db.get(DB, cred_id)
    except NotFound:
        raise NotFound(f"no credential {cred_id!r} in the vault (see `skyhub vault list`)") from None
    Maintainer.from_context(ctx).maintain(doc)
    return public(ctx.db.get(DB, cred_id))

