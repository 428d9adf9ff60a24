"""The ``[platforms]`` and ``[fetch]`` settings sections: where skyhub calls, and what the guarded
fetcher may fetch. The platforms own them (one place for every product), and ``platforms.clients``
makes a connected client from them, so no product repeats a base URL, a version or a timeout."""

from __future__ import annotations

import ipaddress

from pydantic import field_validator

from ledger.section import Interval, Section


class PlatformSettings(Section):
    """``[platforms]``: where skyhub calls. Point them at local servers to test."""

    bluesky_pds: str = "https://bsky.social"
    """the Bluesky PDS (or entryway) where accounts log in; sessions then use the PDS their DID names"""
    instagram_url: str = "https://graph.instagram.com"
    """the Graph API host for Instagram Login tokens"""
    facebook_url: str = "https://graph.facebook.com"
    """the Graph API host for Facebook Login tokens"""
    threads_url: str = "https://graph.threads.net"
    """the Threads API host"""
    graph_version: str = "v21.0"
    """the Graph API version used on the Instagram and Facebook hosts"""
    threads_version: str = "v1.0"
    """the Threads API version"""
    timeout: Interval = 10.0
    """the time limit of one call to a platform"""


class FetchSettings(Section):
    """``[fetch]``: the guarded fetcher (platforms/fetcher.py), the one way the hub fetches a URL someone else chose
    (a post's image, a built page, a probe's lane)."""

    allow_http: bool = False
    """fetch plain http:// URLs too (https only by default)"""
    allow_networks: list[str] = []
    """networks the hub may fetch from although they are not public, as CIDR (`["10.1.2.0/24"]`); none by default: loopback, private, link-local and reserved addresses are refused"""
    max_redirects: int = 3
    """redirects followed, each checked like the first URL"""
    max_bytes: int = 10 * 1024 * 1024
    """the most one fetch reads (an image for a Bluesky post is then scaled down to Bluesky's limit)"""
    timeout: Interval = 10.0
    """the whole fetch, every redirect included, must end within this"""

    @field_validator("allow_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for item in value:
            try:
                ipaddress.ip_network(item.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{item!r} is not a network: write it like 10.0.0.0/8, 127.0.0.1/32 or fd00::/8") from None
        return value


__all__ = ["FetchSettings", "PlatformSettings"]
