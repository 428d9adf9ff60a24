"""The guarded fetcher: the one way the hub fetches a URL that someone else chose.

A post's image URL, a built page's URL and a probe's lane are written by clients or operators,
and the hub then fetches them from *its own* network position: without a guard, a document
could make the hub read its cloud metadata service, a database's HTTP port on loopback or an
intranet page, and tell the client what it found. Every such fetch goes through ``Fetcher``:

- **Schemes**: https only, unless the operator allows http (``fetch.allow_http``).
- **Addresses**: the host is resolved once, every address it resolves to is checked, and the
  connection is made to the checked address (a pinned connection: a second DNS answer cannot
  change where it goes, TLS still verifies the certificate for the name). Loopback, private,
  link-local, shared (CGNAT), multicast, reserved and unspecified addresses are refused, IPv4
  and IPv6 alike, including IPv4 inside IPv6 (mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``,
  6to4 ``2002::/16``, Teredo); an operator may allow networks by name (``fetch.allow_networks``).
- **Redirects** are followed by hand, at most ``max_redirects``, each hop checked as the first.
- **Caps**: at most ``max_bytes`` read (a declared length over it is refused before reading),
  the whole fetch (every hop) within ``timeout`` seconds; no proxy from the environment, no
  cookies, no credentials in URLs.
- **Refusals reveal nothing** of the hub's network: "its address is not a public one" names
  neither the address nor whether anything listens there.

``FetchRefused`` (a permanent refusal: the URL is not allowed, or its answer is too large) and
the transport errors of ``platforms.transport`` (``NetworkError``, ``Transient``) are all it
raises. An HTTP error status is an answer, not an exception: ``Fetched.status`` says it.

Tests pass ``transport=`` (an ``httpx.MockTransport``, or leave it to respx) and ``resolver=``
(a function from host and port to addresses), so no test needs DNS or the network.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import httpcore
import httpx

from .addresses import NOT_PUBLIC, Address, FetchPolicy, literal, parse
from .errors import Answer, FetchRefused, NetworkError, Transient
from .transport import transport_error

Resolver = Callable[[str, int], Sequence[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (A and AAAA), in the resolver's order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for *_, sockaddr in infos:
        address = str(sockaddr[0]).split("%", 1)[0]  # a scope id belongs to a link-local address, refused anyway
        if address not in out:
            out.append(address)
    return out


@dataclass(frozen=True)
class Fetched:
    """What a fetch got: the final URL (after redirects), its status, headers and body."""

    url: str
    status: int
    headers: httpx.Headers
    content: bytes = field(repr=False)

    @property
    def content_type(self) -> str:
        """The declared media type, lower case, without parameters ("" when none)."""
        value: str = self.headers.get("content-type", "")
        return value.split(";", 1)[0].strip().lower()


class _Pinned(httpcore.NetworkBackend):
    """Connects only to addresses the fetcher checked: ``pins`` maps (host, port) to one."""

    def __init__(self, pins: dict[tuple[str, int], str]) -> None:
        self.pins = pins
        self.inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        address = self.pins.get((host.lower().strip("[]"), port))
        if address is None:
            raise httpcore.ConnectError("no checked address for this host")
        return self.inner.connect_tcp(address, port, timeout=timeout, local_address=local_address, socket_options=socket_options)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("the fetcher never uses a Unix socket")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _PinnedTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool that dials only pinned addresses."""

    def __init__(self, pins: dict[tuple[str, int], str], context: ssl.SSLContext) -> None:
        super().__init__(verify=context, trust_env=False, retries=0)
        # httpx takes no network backend; its pool is replaced by one that has ours (same options)
        self._pool = httpcore.ConnectionPool(ssl_context=context, max_connections=4, max_keepalive_connections=0,
                                             network_backend=_Pinned(pins))


_CONTEXT: ssl.SSLContext | None = None
_CONTEXT_LOCK = threading.Lock()


def _ssl_context() -> ssl.SSLContext:
    global _CONTEXT  # made once per process: loading the CA bundle costs ~20 ms
    with _CONTEXT_LOCK:
        if _CONTEXT is None:
            _CONTEXT = httpx.create_ssl_context()
        return _CONTEXT


