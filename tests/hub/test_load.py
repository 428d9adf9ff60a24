"""Load on a real `skyhub run`, over loopback, on SQLite and PostgreSQL: 50 clients writing and
200 change streams open for 30 s. No connection error, no 5xx, every acknowledged write in the
history, and every stream gets every change once, in order (a stream the hub drops for being
slow reconnects with Last-Event-ID, as a browser's EventSource does, and must still miss
nothing). Bounded: fixed counts and time; the waits after the writes end are guards."""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import pytest

from skyhub_testkit.hub import Hub
from tests.conftest import database

WRITERS = 50
STREAMS = 200
SECONDS = 30.0
ID = re.compile(rb"(?m)^id: (\d+)$")
DROPPED = re.compile(rb"(?m)^event: error$")


class Stream:
    def __init__(self) -> None:
        self.last = 0
        self.count = 0
        self.in_order = True
        self.connected = asyncio.Event()
        self.reconnects = 0
        self.errors: list[str] = []


async def follow(client: httpx.AsyncClient, stream: Stream, since: int, stop: asyncio.Event) -> None:
    stream.last = since
    while not stop.is_set():
        try:
            headers = {"Last-Event-ID": str(stream.last)}
            async with client.stream("GET", "/v1/changes/stream", headers=headers, timeout=httpx.Timeout(30, read=None)) as r:
                if r.status_code != 200:
                    stream.errors.append(f"status {r.status_code}")
                    return
                tail = b""
                async for data in r.aiter_bytes():
                    stream.connected.set()
                    buf = tail + data
                    cut = buf.rfind(b"\n\n")
                    end = cut + 2 if cut >= 0 else 0  # whole events only
                    for seq in map(int, ID.findall(buf, 0, end)):
                        stream.in_order &= seq > stream.last
                        stream.last = seq
                        stream.count += 1
                    if DROPPED.search(buf, 0, end):
                        break  # dropped: resume from the last id, as EventSource does
                    tail = buf[end:]
                    if stop.is_set():
                        return
            stream.reconnects += 1
        except httpx.TransportError as exc:
            if stop.is_set():
                return
            stream.errors.append(f"{type(exc).__name__}: {exc}")
            return


async def write(client: httpx.AsyncClient, k: int, until: float, acked: list[tuple[str, str]], failures: list[str]) -> None:
    i = 0
    while time.monotonic() < until:
        doc_id = f"w{k:02d}-{i:05d}"
        try:
            r = await client.put(f"/v1/db/load/docs/{doc_id}", json={"writer": k, "i": i, "status": "open"})
        except httpx.TransportError as exc:
            failures.append(f"{doc_id}: {type(exc).__name__}: {exc}")
        else:
            if r.status_code == 200:
                acked.append((doc_id, r.json()["rev"]))
            else:
                failures.append(f"{doc_id}: {r.status_code} {r.text[:200]}")
        i += 1


async def load(url: str, token: str, start: int, head_after: object) -> dict:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=WRITERS + STREAMS)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as client:
        stop = asyncio.Event()
        streams = [Stream() for _ in range(STREAMS)]
        following = [asyncio.create_task(follow(client, s, start, stop)) for s in streams]
        await asyncio.wait_for(asyncio.gather(*(s.connected.wait() for s in streams)), 120)
        acked: list[tuple[str, str]] = []
        failures: list[str] = []
        until = time.monotonic() + SECONDS
        await asyncio.gather(*(write(client, k, until, acked, failures) for k in range(WRITERS)))
        final = await asyncio.to_thread(head_after)
        deadline = time.monotonic() + 120
        while any(s.last < final for s in streams if not s.errors) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        stop.set()
        for task in following:
            task.cancel()
        await asyncio.gather(*following, return_exceptions=True)
    return {"acked": acked, "failures": failures, "streams": streams, "final": final}


@pytest.fixture(params=["sqlite", "postgres"])
def hub(request, tmp_path):
    """A hub of its own, so that the load and the streams it leaves behind meet no other test."""
    with database(request.param, tmp_path) as url:
        hub = Hub(url, tmp_path, jobs=False)
        try:
            yield hub
        finally:
            hub.stop()


def test_fifty_writers_and_two_hundred_streams_lose_nothing(hub):
    token = hub.token("load")
    admin = hub.admin
    start = admin.head_seq()
    out = asyncio.run(load(hub.url, token, start, admin.head_seq))

    assert out["failures"] == [], out["failures"][:10]  # no connection error, no 5xx, no refusal
    assert len(out["acked"]) > WRITERS * 5, f"only {len(out['acked'])} writes in {SECONDS:g} s"
    logged = {}
    shown = 0
    after = start
    while True:
        page = admin.changes(after, 1000)
        if not page:
            break
        logged.update({(c.id, c.rev): c.seq for c in page if c.db == "load"})
        shown += sum(1 for c in page if c.db != "auth" and c.seq <= out["final"])
        after = page[-1].seq
    missing = [a for a in out["acked"] if a not in logged]
    assert missing == [], f"{len(missing)} acknowledged writes are not in the history: {missing[:5]}"
    for doc_id, rev in out["acked"][:: max(1, len(out["acked"]) // 50)]:
        assert [c.rev for c in admin.history("load", doc_id)] == [rev]

    visible = shown
    streams = out["streams"]
    assert [s.errors for s in streams if s.errors] == []
    assert all(s.in_order for s in streams), "a stream delivered a change twice or out of order"
    short = [(s.count, s.last, s.reconnects) for s in streams if s.count != visible or s.last != out["final"]]
    assert short == [], f"{len(short)} streams missed changes (expected {visible} up to {out['final']}): {short[:5]}"
    deadline = time.monotonic() + 30
    while (health := httpx.get(f"{hub.url}/health", timeout=10).json())["streams"]["open"]:
        assert time.monotonic() < deadline, f"streams still open on the hub after their clients left: {health['streams']}"
        time.sleep(0.2)
    assert health["ok"] is True
