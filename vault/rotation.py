"""The vault tick: verify fresh pastes, rotate tokens before they expire, flag dead ones.

Idempotent: a missed or doubled tick changes nothing, because every action is decided from
the documents (status, refreshedAt, expiresAt) and taken under a short lease on the
credential (``rotating``), so exactly one writer stores a rotated secret (a Bluesky refresh
token is single-use: two copies would log each other out).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger import Conflict, Context, Forbidden, Ledger, NotFound, TickEvent

from .credentials import DB, Vault, new_claim, public
from .errors import WrongMasterKey
from .keys import MasterKey
from .platforms import AuthFailure, Endpoints, Failed, NetworkError, PlatformError, Platforms, Transient, jwt_exp_ms, scrub
from .seal import fingerprint, seal, unseal

log = logging.getLogger(__name__)
DAY_MS = 86_400_000
HOUR_MS = 3_600_000


@dataclass
class Policy:
    refresh_after_ms: int = 7 * DAY_MS         # Meta long-lived tokens older than this are refreshed
    min_age_ms: int = DAY_MS                  # ... but never before they are a day old
    bluesky_refresh_before_ms: int = 15 * 60_000
    create_session_budget: int = 10           # per UTC day (Bluesky allows 300/day, 30 per 5 min)
    lease_ms: int = 120_000


class Maintainer:
    def __init__(self, db: Ledger, key: Any, platforms: Platforms, policy: Policy | None = None) -> None:
        self.db = db  # bound to tick:vault
        self._key = key
        self.platforms = platforms
        self.policy = policy or Policy()

    @property
    def key(self) -> MasterKey:
        if callable(self._key):
            self._key = self._key()
        return self._key  # type: ignore[no-any-return]

    @classmethod
    def from_context(cls, ctx: Context) -> Maintainer:
        """The maintainer a ``tick:vault`` context describes: its ledger, the vault's key,
        the platforms at ``ctx.platforms`` over ``ctx.http``, the policy in ``ctx.settings``."""
        vault = vault_of(ctx)
        return cls(ctx.db, lambda: vault.key, platforms_for(ctx), policy_for(ctx.settings))

    def now(self) -> int:
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
        try:
            secret = unseal(key, cred_id, int(doc["version"]), doc["sealed"])
            updates = self._verify(doc, secret) if action == "verify" else self._refresh(doc, secret)
        except WrongMasterKey as exc:
            return self._finish(held, body, "unverified" if action == "verify" else "ok", lastError=exc.reason)
        except AuthFailure as exc:
            extra = {"createSessions": exc.budget} if hasattr(exc, "budget") else {}
            return self._finish(held, body, "needs-reauth", needsReauth=True, lastError=scrub(exc.reason, secret), **extra)
        except (Transient, Failed) as exc:
            status = "unverified" if action == "verify" else "ok"
            extra = {"createSessions": exc.budget} if hasattr(exc, "budget") else {}
            return self._finish(held, body, status, lastError=scrub(exc.reason, secret), outcome="error", **extra)
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
        check = {"instagram": self.platforms.verify_instagram, "threads": self.platforms.verify_threads,
                 "facebook": self.platforms.verify_facebook}[platform]
        check(secret)
        return {"verifiedAt": now}

    def _refresh(self, doc: dict[str, Any], secret: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        platform = doc["platform"]
        if platform == "bluesky":
            if not secret.get("session"):
                return self._create_session(doc, secret)
            try:
                session = self.platforms.bluesky_refresh_session(secret)
            except AuthFailure as exc:
                log.info("vault: %s refresh refused (%s); falling back to createSession", doc["_id"], scrub(exc.reason, secret))
                return self._create_session(doc, secret)
            return self._session_updates(secret, session, now)
        call = {"instagram": self.platforms.refresh_instagram, "threads": self.platforms.refresh_threads,
                "facebook": self.platforms.refresh_facebook}[platform]
        answer = call(secret)
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise Failed(f"{platform} refresh answered without an access_token")
        expires_in = answer.get("expires_in")
        return {
            "secret": {**secret, "accessToken": token},
            "refreshedAt": now,
            "expiresAt": now + int(expires_in) * 1000 if isinstance(expires_in, (int, float)) else None,
        }

    def _create_session(self, doc: dict[str, Any], secret: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        today = datetime.fromtimestamp(now / 1000, tz=UTC).strftime("%Y-%m-%d")
        used = doc.get("createSessions") or {}
        count = int(used.get("count", 0)) if used.get("day") == today else 0
        if count >= self.policy.create_session_budget:
            raise AuthFailure(
                f"the session cannot be refreshed and today's createSession budget ({self.policy.create_session_budget}) is used up"
            )
        budget = {"day": today, "count": count + 1}
        try:
            session = self.platforms.bluesky_create_session(doc["account"], secret)
        except NetworkError:
            raise  # the PDS never saw the attempt: it spends none of the day's budget
        except PlatformError as exc:
            exc.budget = budget  # type: ignore[attr-defined]
            raise
        return {**self._session_updates(secret, session, now), "createSessions": budget}

    def _session_updates(self, secret: dict[str, Any], session: dict[str, Any], now: int) -> dict[str, Any]:
        if not session.get("accessJwt") or not session.get("refreshJwt"):
            raise Failed("Bluesky answered without a session")
        keep: dict[str, Any] = {k: session[k] for k in ("accessJwt", "refreshJwt", "did", "handle") if k in session}
        # the PDS the account lives on: its DID document says; the login host otherwise
        keep["pds"] = _pds_of(session.get("didDoc")) or (secret.get("session") or {}).get("pds") or self.platforms.endpoints.bluesky_pds
        return {
            "secret": {**secret, "session": keep},
            "refreshedAt": now,
            "expiresAt": jwt_exp_ms(session["accessJwt"]) or now + 2 * HOUR_MS,
        }


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


def platforms_for(ctx: Context) -> Platforms:
    """The platform calls at the hosts ``ctx.platforms`` names, through ``ctx.http``."""
    p = ctx.platforms
    endpoints = Endpoints(
        bluesky_pds=p.bluesky_pds, instagram=p.instagram_url, threads=p.threads_url,
        graph=f"{p.facebook_url.rstrip('/')}/{p.graph_version}".rstrip("/"),
    )
    return Platforms(endpoints, client=ctx.http, attempts=ctx.settings.retries, wait=ctx.settings.retry_wait)


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


def _pds_of(did_doc: Any) -> str | None:
    """The ``#atproto_pds`` service endpoint of a DID document, if it names one."""
    if not isinstance(did_doc, dict):
        return None
    for service in did_doc.get("service") or []:
        if isinstance(service, dict) and str(service.get("id", "")).endswith("#atproto_pds"):
            endpoint = service.get("serviceEndpoint")
            if isinstance(endpoint, str) and endpoint.startswith(("https://", "http://")):
                return endpoint.rstrip("/")
    return None
