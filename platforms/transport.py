"""httpx's transport failures, translated once for every adapter.

    ConnectError, ConnectTimeout, ProxyError  -> NetworkError  (the host could not be reached)
    other timeouts (read, write, pool)        -> Transient     (it did not answer in time)
    other transport errors (read, protocol)   -> Transient     (the connection broke)
    UnsupportedProtocol                       -> Failed        (the configured URL is wrong)

Each reason names the host and says whether it was the network or the platform, e.g.
"cannot reach pds.example.org: the network refused the connection (ConnectError)".
"""

from __future__ import annotations

import httpx

from .errors import Answer, Failed, NetworkError, PlatformError, Transient

_NOT_RESOLVED = ("name or service not known", "nodename nor servname", "temporary failure in name resolution",
                 "no address associated", "getaddrinfo failed", "name resolution")


def host_of(exc: httpx.TransportError, fallback: str = "") -> str:
    """The host the failed request was for (``fallback`` when httpx does not say)."""
    try:
        return exc.request.url.host or fallback
    except RuntimeError:  # an exception raised without a request attached
        return fallback


def transport_error(exc: httpx.TransportError, what: str, platform: str, *, host: str = "") -> PlatformError:
    """The platform error for an httpx transport failure during ``what``."""
    host = host_of(exc, host) or "the platform"
    kind = type(exc).__name__
    answer = Answer(platform=platform)
    if isinstance(exc, httpx.UnsupportedProtocol):
        return Failed(f"{what}: {host} has a URL httpx cannot use ({kind}); fix the configured base URL", answer)
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError)):
        text = str(exc).lower()
        if isinstance(exc, httpx.ConnectTimeout):
            how = "the network did not let a connection through in time"
        elif any(marker in text for marker in _NOT_RESOLVED):
            how = "the network could not resolve the host name"
        elif isinstance(exc, httpx.ProxyError):
            how = "the proxy refused the connection"
        else:
            how = "the network refused the connection"
        return NetworkError(f"cannot reach {host}: {how} ({kind}) during {what}; "
                            f"{NetworkError.advice}", answer, host=host)
    if isinstance(exc, httpx.TimeoutException):
        return Transient(f"{what}: {host} did not answer in time ({kind}); {Transient.advice}", answer)
    return Transient(f"{what}: the connection to {host} broke ({kind}); {Transient.advice}", answer)
