"""The HTTP server under the API: uvicorn (h11) with limits a careless or hostile client cannot outlast.

uvicorn bounds the size of a request's headers (``h11_max_incomplete_event_size``), idle
keep-alive connections (``timeout_keep_alive``) and open connections (``limit_concurrency``),
but not the time a client may take to send its headers, nor what happens to a body the API
answered without reading (a 401 to a 500 MiB upload: uvicorn reads and discards it, for as long
as the client sends). The protocol here adds:

- a **header timeout**: from the moment a connection opens, or the next request's first bytes
  arrive, to the end of that request's headers. A connection that sends nothing, or dribbles
  its headers, is closed. (Between requests, uvicorn's keep-alive timeout closes idle ones.)
- a **lingering close**: an answer that did not wait for the whole body (401, 413, 408) says
  ``Connection: close`` (the gate adds it). The server then ends its side of the connection
  and reads and throws away at most ``linger_bytes`` more of the body, for at most ``linger``
  seconds, before it closes. The client reads the answer (closing at once, with its body
  unread, would make TCP reset the connection and could drop the answer on the way), and
  cannot keep the server reading. A body the app left unread without saying close is thrown
  away within the same limits.
- an **abort** for the app: each request's scope carries ``scope["extensions"]["skyhub.abort"]``,
  which drops the connection at once. The change stream uses it for a client that stopped
  reading: a graceful close would wait forever for the unsent buffer to drain.

The body timeout belongs to the gate (``hub/gate.py``): only the app knows whether it reads a
body, and it answers 408 when the body does not come. The threads that run the endpoints are
the API's (``hub/worker.py``, ``http.threads`` of them).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ledger import Invalid, Usage

from .auth import canonical_hub
from .gate import ABORT, MAX_BODY

if TYPE_CHECKING:
    from .app import App
    from .settings import HttpSettings, Settings

log = logging.getLogger(__name__)

HEADER_BYTES = 16 * 1024  # request line + headers; uvicorn's default, stated
LINGER_S = 2.0


class _Transport:
    """The connection's transport as uvicorn sees it: a ``close()`` while the client is still
    sending its body becomes a lingering close (see ``GuardedH11Protocol._close``)."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def close(self) -> None:
        self._protocol._close()

    def is_closing(self) -> bool:
        return self._protocol._lingering or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout, lingering closes and an abort hook."""

    header_timeout = 10.0
    linger = LINGER_S
    linger_bytes = 1024 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raw: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._mode: str | None = None
        self._lingering = False
        self._discarded = 0
        inner = self.app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                scope["extensions"] = {**(scope.get("extensions") or {}), ABORT: self._abort}
            await inner(scope, receive, send)

        self.app = app

    # ---- timers ----------------------------------------------------------------------------
    def _arm(self, mode: str, delay: float) -> None:
        self._disarm()
        self._mode = mode
        self._timer = self.loop.call_later(delay, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._mode = None

    def _expire(self) -> None:
        self._timer = None
        assert self._raw is not None
        self._raw.close()

    def _abort(self) -> None:
        self._disarm()
        assert self._raw is not None
        self._raw.abort()  # even when closing: close() may be waiting on a buffer the client never reads

    def _close(self) -> None:
        """Close; but if the client is still sending a body we did not want (an early 401, 413
        or 408 said ``Connection: close``), end our side first and read and throw away the rest
        for a while, so that closing with unread data (which makes TCP reset the connection and
        drop whatever of the answer is still unsent) comes only after the answer is long gone."""
        assert self._raw is not None
        if self._lingering or self.conn.their_state is not h11.SEND_BODY or self._raw.is_closing():
            self._disarm()
            self._raw.close()
            return
        self._lingering = True
        self._discarded = 0
        if self._raw.can_write_eof():
            self._raw.write_eof()
        self._raw.resume_reading()
        self._arm("linger", self.linger)

    # ---- the protocol's events -------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Keep the raw transport, give uvicorn one whose close may linger, and start the header timeout."""
        self._raw = transport
        super().connection_made(_Transport(transport, self))  # type: ignore[arg-type]
        self._arm("headers", self.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the timers, then uvicorn's own handling."""
        self._disarm()
        self._lingering = False
        super().connection_lost(exc)

    def eof_received(self) -> bool | None:  # type: ignore[override]
        """While lingering, the client's end of its body ends the linger: close now. Otherwise nothing, as in uvicorn."""
        if self._lingering:
            self._close()
        return None

    def data_received(self, data: bytes) -> None:
        """While lingering, throw the bytes away (closing after ``linger_bytes``). Otherwise uvicorn's handling,
        then the timers: the header timeout until a request's headers are in, a discard window for a body
        left unread after its answer."""
        if self._lingering:
            self._discarded += len(data)
            if self._discarded > self.linger_bytes:
                self._close()
            return
        super().data_received(data)
        if self.transport.is_closing():
            self._disarm()
            return
        theirs, ours = self.conn.their_state, self.conn.our_state
        if theirs is h11.IDLE:  # between requests, or part way through a request's headers
            if self._mode != "headers":
                self._arm("headers", self.header_timeout)
        elif theirs is h11.SEND_BODY and ours is h11.DONE:  # answered, keeping the connection: the rest is unwanted
            if self._mode != "discard":
                self._discarded = 0
                self._arm("discard", self.linger)
            self._discarded += len(data)
            if self._discarded > self.linger_bytes:
                self._close()
        elif self._mode is not None:  # the headers are in: the app (and the gate's body timeout) take over
            self._disarm()

    def on_response_complete(self) -> None:
        """uvicorn's bookkeeping; then, if the client is still sending a body the app did not read, throw it
        away within ``linger`` seconds and ``linger_bytes``."""
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.SEND_BODY:
            self._discarded = 0
            self._arm("discard", self.linger)


def protocol_for(http: HttpSettings, max_body: int) -> type[GuardedH11Protocol]:
    """The protocol class with these limits (uvicorn makes one instance per connection)."""
    return type(
        "HubH11Protocol", (GuardedH11Protocol,),
        {"header_timeout": http.header_timeout, "linger_bytes": max_body, "linger": min(LINGER_S, http.body_timeout)},
    )


class HubServer(uvicorn.Server):
    """uvicorn's server, telling ``on_bound`` its URL once it is bound (``--port 0`` picks one)."""

    def __init__(self, config: uvicorn.Config, on_bound: Callable[[str], None]) -> None:
        super().__init__(config)
        self.on_bound = on_bound

    async def startup(self, sockets: Any = None) -> None:
        """Start uvicorn's server, then tell ``on_bound`` the URL it is bound to."""
        await super().startup(sockets)
        if self.started and getattr(self, "servers", None):
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self.on_bound(url_for(host, port))


def url_for(host: str, port: int) -> str:
    """``http://HOST:PORT``, an IPv6 host in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def make_server(api: Any, host: str, port: int, settings: Settings) -> uvicorn.Server:
    """The uvicorn server for the API, with every limit set (none left to a default).

    Device signatures are verified against ``settings.public_url``, or, unset, the URL the
    server is bound to (``http://HOST:PORT``).
    """
    http = settings.http
    if settings.public_url:
        try:
            canonical_hub(settings.public_url)
        except Invalid:  # a public URL that is not one stops the hub here, with the reason
            raise Invalid(
                f"public_url (SKYHUB_PUBLIC_URL) {settings.public_url[:100]!r} is not a URL: use http(s)://HOST[:PORT][/PATH], "
                "the URL devices use to reach this hub"
            ) from None

    def bound(url: str) -> None:
        if not settings.public_url:
            api.state.public_url = url
            if host not in ("127.0.0.1", "localhost", "::1"):
                log.warning("device signatures are checked for %s: set SKYHUB_PUBLIC_URL to the URL devices use", url)

    api.state.public_url = settings.public_url or url_for(host, port)
    config = uvicorn.Config(
        api, host=host, port=port, log_level="warning", access_log=False, lifespan="off",
        http=protocol_for(http, MAX_BODY), ws="none",
        timeout_keep_alive=max(1, round(http.keep_alive)),
        timeout_graceful_shutdown=5,
        h11_max_incomplete_event_size=HEADER_BYTES,
        limit_concurrency=http.max_connections,
        backlog=2048,
        # X-Forwarded-For/-Proto only from proxies the operator names (uvicorn's default trusts 127.0.0.1, so a
        # proxy on this machine would let every client choose the address the hub sees)
        proxy_headers=bool(http.trusted_proxies),
        forwarded_allow_ips=list(http.trusted_proxies) or [],
    )
    return HubServer(config, bound)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port``, or ``Usage`` with one sentence naming what is wrong
    (not an address of this machine, the port taken, no permission for a low port)."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else "not a valid name"
        raise Usage(f"cannot serve on {host!r}: it is not an address or a name of this machine ({reason}); use --host with "
                    "127.0.0.1 (this machine only), 0.0.0.0 (every interface) or one of its addresses") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        where = f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise Usage(f"port {port} on {host} is taken by another process: stop it, or choose another port with --port "
                        "(0 picks a free one)") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise Usage(f"cannot serve on {host!r}: it is not an address of this machine; use --host 127.0.0.1, 0.0.0.0 "
                        "or one of its addresses") from None
        if exc.errno == errno.EACCES:
            raise Usage(f"cannot serve on {where}: ports below 1024 need privileges; choose a port above 1023 with --port") from None
        raise Usage(f"cannot serve on {where}: {exc.strerror}") from None
    return sock


def serve(app: App, api: Any, host: str, port: int, on_ready: Callable[[str], None] | None = None,
          sock: socket.socket | None = None) -> None:
    """Serve the API until SIGTERM/SIGINT, with the feed, sweep and scheduler running.

    The server runs in a thread and the main thread owns the signals, so a stop always goes
    through ``App.stop()``: the API finishes its requests, in-flight handlers finish or are
    left to their leases, and the store closes. (uvicorn in the main thread would re-raise the
    signal and end the process before that.)
    """
    import signal
    import threading

    from ledger import LedgerError

    sock = sock or listen(host, port)  # before anything starts: a bad address or a taken port is one line, and nothing ran
    server = make_server(api, host, port, app.settings)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    app.start()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="api", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise LedgerError(f"the API could not start on {host}:{port} (is the port taken?)")
            if stop.wait(0.05):
                break
        if server.started and on_ready:
            bound = server.servers[0].sockets[0].getsockname()
            on_ready(url_for(str(bound[0]), int(bound[1])))
        while not stop.wait(0.5) and thread.is_alive():
            pass
    finally:
        app.stopping.set()
        server.should_exit = True
        thread.join(10)
        app.stop()