class Fetcher:
    """Fetches URLs under a ``FetchPolicy`` (see the module docstring). One per process is enough:
    each fetch makes its own pinned connection. ``transport`` and ``resolver`` are test seams."""

    def __init__(self, policy: FetchPolicy | None = None, *, resolver: Resolver | None = None,
                 transport: httpx.BaseTransport | None = None, user_agent: str = "skyhub") -> None:
        self.policy = policy or FetchPolicy()
        self.resolver = resolver or system_resolver
        self.transport = transport
        self.user_agent = user_agent

    def problem(self, url: str) -> str | None:
        """Why ``url`` will not be fetched, judged without the network (see ``FetchPolicy.url_problem``)."""
        return self.policy.url_problem(url)

    def get(self, url: str, *, what: str = "fetch", max_bytes: int | None = None, timeout: float | None = None,
            accept: str = "*/*", trusted: bool = False) -> Fetched:
        """GET ``url`` under the policy, following redirects that pass it too. ``what`` starts
        every refusal's sentence ("image 1 (https://...)"); ``max_bytes`` and ``timeout`` may
        only tighten the policy's caps. ``trusted`` (an operator's own setting, such as a probe
        lane) lets the first hop reach a non-public address over http; its redirects are
        checked as usual."""
        limit = min(max_bytes or self.policy.max_bytes, self.policy.max_bytes)
        budget = min(timeout or self.policy.timeout, self.policy.timeout)
        deadline = time.monotonic() + budget
        hops = 0
        while True:
            host, port, address = self._check(url, what, trusted=trusted and hops == 0)
            client = self._client(host, port, address, accept)
            try:
                response = self._send(client, url, host, what, deadline, budget)
                try:
                    location = response.headers.get("location")
                    if response.is_redirect and location:
                        hops += 1
                        if hops > self.policy.max_redirects:
                            raise FetchRefused(f"{what} is not fetched: it redirects more than {self.policy.max_redirects} times")
                        try:
                            url = urljoin(url, location)
                        except ValueError:
                            raise FetchRefused(f"{what} is not fetched: it redirects to something that is not a URL") from None
                        continue
                    content = self._read(response, host, what, limit, deadline, budget)
                    return Fetched(url, response.status_code, response.headers, content)
                finally:
                    response.close()
            finally:
                client.close()

    # ---- one hop -----------------------------------------------------------------------------
    def _check(self, url: str, what: str, *, trusted: bool) -> tuple[str, int, str]:
        parsed = parse(url)
        if isinstance(parsed, str):
            raise FetchRefused(f"{what} is not fetched: {parsed}")
        scheme, host, port = parsed
        if scheme == "http" and not (self.policy.allow_http or trusted):
            raise FetchRefused(f"{what} is not fetched: only https URLs are fetched (http:// is not allowed on this hub)")
        named = literal(host)
        addresses: list[Address] = []
        if named is not None:
            addresses.append(named)
        else:
            try:
                found = list(self.resolver(host, port))
            except (OSError, UnicodeError):
                found = []
            for text in found:
                try:
                    addresses.append(ipaddress.ip_address(text))
                except ValueError:
                    continue
            if not addresses:
                raise NetworkError(f"{what} could not be fetched: the name {host} does not resolve; check the URL",
                                   Answer(platform="web"), host=host)
        if not trusted and not all(self.policy.address_allowed(a) for a in addresses):
            raise FetchRefused(f"{what} is not fetched: {NOT_PUBLIC}")
        return host, port, str(addresses[0])

    def _client(self, host: str, port: int, address: str, accept: str) -> httpx.Client:
        transport = self.transport or _PinnedTransport({(host, port): address}, _ssl_context())
        return httpx.Client(transport=transport, trust_env=False, follow_redirects=False,
                            headers={"User-Agent": self.user_agent, "Accept": accept})

    @staticmethod
    def _send(client: httpx.Client, url: str, host: str, what: str, deadline: float, budget: float) -> httpx.Response:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Transient(f"{what} could not be fetched: {host} took longer than {budget:g} s; {Transient.advice}",
                            Answer(platform="web"))
        try:
            return client.send(client.build_request("GET", url, timeout=remaining), stream=True)
        except httpx.TransportError as exc:
            raise transport_error(exc, what, "web", host=host) from None

    @staticmethod
    def _read(response: httpx.Response, host: str, what: str, limit: int, deadline: float, budget: float) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise FetchRefused(f"{what} is {int(declared):,} bytes; at most {limit:,} are fetched")
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:  # a server that does not say, or says wrong (or compresses): stop at the limit
                    raise FetchRefused(f"{what} is over {limit:,} bytes, the most that is fetched")
                if time.monotonic() > deadline:
                    raise Transient(f"{what} could not be fetched: {host} took longer than {budget:g} s; {Transient.advice}",
                                    Answer(platform="web"))
                chunks.append(chunk)
        except httpx.TransportError as exc:
            raise transport_error(exc, what, "web", host=host) from None
        except httpx.DecodingError:
            raise FetchRefused(f"{what} could not be read: {host} sent a body that does not decode") from None
        return b"".join(chunks)


__all__ = ["FetchPolicy", "FetchRefused", "Fetched", "Fetcher", "system_resolver"]
