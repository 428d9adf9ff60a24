"""The gate: what every request passes before the API sees it (an ASGI middleware).

In this order, and before a byte of the body is read:

1. The path must be the UTF-8 the client sent. uvicorn decodes percent-escapes leniently
   (``%FF`` becomes U+FFFD, so different raw ids would name one document); the gate decodes the
   raw path strictly and refuses invalid UTF-8 with 400. The query string likewise.
2. A declared Content-Length over the limit: 413.
3. The credential, from the headers alone (``Authenticator.check``): 401 with the reason.
   Public paths (``/health``, the OpenAPI description and its pages) need none.
4. Only then the body: at most ``max_body`` bytes however it is framed (a chunked body is cut
   at the limit with 413), within ``body_timeout`` seconds (else 408). A device's signature is
   verified over it. A body that is not UTF-8 is refused with 422, as is one that is not JSON,
   except on the paths a product declares for binary uploads (``Product.uploads``: an image to
   ``POST /v1/media``), whose bodies may be bytes of any kind, up to the size declared there.

The app gets the body from memory and the principal in ``scope[PRINCIPAL]``. What happens to
the unread rest of a refused body is the server's business (``hub/server.py``: it lingers a
little, then closes).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.concurrency import run_in_threadpool

from ledger import Clock, Invalid, LedgerError, TooLarge
from ledger.document import MAX_DOC_BYTES
from ledger.errors import EXIT_ERROR

from .auth import SCHEME, Authenticator, Principal
from .throttle import Failures

log = logging.getLogger(__name__)

PRINCIPAL = "skyhub.principal"
ABORT = "skyhub.abort"  # scope["extensions"][ABORT]: cut the connection now (hub/server.py sets it, change streams use it)
MAX_BODY = MAX_DOC_BYTES + 64 * 1024  # a 1 MiB document and its JSON envelope
_DIGITS = re.compile(r"[0-9]+")
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Unprocessable(Invalid):
    """The body or a parameter cannot be read as the endpoint declares it (not UTF-8, not JSON, wrong shape)."""

    code = "unprocessable"
    status = 422


class RequestTimeout(LedgerError):
    """The request's body did not arrive in time."""

    code = "timeout"
    status = 408
    exit_code = EXIT_ERROR


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _no_duplicate_keys(text: str) -> None:
    """Refuse a JSON body that gives one key twice: parsers disagree on which value wins (the
    last, here), so a body that means two things to two readers is refused, not guessed at.
    Anything else wrong with the JSON is left to the endpoint, which names it."""
    try:
        json.loads(text, object_pairs_hook=_unique)
    except _Duplicate as dup:
        raise Unprocessable(f"the body gives the key {dup.key[:60]!r} twice in one object: give each key once") from None
    except (ValueError, RecursionError):
        return


class _Gone(Exception):
    """The client went away while its body was being read: there is no one to answer."""


