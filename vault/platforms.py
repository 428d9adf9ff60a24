"""The calls the vault makes to each platform, and what their failures mean.

Every call goes through one httpx client (base URLs from the settings, so tests point them
at respx or local servers). Tokens travel in headers or form bodies, never in a URL, so no
request log can carry them. Failures come back as one of three exceptions:

    AuthFailure   the platform refused the credential: a person must paste a new one
    Transient     timeout, 5xx, 429, rate limits: retried within bounds, then recorded
    Failed        any other refusal: recorded, not retried, the credential is not flagged
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

log = logging.getLogger(__name__)

META_AUTH_CODES = {190, 2207050}
META_RATE_CODES = {4, 17, 32, 613, 80001, 80002}
BSKY_AUTH_ERRORS = {"ExpiredToken", "InvalidToken", "AuthenticationRequired", "AccountTakedown", "AccountDeactivated"}


class PlatformError(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AuthFailure(PlatformError):
    """The platform refused the credential itself."""


class Transient(PlatformError):
    """Worth trying again later: timeout, 5xx, 429."""


class NetworkError(Transient):
    """The request never got an answer: no connection, DNS, TLS (the platform never saw it)."""


class Failed(PlatformError):
    """A refusal that is neither an auth failure nor transient."""


@dataclass
class Endpoints:
    bluesky_pds: str = "https://bsky.social"
    instagram: str = "https://graph.instagram.com"
    threads: str = "https://graph.threads.net"
    graph: str = "https://graph.facebook.com/v21.0"


def scrub(text: str, secret: dict[str, Any]) -> str:
    """Remove every secret value from a message before it is stored or logged."""
    for value in _strings(secret):
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _host(exc: httpx.RequestError) -> str:
    try:
        return exc.request.url.host or str(exc.request.url)
    except RuntimeError:  # no request attached
        return "the platform"


def jwt_exp_ms(token: str) -> int | None:
    """The ``exp`` of a JWT, in epoch ms, read without verifying (we only schedule by it)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return int(claims["exp"]) * 1000
    except (IndexError, ValueError, KeyError, TypeError):
        return None


