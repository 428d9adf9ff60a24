"""The calls the vault makes to each platform: verify a pasted secret, refresh a token, make
or refresh a Bluesky session. Every call goes through the ``platforms`` package (one place
per outside platform, with its typed errors) over the process's HTTP client.

    PlatformError tree (platforms.errors)   what the vault does with it
    AuthFailure                             NEEDS RE-AUTH: a person must paste a new secret
    Transient, RateLimited, NetworkError    recorded in lastError, tried again at the next tick
    anything else                           recorded in lastError, not flagged
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from platforms.meta import Facebook, Instagram, RetryPolicy, Threads, Token

if TYPE_CHECKING:  # atproto is loaded only when a Bluesky credential is checked
    from platforms.bluesky import BlueskySession


@dataclass
class Endpoints:
    """Where the platforms are (from the ``[platforms]`` settings)."""

    bluesky_pds: str = "https://bsky.social"
    instagram: str = "https://graph.instagram.com"
    threads: str = "https://graph.threads.net"
    facebook: str = "https://graph.facebook.com"
    graph_version: str = "v21.0"


class Checks:
    """The vault's calls, one client per call over ``http``; ``secret`` is a revealed secret.
    ``now_ms`` (epoch ms) dates a rate limit's reset; the system clock when not given."""

    def __init__(self, http: httpx.Client, endpoints: Endpoints | None = None, *, retry: RetryPolicy | None = None,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.http = http
        self.endpoints = endpoints or Endpoints()
        self.retry = retry or RetryPolicy()
        self._now_ms = now_ms

    def _meta(self, platform: str, secret: dict[str, Any]) -> Instagram | Threads | Facebook:
        e, token = self.endpoints, str(secret["accessToken"])
        extra: dict[str, Any] = {"retry": self.retry}
        if self._now_ms is not None:
            extra["now_ms"] = self._now_ms
        if platform == "instagram":
            return Instagram(self.http, token, base_url=e.instagram, **extra)
        if platform == "threads":
            return Threads(self.http, token, base_url=e.threads, **extra)
        return Facebook(self.http, token, base_url=e.facebook, version=e.graph_version, **extra)

    def verify(self, platform: str, secret: dict[str, Any]) -> None:
        """Check a Meta token with its platform (``GET /me``)."""
        self._meta(platform, secret).verify()

    def refresh(self, platform: str, secret: dict[str, Any]) -> Token:
        """A new long-lived Meta token: ``ig_refresh_token``, ``th_refresh_token``, or the
        ``fb_exchange_token`` exchange (which needs ``appId`` and ``appSecret`` in the secret)."""
        client = self._meta(platform, secret)
        if isinstance(client, Facebook):
            return client.exchange_token(str(secret.get("appId", "")), str(secret.get("appSecret", "")))
        return client.refresh()

    def create_session(self, identifier: str, password: str) -> BlueskySession:
        """A Bluesky session from an app password, at the configured PDS (or entryway)."""
        from platforms.bluesky import Bluesky

        return Bluesky(self.http, self.endpoints.bluesky_pds).create_session(identifier, password)

    def refresh_session(self, session: dict[str, Any]) -> BlueskySession:
        """The next Bluesky session, at the PDS the current one names."""
        from platforms.bluesky import Bluesky

        return Bluesky(self.http, str(session.get("pds") or self.endpoints.bluesky_pds)).refresh_session(str(session["refreshJwt"]))
