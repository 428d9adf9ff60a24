"""Console sessions: a person's token, pasted once, becomes a session cookie.

- **Server-side sessions.** Signing in checks the token exactly as the API does (``Authenticator``)
  and writes a document ``session:<sha256 of the session id>`` in the ``auth`` database (as
  ``admin``, like tokens): the person's actor, the token's id, when it was made and when it
  expires. The cookie holds only the random session id; the database holds only its hash, so a
  leaked database opens no session, and the token itself is never stored or echoed.
- **Every request re-checks** the session document and the token's document: a revoked token
  (``skyhub user revoke``), an expired or signed-out session ends at once (the page goes back
  to sign-in; an open live stream closes).
- **CSRF.** Every form carries ``HMAC(session id, "csrf")``: it is never stored, and cannot be
  made without the cookie. Before a session exists (the sign-in form), a short-lived
  pre-session cookie plays the same part. Every POST must carry the right value and, where the
  browser sends them, an ``Origin`` of this host and ``Sec-Fetch-Site: same-origin``.
- **The cookie** is HttpOnly, SameSite=Strict, Path=/, and Secure when the request came over
  https or the hub's ``public_url`` is https.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger import Clock, Conflict, LedgerError, NotFound, Store

from ..auth import AUTH_DB, Authenticator, Unauthorized, check_zone, zone_of

log = logging.getLogger(__name__)

COOKIE = "skyhub_session"
ZONE_COOKIE = "skyhub_zone"  # the browser's zone (console.js writes it; the server checks it against zoneinfo)
PRE_COOKIE = "skyhub_signin"
SESSION_MS = 12 * 3_600_000
PRE_MAX_AGE = 3600


FORGET_AFTER_MS = 7 * 86_400_000
FORGET_LOOK = 200


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def csrf_token(secret: str) -> str:
    """The CSRF value for forms of the session (or pre-session) whose cookie is ``secret``."""
    return hmac.new(secret.encode(), b"skyhub-console-csrf", hashlib.sha256).hexdigest()


def csrf_ok(secret: str | None, sent: str | None) -> bool:
    """Whether a form's CSRF value belongs to the cookie ``secret``."""
    if not secret or not sent:
        return False
    return hmac.compare_digest(csrf_token(secret), sent)


@dataclass(frozen=True)
class Session:
    """A signed-in person: who they act as, the token they signed in with, and the form secret."""

    actor: str
    name: str
    token_id: str
    expires_at: int
    csrf: str
    cookie: str  # the session id from the cookie (never shown, never logged)
    zone: str = "UTC"  # the time zone the console shows this person's times in (see ``zone_from``)
    zone_from: str = "default"  # "person" (chosen: skyhub user zone, the zone form), "browser" (its cookie) or "default"

    def __repr__(self) -> str:
        return f"Session(actor={self.actor!r}, token_id={self.token_id!r})"


