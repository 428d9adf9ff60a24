"""Clients for a credential, made from the ``[platforms]`` settings: the one place that knows which
host and API version a Meta login uses, so the vault (verifying and refreshing tokens) and the
publishers (posting) reach the same endpoints the same way.

    login        host                       checks and refreshes with       publishes with
    instagram    platforms.instagram_url    Instagram, unversioned          Instagram, platforms.graph_version
    facebook     platforms.facebook_url     Facebook, platforms.graph_version   Instagram, platforms.graph_version
    threads      platforms.threads_url      Threads, unversioned            Threads, platforms.threads_version
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from .graph import RetryPolicy
from .meta import Facebook, Instagram, Threads

META_LOGINS = ("instagram", "facebook", "threads")


def meta_client(http: httpx.Client, login: str, token: str, platforms: Any, *, retry: RetryPolicy | None = None,
                now_ms: Callable[[], int] | None = None) -> Instagram | Threads | Facebook:
    """A Graph API client for a token of ``login`` (see the module docstring), through ``http``
    (``ctx.http``), with the settings' time limit: the client that checks and refreshes it."""
    options = _options(platforms, retry, now_ms)
    # Meta documents Instagram Login's and Threads' token endpoints (/me, /refresh_access_token) without an
    # API version; Facebook Login's (/me, /oauth/access_token) with one
    if login == "facebook":
        return Facebook(http, token, base_url=platforms.facebook_url, version=platforms.graph_version, **options)
    if login == "threads":
        return Threads(http, token, base_url=platforms.threads_url, **options)
    if login == "instagram":
        return Instagram(http, token, base_url=platforms.instagram_url, **options)
    raise ValueError(f"no Meta login {login!r}: one of {', '.join(META_LOGINS)}")


def publishing_client(http: httpx.Client, login: str, token: str, platforms: Any, *, retry: RetryPolicy | None = None,
                      now_ms: Callable[[], int] | None = None) -> Instagram | Threads:
    """The client that publishes with a token of ``login``: Threads for a Threads token; Instagram for an
    Instagram Login token, or for a Facebook Login token (then on the Facebook host)."""
    options = _options(platforms, retry, now_ms)
    if login == "threads":
        return Threads(http, token, base_url=platforms.threads_url, version=platforms.threads_version, **options)
    if login in ("instagram", "facebook"):
        host = platforms.instagram_url if login == "instagram" else platforms.facebook_url
        return Instagram(http, token, base_url=host, version=platforms.graph_version, **options)
    raise ValueError(f"no Meta login {login!r}: one of {', '.join(META_LOGINS)}")


def _options(platforms: Any, retry: RetryPolicy | None, now_ms: Callable[[], int] | None) -> dict[str, Any]:
    options: dict[str, Any] = {"retry": retry or RetryPolicy(), "timeout": platforms.timeout}
    if now_ms is not None:
        options["now_ms"] = now_ms
    return options


__all__ = ["META_LOGINS", "meta_client", "publishing_client"]
