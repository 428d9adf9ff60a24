"""Credential documents: ``vault/<platform>:<account>``, ``kind: "credential"``.

Metadata is in the clear (platform, account, version, times, needsReauth, lastError, a keyed
fingerprint); the secret is sealed. People and the API can write a new version and read the
metadata, never the secret: only backend actors (``tick:*``, ``handler:*``) reveal it.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from ledger import ADMIN, Edge, Guard, GuardContext, Ledger, Machine, NotFound, handler, same_claim, tick, user
from ledger.guards import lease_expired

from .errors import NeedsReauth, NotRevealable, VaultError
from .keys import MasterKey
from .seal import fingerprint, seal, unseal

DB = "vault"
PLATFORMS = {
    "bluesky": "appPassword",   # an app password; the vault adds the session it creates
    "instagram": "accessToken",  # Instagram Login long-lived token
    "threads": "accessToken",    # Threads long-lived token
    "facebook": "accessToken",   # Facebook Login long-lived token (+ appId, appSecret to refresh)
}
_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
PUBLIC = ("platform", "account", "version", "status", "createdAt", "refreshedAt", "expiresAt", "verifiedAt",
          "needsReauth", "lastError", "fingerprint", "createSessions")


def _lease_claim(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    """A lease for one rotation: a fresh claimId and leaseUntil in the future (no attempt count)."""
    claim_id = new.get("claimId")
    if not isinstance(claim_id, str) or not claim_id or claim_id == (old or {}).get("claimId"):
        return "a rotation needs a fresh claimId"
    lease = new.get("leaseUntil")
    if not isinstance(lease, int) or lease <= ctx.now_ms:
        return "a rotation needs leaseUntil in the future"
    return None


lease_claim = Guard("lease_claim", _lease_claim)
PEOPLE = [user(), ADMIN]
VAULT_TICK = tick("vault")

CREDENTIALS = Machine(
    DB,
    kind="credential",
    start={"unverified": None},
    edges=[
        # a person pastes a new version, whatever the state (a paste wins over a rotation)
        Edge(["unverified", "ok", "needs-reauth", "rotating"], "unverified", by=PEOPLE),
        # the vault tick verifies a paste, or rotates, under a short lease: exactly one writer
        Edge(["unverified", "ok"], "rotating", by=VAULT_TICK, guards=[lease_claim]),
        Edge("rotating", "ok", by=VAULT_TICK, guards=[same_claim]),
        Edge("rotating", "needs-reauth", by=VAULT_TICK, guards=[same_claim]),
        Edge("rotating", "unverified", by=VAULT_TICK, guards=[same_claim]),
        Edge("rotating", "unverified", by=tick("sweep"), guards=[lease_expired]),
        # any backend consumer that meets an auth failure says so
        Edge("ok", "needs-reauth", by=[tick(), handler()]),
    ],
    fixed=["platform", "account"],
    delete_by=PEOPLE,
)


def credential_id(platform: str, account: str) -> str:
    """``platform:account``, the id of a credential's document; VaultError for an unknown platform or an
    account that is not valid."""
    if platform not in PLATFORMS:
        raise VaultError(f"unknown platform {platform!r}: use one of {', '.join(PLATFORMS)}")
    if not _ACCOUNT.match(account or ""):
        raise VaultError(f"account {account!r} is not valid: use letters, digits and . _ : @ -")
    return f"{platform}:{account}"


def parse_secret(platform: str, text: str | dict[str, Any]) -> dict[str, Any]:
    """A pasted secret: a JSON object, or the platform's main value as plain text."""
    if isinstance(text, dict):
        secret = text
    else:
        stripped = text.strip()
        if stripped.startswith("{"):
            try:
                secret = json.loads(stripped)
            except json.JSONDecodeError:
                raise VaultError("the pasted secret looks like JSON but does not parse (no part of it is shown here)") from None
        else:
            secret = {PLATFORMS[platform]: stripped}
    main = PLATFORMS[platform]
    if not isinstance(secret, dict) or not isinstance(secret.get(main), str) or not secret[main]:
        raise VaultError(f"a {platform} secret needs {main}: paste it alone, or a JSON object with {main!r}")
    return secret


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """The metadata of a credential document: never the sealed secret."""
    out = {"id": doc["_id"]}
    out.update({k: doc.get(k) for k in PUBLIC})
    return out