class Sessions:
    """Signing in and out, and the per-request check (see the module docstring). ``lifetime_ms``
    is how long a session lasts; ``hub_url`` gives the hub's public URL, for the authenticator."""

    def __init__(self, store: Store, *, clock: Clock, lifetime_ms: int = SESSION_MS, hub_url: Callable[[], str] = lambda: "") -> None:
        self.store = store
        self.clock = clock
        self.lifetime_ms = lifetime_ms
        self.authenticator = authenticator(store, hub_url)

    def sign_in(self, token: str) -> tuple[str, Session]:
        """Check ``token`` as the API does and open a session. Returns (the cookie value, the session).
        Raises ``Unauthorized`` with the API's sentence for a bad, unknown or revoked token."""
        token = token.strip()
        now = self.clock.now_ms()
        principal = self.authenticator.authenticate(f"Bearer {token}", "GET", "/console/sign-in", b"", now)
        if not principal.actor.startswith("user:") or not principal.credential.startswith("token:"):
            raise Unauthorized("the console is for people: sign in with a person's token (skyhub user add NAME)")
        session_id = secrets.token_urlsafe(32)
        expires = now + self.lifetime_ms
        self.store.put(AUTH_DB, {
            "kind": "session", "actor": principal.actor, "token": principal.credential.split(":", 1)[1],
            "createdAt": now, "expiresAt": expires, "endedAt": None,
        }, f"session:{_digest(session_id)}", actor="admin", create_only=True)
        log.info("console: %s signed in", principal.actor, extra={"actor": principal.actor})
        self._forget_old(now)
        return session_id, self._session(principal.actor, principal.credential.split(":", 1)[1], expires, session_id)

    def _forget_old(self, now: int) -> None:
        """Delete sessions that ended or expired over a week ago (a bounded look at each sign-in,
        so the ``auth`` database does not grow with every sign-in for good)."""
        try:
            page = self.store.query(AUTH_DB, "kind", "session", limit=FORGET_LOOK)
        except LedgerError:
            return
        for doc in page.docs:
            ended = doc.get("endedAt") or doc.get("expiresAt") or now
            if isinstance(ended, int) and ended < now - FORGET_AFTER_MS:
                try:
                    self.store.delete(AUTH_DB, doc["_id"], actor="admin", if_rev=doc["_rev"])
                except LedgerError:
                    pass  # another process forgot it first, or it changed: the next sign-in looks again

    def _session(self, actor: str, token_id: str, expires: int, session_id: str) -> Session:
        name = actor.partition(":")[2]
        try:
            chosen = zone_of(self.store, name)
        except LedgerError:
            chosen = None
        return Session(actor, name, token_id, expires, csrf_token(session_id), session_id,
                       zone=chosen or "UTC", zone_from="person" if chosen else "default")

    def check(self, session_id: str | None) -> Session | None:
        """The live session for a cookie, or None (no cookie, unknown, expired, signed out, token revoked)."""
        if not session_id or len(session_id) > 100:
            return None
        try:
            doc = self.store.get(AUTH_DB, f"session:{_digest(session_id)}")
        except (NotFound, LedgerError):
            return None
        now = self.clock.now_ms()
        if doc.get("kind") != "session" or doc.get("endedAt") or int(doc.get("expiresAt") or 0) <= now:
            return None
        try:
            token = self.store.get(AUTH_DB, f"token:{doc['token']}")
        except (NotFound, LedgerError):
            return None
        if token.get("revokedAt") or token.get("actor") != doc.get("actor"):
            return None
        return self._session(str(doc["actor"]), str(doc["token"]), int(doc["expiresAt"]), session_id)

    def sign_out(self, session: Session) -> None:
        """End the session (its document keeps when)."""
        doc_id = f"session:{_digest(session.cookie)}"
        for _ in range(3):
            try:
                doc = self.store.get(AUTH_DB, doc_id)
                if doc.get("endedAt"):
                    return
                body: dict[str, Any] = {k: v for k, v in doc.items() if not k.startswith("_")}
                body["endedAt"] = self.clock.now_ms()
                self.store.put(AUTH_DB, body, doc_id, actor="admin", if_rev=doc["_rev"])
                log.info("console: %s signed out", session.actor, extra={"actor": session.actor})
                return
            except Conflict:
                continue
            except NotFound:
                return


def with_browser_zone(session: Session, sent: str | None) -> Session:
    """``session`` in the browser's zone ``sent`` (its cookie) when the person chose none and it is a zone."""
    if session.zone_from == "person" or not sent:
        return session
    try:
        return dataclasses.replace(session, zone=check_zone(sent), zone_from="browser")
    except LedgerError:
        return session


def authenticator(store: Store, hub_url: Callable[[], str]) -> Authenticator:
    """The API's authenticator over ``store`` (device signatures name the hub's URL)."""
    return Authenticator(store, hub_url)


def new_presession() -> str:
    """A random value for the sign-in form's cookie (CSRF before a session exists)."""
    return secrets.token_urlsafe(24)
