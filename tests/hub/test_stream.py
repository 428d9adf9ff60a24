"""The change stream's fan-out (hub/stream.py) on a real SQLite store, with the streams' clients
played in the test's event loop: one reader for all streams, catch-up without gaps or
duplicates, slow clients dropped, idle streams that cost no reads, a clean stop."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from hub.api.changes import Shown
from hub.stream import Fanout
from ledger import SYSTEM, Rules, open_store
from tests.conftest import reset_database

render = Shown({}).render  # what the API shows of a change

ACTOR = "user:test"


class CountingStore:
    """The store, counting the change-log reads made by each thread."""

    def __init__(self, store):
        self._store = store
        self.reads: dict[str, int] = {}
        self._lock = threading.Lock()

    def changes(self, since=0, limit=100, dbs=None):
        name = threading.current_thread().name.split("_")[0]
        with self._lock:
            self.reads[name] = self.reads.get(name, 0) + 1
        return self._store.changes(since, limit, dbs)

    def __getattr__(self, name):
        return getattr(self._store, name)


@pytest.fixture
def store(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/stream.db", Rules(), SYSTEM)
    yield CountingStore(store)
    store.close()


class Client:
    """One stream's client: collects what the stream writes. ``takes=N`` takes N writes and
    then no more (like a client whose socket buffer is full), until it is aborted."""

    def __init__(self, takes: int | None = None) -> None:
        self.body = bytearray()
        self.ended = False
        self.aborted = False
        self.takes = takes
        self.gone = asyncio.Event()
        self.unblocked = asyncio.Event()

    async def send(self, message):
        if self.takes is not None:
            if self.takes <= 0:
                await self.unblocked.wait()
            self.takes -= 1
        if self.aborted:
            return  # as uvicorn: nothing more reaches a connection that is gone
        self.body += message.get("body", b"")
        if not message.get("more_body", False):
            self.ended = True

    async def receive(self):
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def abort(self):
        self.aborted = True
        self.gone.set()
        self.unblocked.set()

    def leave(self):
        self.gone.set()

    def events(self):
        out = []
        for block in bytes(self.body).decode().split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":"))
            if fields:
                out.append((fields.get("event"), json.loads(fields["data"])))
        return out

    def ids(self):
        return [data["id"] for name, data in self.events() if name == "change"]

    def seqs(self):
        return [data["seq"] for name, data in self.events() if name == "change"]


def open_stream(fanout, since, client):
    return asyncio.get_running_loop().create_task(fanout.serve(since, client.receive, client.send, client.abort))


async def until(condition, what, timeout=20.0):
    """Wait for ``condition`` (a guard against hanging, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def write(store, n, prefix="d", db="notes"):
    return [store.put(db, {"i": i}, f"{prefix}{i:03d}", actor=ACTOR)["_id"] for i in range(n)]


def test_every_stream_gets_every_change_once_and_in_order_from_one_reader(store):
    async def scenario():
        fanout = Fanout(store, render)
        clients = [Client() for _ in range(20)]
        tasks = [open_stream(fanout, store.head_seq(), c) for c in clients]
        await until(lambda: fanout.stats()["live"] == 20, "the streams to join")
        expected = []
        for burst in range(5):
            expected += write(store, 10, prefix=f"b{burst}-")
            await asyncio.sleep(0.05)
        await until(lambda: all(len(c.ids()) == 50 for c in clients), "every change on every stream")
        for c in clients:
            assert c.ids() == expected
            c.leave()
        await asyncio.gather(*tasks)
        return fanout

    fanout = asyncio.run(scenario())
    # one reader for all: its reads follow the commits, not the number of streams
    assert store.reads.get("stream-reader", 0) <= 50 + 2
    assert set(store.reads) <= {"stream-reader"}, store.reads  # nobody caught up from the store
    assert fanout.stats() == {"open": 0, "live": 0, "dropped": 0, "seq": 50}


@pytest.mark.parametrize("since", [0, 3, 29, 30, 32])
def test_a_resuming_stream_gets_every_change_after_its_id_once_from_the_store_or_the_buffer(store, since):
    async def scenario():
        fanout = Fanout(store, render, queue_size=8, buffer=5)  # catch-up pages of 4; the buffer keeps 5
        written = write(store, 30, prefix="early")
        keeper = Client()  # keeps the reader going: it starts at seq 30, so the buffer holds 31 and on
        keeping = open_stream(fanout, store.head_seq(), keeper)
        await until(lambda: fanout.stats()["live"] == 1, "the first stream")
        written += write(store, 3, prefix="late-a")
        await until(lambda: len(keeper.ids()) == 3, "the first stream's changes")
        resumer = Client()
        resuming = open_stream(fanout, since, resumer)
        for part in "bcdef":  # writes keep coming while it catches up
            written += write(store, 3, prefix=f"late-{part}")
            await asyncio.sleep(0)
        await until(lambda: len(resumer.ids()) == len(written) - since, "the resumed stream")
        await until(lambda: len(keeper.ids()) == len(written) - 30, "the live stream")
        for c in (keeper, resumer):
            c.leave()
        await asyncio.gather(keeping, resuming)
        return written, resumer, keeper

    written, resumer, keeper = asyncio.run(scenario())
    assert resumer.ids() == written[since:]
    assert resumer.seqs() == list(range(since + 1, len(written) + 1))
    assert keeper.ids() == written[30:]
    caught_up = sum(n for name, n in store.reads.items() if name.startswith("stream-catchup"))  # its own threads, not the API's
    assert (caught_up > 0) == (since < 30), store.reads  # from the store only what the buffer lacks


def test_a_stream_from_the_future_gets_only_what_comes_after_it(store):
    async def scenario():
        fanout = Fanout(store, render)
        write(store, 3, prefix="old")
        client = Client()
        task = open_stream(fanout, 5, client)
        await until(lambda: fanout.stats()["live"] == 1, "the stream")
        write(store, 4, prefix="new")
        await until(lambda: len(client.seqs()) == 2, "seq 6 and 7")
        client.leave()
        await task
        return client

    assert asyncio.run(scenario()).seqs() == [6, 7]


def test_a_client_that_stops_reading_is_dropped_and_the_others_are_not_held_back(store):
    async def scenario():
        fanout = Fanout(store, render, queue_size=20)
        stuck, reader = Client(takes=1), Client()  # the stuck one takes its hello, then nothing
        tasks = [open_stream(fanout, store.head_seq(), c) for c in (stuck, reader)]
        await until(lambda: fanout.stats()["live"] == 2, "both streams")
        written = []
        for burst in range(10):
            written += write(store, 5, prefix=f"w{burst}-")
            await asyncio.sleep(0.02)
        await until(lambda: len(reader.ids()) == 50, "the reading stream")
        await until(lambda: stuck.aborted, "the stuck stream to be cut off")
        reader.leave()
        await asyncio.gather(*tasks)
        return fanout, stuck, reader, written

    fanout, stuck, reader, written = asyncio.run(scenario())
    assert reader.ids() == written
    assert fanout.stats()["dropped"] == 1 and stuck.ids() == []


def test_a_client_that_takes_nothing_at_all_is_cut_off_after_the_write_timeout(store):
    async def scenario():
        fanout = Fanout(store, render, keepalive=0.1, write_timeout=0.2)
        stuck, reader = Client(takes=0), Client()
        tasks = [open_stream(fanout, store.head_seq(), c) for c in (stuck, reader)]
        await until(lambda: stuck.aborted, "the stuck stream to be cut off")
        assert not reader.aborted
        reader.leave()
        await asyncio.gather(*tasks)
        return fanout

    assert asyncio.run(scenario()).stats()["dropped"] == 1


def test_a_slow_client_that_still_reads_is_told_why_it_was_dropped(store):
    async def scenario():
        fanout = Fanout(store, render, queue_size=4)
        slow = Client()
        task = open_stream(fanout, store.head_seq(), slow)
        await until(lambda: fanout.stats()["live"] == 1, "the stream")
        sub = next(iter(fanout._live))
        # the stream's task has not run since: the changes pile up in its queue
        fanout._publish([(seq, render_change(store, seq)) for seq in write_seqs(store, 3)])
        fanout._publish([(seq, render_change(store, seq)) for seq in write_seqs(store, 3)])
        assert sub.reason is not None
        await task
        return slow

    slow = asyncio.run(scenario())
    assert slow.ended and not slow.aborted
    name, data = slow.events()[-1]
    assert name == "error" and data["error"] == "too_slow" and "Last-Event-ID" in data["reason"]


def write_seqs(store, n):
    head = store.head_seq()
    write(store, n, prefix=f"s{head}-")
    return list(range(head + 1, head + n + 1))


def render_change(store, seq):
    (change,) = store._store.changes(seq - 1, 1)
    return render(change)


def test_idle_streams_cost_no_reads_and_get_keep_alive_comments(store):
    async def scenario():
        fanout = Fanout(store, render, keepalive=0.1)
        clients = [Client() for _ in range(10)]
        tasks = [open_stream(fanout, store.head_seq(), c) for c in clients]
        await until(lambda: all(b": keep-alive" in c.body for c in clients), "a keep-alive on every stream")
        reads = dict(store.reads)
        for c in clients:
            c.leave()
        await asyncio.gather(*tasks)
        return reads

    assert asyncio.run(scenario()) == {}  # no stream and no reader read the change log while nothing happened


def test_a_stopping_hub_ends_every_stream_with_a_reason(store):
    async def scenario():
        stopping = threading.Event()
        fanout = Fanout(store, render, stopping=stopping.is_set)
        clients = [Client() for _ in range(3)]
        tasks = [open_stream(fanout, store.head_seq(), c) for c in clients]
        await until(lambda: fanout.stats()["live"] == 3, "the streams")
        stopping.set()
        await asyncio.gather(*tasks)
        return clients

    for client in asyncio.run(scenario()):
        assert client.ended and client.events()[-1] == ("error", {"error": "unavailable", "reason": "the hub is stopping: reconnect to resume"})


def test_the_reader_stops_with_the_last_stream_and_starts_again_at_the_head(store):
    async def scenario():
        fanout = Fanout(store, render)
        first = Client()
        task = open_stream(fanout, 0, first)
        write(store, 2, prefix="a")
        await until(lambda: len(first.ids()) == 2, "the first stream")
        first.leave()
        await task
        assert fanout._reader is None
        reset_database(store._store.url)  # a log emptied underneath (as tests do between cases)
        second = Client()
        task = open_stream(fanout, 0, second)
        await until(lambda: fanout.stats()["live"] == 1, "the second stream")
        write(store, 1, prefix="b")
        await until(lambda: len(second.ids()) == 1, "the second stream's change")
        second.leave()
        await task
        return second

    assert asyncio.run(scenario()).ids() == ["b000"]


def test_a_store_that_fails_under_a_stream_ends_it_with_the_reason(store):
    from ledger import BackendError

    class Down(CountingStore):
        def head_seq(self):
            raise BackendError("PostgreSQL connection failed: the server closed the connection")

    async def scenario():
        fanout = Fanout(Down(store._store), render)
        client = Client()
        await fanout.serve(0, client.receive, client.send, client.abort)
        return fanout, client

    fanout, client = asyncio.run(scenario())
    assert client.ended and client.events() == [
        ("error", {"error": "backend", "reason": "PostgreSQL connection failed: the server closed the connection"})]
    assert fanout.stats()["open"] == 0


def test_a_stream_that_does_not_read_holds_one_small_page_and_reads_nothing_ahead(store):
    """Issue 16: 200 streams opened at since=0 that never read took the hub from 163 to 500 MiB
    (each held a page of 500 changes and its copy), and their reads queued in the API's pool.
    Now a catching-up stream holds one page of at most CATCHUP_BYTES and reads the next only
    once the client took it, in threads of its own."""
    from hub.stream import CATCHUP_BYTES

    pad = "x" * 1000
    for i in range(600):
        store.put("notes", {"i": i, "pad": pad}, f"n{i:04d}", actor=ACTOR)

    async def scenario():
        fanout = Fanout(store, render)
        stuck = Client(takes=2)  # the hello, one page: then its socket is full
        task = open_stream(fanout, 0, stuck)
        await until(lambda: stuck.takes == 0 and store.reads, "the first page")
        await asyncio.sleep(0.3)  # time to read ahead, if it would
        held = len(stuck.body)
        reads = dict(store.reads)
        stuck.abort()
        await task
        return held, reads

    held, reads = asyncio.run(scenario())
    assert held <= CATCHUP_BYTES + 2_000  # one page (cut after the change that crossed the limit) and the hello
    assert sum(n for name, n in reads.items() if name.startswith("stream-catchup")) <= 2, reads  # the page taken, the one waiting
    assert set(reads) <= {"stream-catchup-0", "stream-catchup-1", "stream-reader"}, reads  # never the API's threads
