"""The change stream's fan-out: one reader for every open ``/v1/changes/stream``.

Each stream used to re-read the change log on every commit and every idle second, in the
request thread pool; with 200 streams open, a writer's rate fell to 3 % of what it was with
none (issue 9). Now:

- **One reader.** A task on the server's event loop reads each new change once (woken by the
  store's commit listener; the reads run in a thread of their own, never behind the request
  pool), renders it as a server-sent event once, keeps the latest ``buffer`` of them, and
  appends each batch to the queue of every open stream.
- **Idle streams cost nothing.** A stream waits on its queue. One shared timer sends a
  keep-alive comment to the streams that were quiet since its last round.
- **Slow clients are dropped, not waited for.** A stream whose queue holds more than
  ``queue_size`` changes its client has not taken, or whose client has not taken a write for
  ``write_timeout``, is dropped: it gets ``event: error`` with the reason if its connection
  can still carry it, and its connection is closed (at once, if the client is not reading).
  The client resumes with ``Last-Event-ID``.
- **Resuming without gaps or duplicates.** A client resuming from a sequence number older than
  the buffer reads the gap from the store first (pages of at most 64 KB, each written before
  the next is read, in threads of their own: at its own pace, and never ahead of the API's
  requests), then joins the live batches from where it got to; a stream skips what it has
  already sent.

The reader runs while at least one stream is open, and starts again from the head when the
next one opens.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import Response

from ledger import Change, LedgerError

from .gate import ABORT
from .worker import Worker

log = logging.getLogger(__name__)

Rendered = tuple[int, bytes]  # (seq, the event as sent; b"" for a change streams do not show)
Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]

HELLO = b": stream of skyhub changes\n\n"
KEEPALIVE = b": keep-alive\n\n"
PAGE = 500  # changes per read, live or catching up
BUFFER = 500  # recent changes kept for clients that reconnect
# Under a steady stream of writes, the reader waits a little between reads so that one read,
# and one socket write per stream, carry many changes. Handing a batch to a stream costs the
# event loop about 40 us (a task wake-up, h11's chunk framing, a send()). Measured with
# benchmarks/streams.py (one writer, 200 streams, SQLite): a batch every 50 ms added 0.3 ms of
# hub CPU to every write (1.2 -> 1.5 ms); with the pause at 1 ms per stream (200 streams:
# 200 ms) it adds about 0.15 ms (1.26 -> 1.42), and the writer keeps 90-100 % of its rate.
# Growing with the streams, the pause keeps fan-out to a few per cent of the loop however many
# are open. Its floor keeps the reads themselves few: on PostgreSQL a read every 10 ms (10
# streams) cost the hub 0.4 ms per write (1.9 -> 2.3 ms), one every 250 ms 0.15 ms. A change
# waits at most MAX_PAUSE for its batch under load (none, after a quiet spell).
MIN_PAUSE = 0.05
PAUSE_PER_STREAM = 0.001
MAX_PAUSE = 0.25
SAFETY_READ = 10.0  # a read even without a wake-up, in case one was lost
# A stream catching up from an old seq holds one page at a time: each page is written before the
# next is read, and a client that does not read blocks the write (the connection's buffer is
# full), so an unread stream costs a page and a socket buffer, never the log. Measured with
# benchmarks/streams.py (200 unread streams from since=0 over a log of 20,000 1 KB documents,
# SQLite): pages of 500 changes read in the API's pool added 366 MiB (70 -> 436) and /health took
# 208 ms at the median; pages of at most 64 KB in two threads of their own add 16 MiB, 37 ms.
CATCHUP_BYTES = 64 * 1024
CATCHUP_PAGE = 200  # changes read from the store per page (then cut at CATCHUP_BYTES)
CATCHUP_THREADS = 2
TICK = 1.0  # how often the reader looks at the clock when nothing happens
FAREWELL_S = 1.0  # how long a dropped stream's last words may take before the connection is cut


def event(change: dict[str, Any], seq: int) -> bytes:
    """One change as a server-sent event."""
    try:
        data = json.dumps(change, ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped, the text is still valid JSON
        data = json.dumps(change).encode()
    return b"id: %d\nevent: change\ndata: %s\n\n" % (seq, data)


def error_event(code: str, reason: str) -> bytes:
    """The server-sent event that tells a client why its stream ends: ``event: error``, ``{"error", "reason"}``."""
    return b"event: error\ndata: %s\n\n" % json.dumps({"error": code, "reason": reason}).encode()


class Subscriber:
    """One open stream: what it has been handed, what waits for it, and why it was dropped."""

    __slots__ = ("pos", "chunks", "count", "ready", "reason", "gone", "writing_since", "quiet", "abort", "farewell")

    def __init__(self, pos: int, abort: Callable[[], None] | None) -> None:
        self.pos = pos  # the last seq handed to this stream (queued or written)
        self.chunks: list[bytes] = []
        self.count = 0  # changes waiting in chunks
        self.ready = asyncio.Event()
        self.reason: tuple[str, str] | None = None  # (code, sentence) when the fan-out drops the stream
        self.gone = False  # the client disconnected
        self.writing_since: float | None = None
        self.quiet = True
        self.abort = abort
        self.farewell: bytes | None = None  # the last words when the caller ends the stream (``serve(until=)``)

    def take(self) -> bytes:
        """Everything waiting for the stream, as one write; the queue is left empty."""
        data = b"".join(self.chunks)
        self.chunks.clear()
        self.count = 0
        return data


class Fanout:
    """Reads the change log once for every open stream. Lives on the server's event loop.

    ``render`` makes a change's event (b"" for a change streams do not show); ``queue_size`` and
    ``buffer`` count changes, ``keepalive`` and ``write_timeout`` are seconds (see the module
    docstring); ``stopping`` says when the hub is stopping.
    """

    def __init__(
        self, store: Any, render: Callable[[Change], bytes], *, queue_size: int = 1000, buffer: int = BUFFER, keepalive: float = 15.0,
        write_timeout: float | None = None, pause_per_stream: float = PAUSE_PER_STREAM, stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.render = render
        self.queue_size = max(1, queue_size)
        self.buffer = buffer
        self.page = max(1, min(PAGE, self.queue_size // 2))
        self.keepalive = keepalive
        self.write_timeout = write_timeout if write_timeout is not None else max(30.0, 2 * keepalive)
        self.pause_per_stream = pause_per_stream
        self.stopping = stopping
        self.dropped = 0
        self._clients: set[Subscriber] = set()  # every open stream, catching up or live
        self._live: set[Subscriber] = set()  # those that get the live batches
        self._buffer: deque[Rendered] = deque()
        self._lo = self._hi = 0  # the buffer holds every change in (lo, hi]
        self._reader: asyncio.Task[None] | None = None
        self._start_lock: asyncio.Lock | None = None
        self._worker = Worker("stream-reader")
        # streams catching up read the store here, never in the API's pool: 200 streams opened at
        # since=0 used to queue 200 reads before every request (/health took 2 s)
        self._catchup = Worker("stream-catchup", CATCHUP_THREADS)

    def stats(self) -> dict[str, Any]:
        """Open streams, those on the live batches, streams dropped so far and the last seq read (for ``/health``)."""
        return {"open": len(self._clients), "live": len(self._live), "dropped": self.dropped, "seq": self._hi}

    # ---- one stream ------------------------------------------------------------------------
    async def serve(self, since: int, receive: Receive, send: Send, abort: Callable[[], None] | None = None, *,
                    until: asyncio.Event | None = None, farewell: bytes = b"") -> None:
        """Write the stream's events after ``since`` until the client goes or is dropped, or
        ``until`` is set (then ``farewell`` is the last thing written: the console ends a
        signed-out page's stream so). The response has started; this writes its body, and ends it."""
        loop = asyncio.get_running_loop()
        sub = Subscriber(since, abort)
        self._clients.add(sub)
        watcher = loop.create_task(self._watch(receive, sub))
        ender = loop.create_task(self._until(until, sub, farewell)) if until is not None else None
        try:
            try:
                await self._write(sub, send, HELLO)
                await self._start()
                while sub.pos < self._lo and not (sub.gone or sub.reason):  # older than the buffer: from the store
                    last, data = await self._catchup.run(self._read_page, sub.pos)
                    if last is None:
                        break
                    sub.pos = last
                    if data:  # one page held per stream: the next is read once the client has taken this one
                        await self._write(sub, send, data)
                    del data
                if not (sub.gone or sub.reason):
                    self._join(sub)
                while not sub.gone:
                    await sub.ready.wait()
                    sub.ready.clear()
                    data = sub.take()
                    if data and not sub.gone:
                        await self._write(sub, send, data)
                    if sub.reason:
                        break
            except LedgerError as exc:  # the store failed under this stream: the client is told, and resumes later
                sub.reason = sub.reason or (exc.code, exc.reason)
            if not sub.gone:
                await self._end(sub, send)
        finally:
            watcher.cancel()
            if ender is not None:
                ender.cancel()
            self._leave(sub)

    @staticmethod
    async def _until(until: asyncio.Event, sub: Subscriber, farewell: bytes) -> None:
        await until.wait()
        sub.farewell = farewell
        sub.reason = sub.reason or ("ended", "")
        sub.ready.set()

    async def _watch(self, receive: Receive, sub: Subscriber) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                sub.gone = True
                sub.ready.set()
                return

    async def _write(self, sub: Subscriber, send: Send, data: bytes) -> None:
        sub.writing_since = asyncio.get_running_loop().time()
        sub.quiet = False
        try:
            await send({"type": "http.response.body", "body": data, "more_body": True})
        finally:
            sub.writing_since = None

    async def _end(self, sub: Subscriber, send: Send) -> None:
        """The reason (if dropped) and the end of the response, unless the client cannot take them."""
        last = sub.farewell if sub.farewell is not None else error_event(*sub.reason) if sub.reason else b""
        try:
            async with asyncio.timeout(FAREWELL_S):
                await send({"type": "http.response.body", "body": last, "more_body": False})
        except TimeoutError:
            if sub.abort is not None:
                sub.abort()

    def _join(self, sub: Subscriber) -> None:
        backlog = [text for seq, text in self._buffer if seq > sub.pos and text]
        if backlog:
            sub.chunks.append(b"".join(backlog))
            sub.count += len(backlog)
            sub.ready.set()
        sub.pos = max(sub.pos, self._hi)
        self._live.add(sub)

    def _leave(self, sub: Subscriber) -> None:
        self._clients.discard(sub)
        self._live.discard(sub)
        if not self._clients and self._reader is not None:
            self._reader.cancel()  # nobody listens: the next stream starts the reader at the head again
            self._reader = None

    def _drop(self, sub: Subscriber, code: str, reason: str) -> None:
        if sub.reason is not None:
            return
        self._live.discard(sub)
        self.dropped += 1
        sub.reason = (code, reason)
        sub.ready.set()
        if code == "too_slow":
            log.info("change stream dropped: %s", reason)
        if sub.writing_since is not None and sub.abort is not None:
            sub.abort()  # it is not taking what it has: it cannot take the reason either

    # ---- the reader ------------------------------------------------------------------------
    async def _start(self) -> None:
        if self._reader is not None:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._reader is not None:
                return
            loop = asyncio.get_running_loop()
            head = await self._worker.run(self.store.head_seq)
            self._buffer.clear()
            self._lo = self._hi = head
            wake = asyncio.Event()

            def on_commit(_change: Change | None) -> None:  # in the writing thread
                if not wake.is_set():
                    try:
                        loop.call_soon_threadsafe(wake.set)
                    except RuntimeError:  # the server's loop has closed
                        pass

            unsubscribe = self.store.subscribe(on_commit)
            self._reader = loop.create_task(self._run(wake, unsubscribe))

    async def _run(self, wake: asyncio.Event, unsubscribe: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        last_read = last_tick = loop.time()
        try:
            while self._clients:
                if self.stopping():
                    for sub in list(self._clients):
                        self._drop(sub, "unavailable", "the hub is stopping: reconnect to resume")
                    return
                try:
                    async with asyncio.timeout(TICK):
                        await wake.wait()
                except TimeoutError:
                    pass
                now = loop.time()
                if wake.is_set() or now - last_read >= SAFETY_READ:
                    wake.clear()
                    read = await self._read_new(check_head=now - last_read >= SAFETY_READ)
                    last_read = loop.time()
                    if read and self._live:
                        await asyncio.sleep(min(MAX_PAUSE, max(MIN_PAUSE, self.pause_per_stream * len(self._live))))
                if now - last_tick >= min(self.keepalive, self.write_timeout / 2):
                    self._tick(now)
                    last_tick = now
        finally:
            unsubscribe()
            if self._reader is asyncio.current_task():
                self._reader = None

    async def _read_new(self, check_head: bool = False) -> int:
        total = 0
        try:
            while True:
                batch = await self._worker.run(self._read, self._hi, self.page)
                if batch:
                    self._publish(batch)
                    total += len(batch)
                if len(batch) < self.page:
                    break
            if check_head and not total:
                head = await self._worker.run(self.store.head_seq)
                if head < self._hi:  # the log was reset (a restored backup, a test emptying it)
                    log.warning("change log is behind the stream reader (%d < %d): starting again at its head", head, self._hi)
                    self._buffer.clear()
                    self._lo = self._hi = head
        except LedgerError as exc:
            log.warning("change stream reader: %s", exc.reason)
            await asyncio.sleep(TICK)
        return total

    def _read(self, after: int, limit: int) -> list[Rendered]:
        return [(c.seq, self.render(c)) for c in self.store.changes(after, limit)]

    def _read_page(self, after: int) -> tuple[int | None, bytes]:
        """A catching-up stream's next page: the changes after ``after``, rendered, up to
        ``CATCHUP_BYTES`` (at least one); (the last seq read, or None at the end; the bytes)."""
        out: list[bytes] = []
        size = 0
        last: int | None = None
        for change in self.store.changes(after, min(CATCHUP_PAGE, self.page)):
            text = self.render(change)
            last = change.seq
            out.append(text)
            size += len(text)
            if size >= CATCHUP_BYTES:
                break
        return last, b"".join(out)

    def _publish(self, batch: list[Rendered]) -> None:
        first, last = batch[0][0], batch[-1][0]
        self._buffer.extend(batch)
        while len(self._buffer) > self.buffer:
            self._lo = self._buffer.popleft()[0]
        self._hi = last
        whole = b"".join(text for _, text in batch)
        shown = sum(1 for _, text in batch if text)
        for sub in list(self._live):
            if sub.pos >= last:
                continue
            if sub.pos < first:
                data, n = whole, shown
            else:
                part = [text for seq, text in batch if seq > sub.pos and text]
                data, n = b"".join(part), len(part)
            sub.pos = last
            if not n:
                continue
            if sub.count + n > self.queue_size:
                self._drop(sub, "too_slow", f"this stream fell {sub.count + n} changes behind: reconnect with Last-Event-ID to resume")
                continue
            sub.chunks.append(data)
            sub.count += n
            sub.ready.set()

    def _tick(self, now: float) -> None:
        for sub in list(self._clients):
            if sub.writing_since is not None and now - sub.writing_since > self.write_timeout:
                self._drop(sub, "too_slow", f"the client took nothing for {self.write_timeout:g} s")
            elif sub.quiet and not sub.chunks and sub in self._live:
                sub.chunks.append(KEEPALIVE)
                sub.ready.set()
            sub.quiet = True


class EventStream(Response):
    """The response of ``/v1/changes/stream``: the fan-out's events for one client."""

    media_type = "text/event-stream"

    def __init__(self, fanout: Fanout, since: int) -> None:
        self.fanout = fanout
        self.since = since
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:  # type: ignore[override]
        """ASGI: start the response, then let the fan-out write its body until the stream ends."""
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await self.fanout.serve(self.since, receive, send, (scope.get("extensions") or {}).get(ABORT))
