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

if TYPE_CHECKING:  # the Bluesky adapter is loaded only when a Bluesky credential is checked
    from platforms.bluesky import BlueskySession


@dataclass
class Checks:
    """The vault's calls, one client per call over ``http``; ``secret`` is a revealed secret.
    ``now_ms`` (epoch ms) dates a rate limit's reset; the system clock when not given."""

    def __init__(self, http: httpx.Client, platforms: Any | None = None, *, retry: RetryPolicy | None = None,
                 now_ms: Callable[[], int] | None = None) -> None:
        from platforms.settings import PlatformSettings

        self.http = http
        self.platforms = platforms if platforms is not None else PlatformSettings()  # where the platforms are
        self.retry = retry or RetryPolicy()
        self._now_ms = now_ms

    def _meta(self, platform: str, secret: dict[str, Any]) -> Instagram | Threads | Facebook:
        from platforms.clients import meta_client

        return meta_client(self.http, platform, str(secret["accessToken"]), self.platforms, retry=self.retry, now_ms=self._now_ms)

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

        return Bluesky(self.http, self.platforms.bluesky_pds).create_session(identifier, password)

    def refresh_session(self, session: dict[str, Any]) -> BlueskySession:
        """The next Bluesky session, at the PDS the current one names."""
        from platforms.bluesky import Bluesky

        return Bluesky(self.http, str(session.get("pds") or self.platforms.bluesky_pds)).refresh_session(str(session["refreshJwt"]))
