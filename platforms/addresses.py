"""Which URLs and addresses the hub may fetch: the policy of the guarded fetcher, with no I/O.

``FetchPolicy.url_problem`` judges a URL without the network (its scheme, its form, a literal
address or a name that always means this machine), so a write can be refused in its
transaction; ``FetchPolicy.address_allowed`` judges each address a name resolved to, when
``platforms.fetcher`` is about to connect. Refused: loopback, private, link-local, shared
(CGNAT), multicast, reserved and unspecified addresses, IPv4 and IPv6, and IPv4 carried inside
IPv6 (mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo), and
inet_aton's spellings of IPv4 (``2130706433``, ``0x7f.1``); allowed networks are the operator's
exceptions (``fetch.allow_networks``).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_REDIRECTS = 3
DEFAULT_TIMEOUT = 10.0
URL_LENGTH = 2048
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
NOT_PUBLIC = "its address is not a public one"


def _as_network(value: str) -> Network:
    try:
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise ValueError(f"{value!r} is not a network: write it like 10.0.0.0/8, 127.0.0.1/32 or fd00::/8") from None


@dataclass(frozen=True)
class FetchPolicy:
    """What the fetcher may fetch: see the module docstring. Built from the ``[fetch]`` settings
    with ``FetchPolicy.of(section)``; the default refuses every non-public address and http."""

    allow_http: bool = False
    allow_networks: tuple[Network, ...] = ()
    max_redirects: int = DEFAULT_REDIRECTS
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def of(cls, section: Any | None) -> FetchPolicy:
        """The policy of a ``[fetch]`` settings section (None: the defaults)."""
        if section is None:
            return cls()
        return cls(allow_http=bool(section.allow_http),
                   allow_networks=tuple(_as_network(n) for n in section.allow_networks),
                   max_redirects=int(section.max_redirects), max_bytes=int(section.max_bytes), timeout=float(section.timeout))

    def address_allowed(self, address: Address) -> bool:
        """Whether a connection to ``address`` may be made: a public address, or one in an allowed network."""
        if any(address in net for net in self.allow_networks if net.version == address.version):
            return True
        for inner in _embedded(address):
            if any(inner in net for net in self.allow_networks if net.version == inner.version):
                return True
        return all(_public(a) for a in (address, *_embedded(address)))

    def url_problem(self, url: str) -> str | None:
        """Why ``url`` cannot be fetched, judged without the network (scheme, form, a literal
        address, a local name); None when it may be tried. The sentence names the URL's part
        that is wrong, never anything of this machine."""
        parsed = parse(url)
        if isinstance(parsed, str):
            return parsed
        scheme, host, _port = parsed
        if scheme == "http" and not self.allow_http:
            return "only https URLs are fetched (http:// is not allowed on this hub)"
        address = literal(host)
        if address is not None:
            return None if self.address_allowed(address) else NOT_PUBLIC
        if host in _LOCAL_NAMES or host.endswith(".localhost"):  # names that always mean this machine
            return None if self.address_allowed(ipaddress.IPv4Address("127.0.0.1")) else NOT_PUBLIC
        return None


def parse(url: str) -> tuple[str, str, int] | str:
    """``(scheme, host, port)`` of a URL the fetcher could fetch, or why it is not one (a sentence)."""
    if not isinstance(url, str) or not url:
        return "it is not a URL"
    if len(url) > URL_LENGTH:
        return f"the URL is longer than {URL_LENGTH:,} characters"
    if any(c in url for c in "\r\n\t\x00 ") or not url.isprintable():
        return "the URL has spaces or control characters in it"
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return "the URL cannot be read (a malformed host or port)"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return "only http(s) URLs are fetched" if scheme else "it is not a URL (give https://HOST/PATH)"
    if not host:
        return "the URL has no host"
    if parts.username is not None or parts.password is not None:
        return "the URL carries a user name or password: give it without"
    try:
        host = host.encode("idna").decode("ascii").lower() if not host.isascii() else host.lower()
    except UnicodeError:
        return "the URL's host is not a valid name"
    return scheme, host.rstrip("."), port or (443 if scheme == "https" else 80)


def literal(host: str) -> Address | None:
    """The address a host names literally (IPv4, IPv6 in brackets or not, inet_aton's forms), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    # inet_aton's forms: 2130706433, 0x7f.1, 017700000001 all mean 127.0.0.1 to a resolver
    if host and all(c in "0123456789abcdefx." for c in host) and any(c.isdigit() for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _embedded(address: Address) -> tuple[Address, ...]:
    """The IPv4 addresses an IPv6 address carries (mapped, NAT64, 6to4, Teredo)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return ()
    found: list[Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if any(address in net for net in _NAT64):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return tuple(found)


def _public(address: Address) -> bool:
    return bool(address.is_global) and not (address.is_multicast or address.is_reserved or address.is_unspecified
                                            or address.is_loopback or address.is_link_local or address.is_private)


__all__ = ["NOT_PUBLIC", "Address", "FetchPolicy", "Network", "literal", "parse"]