class Vault:
    """The vault as one actor sees it. ``key`` is loaded on first use (sealing and revealing need it; metadata does not)."""

    def __init__(self, db: Ledger, key: MasterKey | Callable[[], MasterKey]) -> None:
        self.db = db
        self._key = key

    @property
    def key(self) -> MasterKey:
        """The master key, loaded on first use (the loader's VaultError, e.g. NoMasterKey, when there is none)."""
        if callable(self._key):
            self._key = self._key()
        return self._key

    def _doc(self, cred_id: str) -> dict[str, Any]:
        try:
            return self.db.get(DB, cred_id)
        except NotFound:
            raise NotFound(f"no credential {cred_id!r} in the vault (see `skyhub vault list`)") from None

    # ---- what people do --------------------------------------------------------------------
    def put(self, platform: str, account: str, secret: str | dict[str, Any]) -> dict[str, Any]:
        """Store a new version of a credential; it is verified by the next vault tick."""
        cred_id = credential_id(platform, account)
        parsed = parse_secret(platform, secret)
        key = self.key
        now = self.db.now()
        try:
            head: dict[str, Any] | None = self.db.get(DB, cred_id)
        except NotFound:
            head = None
        version = int((head or {}).get("version", 0)) + 1
        doc = {
            "kind": "credential", "platform": platform, "account": account, "version": version,
            "status": "unverified", "needsReauth": False, "lastError": None,
            "createdAt": (head or {}).get("createdAt", now), "refreshedAt": now, "expiresAt": None, "verifiedAt": None,
            "fingerprint": fingerprint(key, parsed), "sealed": seal(key, cred_id, version, parsed),
            "createSessions": (head or {}).get("createSessions"),
        }
        if head is None:
            out = self.db.put(DB, doc, cred_id, create_only=True)
        else:
            out = self.db.put(DB, doc, cred_id, if_rev=head["_rev"])
        return public(out)

    def list(self) -> list[dict[str, Any]]:
        """Every credential's metadata."""
        return [public(d) for d in self.db.query_all(DB, "kind", "credential")]

    def show(self, cred_id: str) -> dict[str, Any]:
        """One credential's metadata; NotFound when there is none."""
        return public(self._doc(cred_id))

    def remove(self, cred_id: str) -> None:
        """Delete a credential (its history keeps the metadata); NotFound when there is none."""
        doc = self._doc(cred_id)
        self.db.delete(DB, cred_id, if_rev=doc["_rev"])

    # ---- what backend actors do ------------------------------------------------------------
    def reveal(self, cred_id: str) -> dict[str, Any]:
        """The secret of the current version. Only ``tick:*`` and ``handler:*`` may."""
        if not self.db.actor.startswith(("tick:", "handler:")):
            raise NotRevealable(f"{self.db.actor} may not read a secret: the vault is write-only for people and devices")
        doc = self._doc(cred_id)
        return unseal(self.key, cred_id, int(doc["version"]), doc["sealed"])

    def usable(self, cred_id: str) -> dict[str, Any]:
        """The credential's metadata if work may use it now; NeedsReauth otherwise."""
        doc = self._doc(cred_id)
        if doc.get("needsReauth") or doc.get("status") == "needs-reauth":
            problem = f"{cred_id} needs a fresh secret: {doc.get('lastError') or 'it was refused'}"
            raise NeedsReauth(f"{problem}; paste one with `skyhub vault put`", problem)
        if doc.get("status") == "unverified":
            raise NeedsReauth(f"{cred_id} is waiting for its first check (the next vault tick)")
        return public(doc)

    def report_dead(self, cred_id: str, reason: str) -> None:
        """A consumer met an auth failure with this credential: flip needsReauth."""
        doc = self._doc(cred_id)
        if doc.get("status") != "ok":
            return
        body = {k: v for k, v in doc.items() if not k.startswith("_")}
        body.update(status="needs-reauth", needsReauth=True, lastError=reason[:500])
        self.db.put(DB, body, cred_id, if_rev=doc["_rev"])


def new_claim(doc: dict[str, Any], lease_ms: int, now_ms: int) -> dict[str, Any]:
    """The body that claims ``doc`` for one rotation: ``rotating``, a fresh ``claimId``, a lease of ``lease_ms``
    from ``now_ms`` (epoch ms). It has no ``_rev``: write it with ``if_rev`` set to the document's."""
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body.update(status="rotating", claimId=uuid.uuid4().hex, leaseUntil=now_ms + lease_ms)
    return body