class Gate:
    """The gate as ASGI middleware over ``app`` (see the module docstring).

    ``public``: the paths that need no credential; ``max_body`` is in bytes, ``body_timeout`` in
    seconds; ``run`` is where the credential checks, which read the store, are called (a thread).
    """

    def __init__(
        self, app: ASGIApp, *, authenticator: Authenticator, clock: Clock, public: Collection[str],
        max_body: int, body_timeout: float, run: Callable[..., Awaitable[Any]] = run_in_threadpool,
        failures: Failures | None = None, uploads: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.failures = failures or Failures()  # a refused credential's answer waits (hub/throttle.py)
        self.authenticator = authenticator
        self.clock = clock
        self.public = frozenset(public)
        self.max_body = max_body
        self.uploads = dict(uploads or {})  # path -> the most bytes of a binary body there
        self.body_timeout = body_timeout
        self.run = run  # where the credential checks call the store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI: an HTTP request that passes the gate goes on with its body read and its principal in
        ``scope[PRINCIPAL]``; a refused one is answered here with the API's error body. Other scopes pass."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        unread = has_body(scope)  # until the gate has read it all
        try:
            path = strict_path(scope)
            strict_query(scope)
            self._check_length(scope, self.uploads.get(path, self.max_body))
            if path in self.public:  # these read no body: one sent anyway ends the connection
                await self.app({**scope, "path": path}, receive, closing(send) if unread else send)
                return
            principal, body = await self._admit(scope, path, receive)
            unread = False
        except LedgerError as exc:
            if exc.status == 401 and header(scope, b"authorization") is not None:  # a credential was tried and refused
                client = scope.get("client") or ("", 0)
                await asyncio.sleep(self.failures.failed(str(client[0])))
            await answer(send, exc, close=unread)
            return
        except _Gone:
            return
        await self.app({**scope, "path": path, PRINCIPAL: principal}, replay(body, receive), send)

    async def _admit(self, scope: Scope, path: str, receive: Receive) -> tuple[Principal, bytes]:
        authorization = header(scope, b"authorization")
        method = scope["method"]
        target = scope.get("raw_path", path.encode()).decode("latin-1")
        query = scope.get("query_string", b"").decode("latin-1")
        if query:
            target += "?" + query
        first = await self.run(self.authenticator.check, authorization, method, target, self.clock.now_ms())
        binary = path in self.uploads
        body = await self._read(receive, self.uploads[path] if binary else self.max_body)
        principal = first if isinstance(first, Principal) else await self.run(self.authenticator.verify, first, body)
        if body and not binary:
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise Unprocessable(f"the body is not valid UTF-8 (byte {exc.start}): send JSON encoded as UTF-8") from None
            if text.lstrip()[:1] in ("{", "["):
                _no_duplicate_keys(text)
        return principal, body

    def _check_length(self, scope: Scope, limit: int) -> None:
        length = header(scope, b"content-length")
        if length is None:
            return
        if not _DIGITS.fullmatch(length):
            raise Invalid("Content-Length is not a number of bytes")
        if len(length) > 15 or int(length) > limit:
            raise TooLarge(f"the request body is {length[:20]} bytes; the limit is {limit:,} bytes{self._why(limit)}")

    def _why(self, limit: int) -> str:
        return " (documents are at most 1 MiB)" if limit == self.max_body else ""

    async def _read(self, receive: Receive, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Gone
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise TooLarge(f"the request body is over {limit:,} bytes{self._why(limit)}")
                    if chunk:
                        chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise RequestTimeout(f"the request body did not arrive within {self.body_timeout:g} s") from None


def strict_path(scope: Scope) -> str:
    """The path, percent-decoded from the raw path as UTF-8, refusing anything else."""
    raw = scope.get("raw_path")
    if raw is None:
        return str(scope["path"])
    try:
        return unquote_to_bytes(raw.decode("ascii")).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid(f"the path is not valid UTF-8 after percent-decoding (byte {exc.start}): encode ids as UTF-8") from None


def strict_query(scope: Scope) -> None:
    """Refuse a query string that is not UTF-8 after percent-decoding (Invalid)."""
    query = scope.get("query_string", b"")
    if query:
        try:
            unquote_to_bytes(query.decode("ascii")).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Invalid(f"the query string is not valid UTF-8 after percent-decoding (byte {exc.start})") from None


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header ``name`` (lowercase bytes, as ASGI gives names), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the body already read, then the connection's own
    messages (a disconnect, for a stream that waits on one)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def has_body(scope: Scope) -> bool:
    """Whether the request says a body follows (chunked, or a Content-Length over 0)."""
    for key, value in scope["headers"]:
        if key == b"transfer-encoding" or (key == b"content-length" and value.strip(b"0 ")):
            return True
    return False


def closing(send: Send) -> Send:
    """``send``, with ``Connection: close`` on the response (the server lingers, then closes)."""

    async def send_closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
        await send(message)

    return send_closing


async def answer(send: Send, exc: LedgerError, *, close: bool = False) -> None:
    """The API's error body for a request the gate refuses; ``close`` when its body was not
    read: the connection cannot carry another request (see hub/server.py, lingering close)."""
    body = json.dumps({"error": exc.code, "reason": exc.reason}, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if exc.status == 401:
        headers.append((b"www-authenticate", f'Bearer realm="skyhub", {SCHEME}'.encode()))
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