class Platforms:
    def __init__(self, endpoints: Endpoints | None = None, *, client: httpx.Client | None = None,
                 attempts: int = 3, wait: float = 0.5, timeout: float = 10.0) -> None:
        self.endpoints = endpoints or Endpoints()
        self.client = client or httpx.Client(timeout=timeout)
        self.attempts = attempts
        self.wait = wait

    def _call(self, what: str, send: Callable[[], httpx.Response], classify: Callable[[httpx.Response], Any]) -> Any:
        def once() -> Any:
            try:
                response = send()
            except httpx.ConnectTimeout as exc:
                raise NetworkError(f"{what}: cannot reach {_host(exc)}: the network did not connect in time (ConnectTimeout)") from None
            except httpx.TimeoutException:
                raise Transient(f"{what}: timed out") from None
            except (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.ProxyError) as exc:
                raise NetworkError(f"{what}: cannot reach {_host(exc)}: the network refused or failed the connection ({type(exc).__name__})") from None
            except httpx.TransportError as exc:
                raise Transient(f"{what}: {type(exc).__name__}") from None
            return classify(response)

        retrying = Retrying(
            retry=retry_if_exception_type(Transient), stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.wait, max=30), reraise=True,
        )
        for attempt in retrying:
            with attempt:
                return once()
        raise AssertionError("unreachable")  # pragma: no cover

    # ---- Meta (Instagram Login, Threads, Facebook Login) --------------------------------
    def _meta(self, what: str) -> Callable[[httpx.Response], dict[str, Any]]:
        def classify(response: httpx.Response) -> dict[str, Any]:
            try:
                body = response.json()
            except ValueError:
                body = {}
            if response.status_code < 400 and isinstance(body, dict) and "error" not in body:
                return body
            error = body.get("error", {}) if isinstance(body, dict) else {}
            error = error if isinstance(error, dict) else {}
            code, sub = error.get("code"), error.get("error_subcode")
            message = str(error.get("message", "") or f"HTTP {response.status_code}")[:300]
            reason = f"{what}: {message} (code {code}{f', subcode {sub}' if sub else ''}, HTTP {response.status_code})"
            if code in META_AUTH_CODES or sub in META_AUTH_CODES:
                raise AuthFailure(reason)
            if response.status_code >= 500 or response.status_code == 429 or code in META_RATE_CODES:
                raise Transient(reason)
            raise Failed(reason)

        return classify

    def _bearer(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def verify_instagram(self, secret: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.endpoints.instagram}/me"
        return self._call("Instagram /me", lambda: self.client.get(url, params={"fields": "user_id,username"}, headers=self._bearer(secret["accessToken"])), self._meta("Instagram /me"))  # type: ignore[no-any-return]

    def refresh_instagram(self, secret: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.endpoints.instagram}/refresh_access_token"
        return self._call("Instagram refresh", lambda: self.client.get(url, params={"grant_type": "ig_refresh_token"}, headers=self._bearer(secret["accessToken"])), self._meta("Instagram refresh"))  # type: ignore[no-any-return]

    def verify_threads(self, secret: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.endpoints.threads}/me"
        return self._call("Threads /me", lambda: self.client.get(url, params={"fields": "id,username"}, headers=self._bearer(secret["accessToken"])), self._meta("Threads /me"))  # type: ignore[no-any-return]

    def refresh_threads(self, secret: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.endpoints.threads}/refresh_access_token"
        return self._call("Threads refresh", lambda: self.client.get(url, params={"grant_type": "th_refresh_token"}, headers=self._bearer(secret["accessToken"])), self._meta("Threads refresh"))  # type: ignore[no-any-return]

    def verify_facebook(self, secret: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.endpoints.graph}/me"
        return self._call("Facebook /me", lambda: self.client.get(url, headers=self._bearer(secret["accessToken"])), self._meta("Facebook /me"))  # type: ignore[no-any-return]

    def refresh_facebook(self, secret: dict[str, Any]) -> dict[str, Any]:
        if not secret.get("appId") or not secret.get("appSecret"):
            raise Failed("Facebook refresh needs appId and appSecret in the secret (paste a JSON object with them)")
        url = f"{self.endpoints.graph}/oauth/access_token"
        form = {"grant_type": "fb_exchange_token", "client_id": secret["appId"], "client_secret": secret["appSecret"],
                "fb_exchange_token": secret["accessToken"]}
        return self._call("Facebook token exchange", lambda: self.client.post(url, data=form), self._meta("Facebook token exchange"))  # type: ignore[no-any-return]

    # ---- Bluesky ------------------------------------------------------------------------
    def _bsky(self, what: str) -> Callable[[httpx.Response], dict[str, Any]]:
        def classify(response: httpx.Response) -> dict[str, Any]:
            try:
                body = response.json()
            except ValueError:
                body = {}
            if response.status_code < 400:
                return body if isinstance(body, dict) else {}
            name = body.get("error", "") if isinstance(body, dict) else ""
            message = str(body.get("message", "") if isinstance(body, dict) else "")[:300]
            reason = f"{what}: {name or 'HTTP ' + str(response.status_code)}{': ' + message if message else ''}"
            if response.status_code == 429 or name == "RateLimitExceeded" or response.status_code >= 500:
                raise Transient(reason)
            if name in BSKY_AUTH_ERRORS or response.status_code == 401:
                raise AuthFailure(reason)
            raise Failed(reason)

        return classify

    def bluesky_create_session(self, identifier: str, secret: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.endpoints.bluesky_pds}/xrpc/com.atproto.server.createSession"
        body = {"identifier": identifier, "password": secret["appPassword"]}
        return self._call("Bluesky createSession", lambda: self.client.post(url, json=body), self._bsky("Bluesky createSession"))  # type: ignore[no-any-return]

    def bluesky_refresh_session(self, secret: dict[str, Any]) -> dict[str, Any]:
        url = f"{secret['session'].get('pds') or self.endpoints.bluesky_pds}/xrpc/com.atproto.server.refreshSession"
        token = secret["session"]["refreshJwt"]
        return self._call("Bluesky refreshSession", lambda: self.client.post(url, headers=self._bearer(token)), self._bsky("Bluesky refreshSession"))  # type: ignore[no-any-return]

    def close(self) -> None:
        self.client.close()
