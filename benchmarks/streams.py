#!/usr/bin/env python
"""The hub's write rate with open change streams: one client writing one document at a time
over HTTP while 0 / 10 / 100 / 200 / 500 clients hold ``/v1/changes/stream`` open, on SQLite and
PostgreSQL; the hub's resident memory; and whether every stream got every change. Then streams
that never read: 200 clients open ``/v1/changes/stream?since=0`` over a log of 20,000 changes
of about 1 KB and read nothing; the hub's memory before, at its peak and after they close, and
how long ``/health`` takes meanwhile.

    .venv/bin/python benchmarks/streams.py                 # 10 s per measurement
    .venv/bin/python benchmarks/streams.py --seconds 3     # smoke run
    .venv/bin/python benchmarks/streams.py --help

Each backend gets a fresh store (a SQLite file in a temporary folder, a new PostgreSQL schema
in the database named by SKYHUB_TEST_PG_URL) and one `skyhub run` process; the streams are
held by a child process (raw sockets, asyncio) that reads and counts the events, so parsing
them costs neither the hub nor the writer. Targets: with 100 and with 500 streams, the write
rate is at least 80 % of the rate with none; 200 unread streams add less than 150 MiB.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ledger import SYSTEM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common as bc  # noqa: E402
import httpx  # noqa: E402

from skyhub_testkit.hub import Hub  # noqa: E402

RATE_SHARE = 0.8
RATE_AT = (100, 500)  # stream counts held to RATE_SHARE
RSS_MB = 150.0  # the most resident memory a hub with open streams may use (reading streams)
UNREAD_ADDED_MB = 150.0  # the most that unread streams from since=0 may add
CHANGE = b"\nevent: change\n"


# ---- the hub ---------------------------------------------------------------------------
class HubProcess(Hub):
    """``skyhub run`` (the test kit's hub process), measured: its memory and its CPU time."""

    def __init__(self, url: str, cwd: str) -> None:
        super().__init__(url, Path(cwd), jobs=False)

    def rss_mb(self) -> float:
        """The hub's resident memory now, MB."""
        return bc.memory_kb(self.proc.pid)["VmRSS"] / 1024

    def cpu_s(self) -> float:
        """User + system CPU seconds the hub has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")



# ---- the streams (a child process) ---------------------------------------------------------
def hold_streams(host: str, port: int, token: str, n: int, since: int, ready: Any, stop: Any, results: Any) -> None:
    counts = [0] * n
    dropped = [False] * n
    errors: list[str] = []

    async def one(i: int, connected: list[int], all_in: asyncio.Event) -> None:
        try:
            for attempt in range(5):  # a refused connect is tried again, as EventSource would
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(f"GET /v1/changes/stream?since={since} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                             f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n".encode())
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"HTTP/1.1 200"):
                    break
                body = await asyncio.wait_for(reader.read(300), 5)
                status = head.split(b"\r\n")[0].decode()
                errors.append(f"{status}: {body.decode(errors='replace')}")
                writer.close()
                await asyncio.sleep(0.5 * (attempt + 1))
            else:
                return
            connected[0] += 1
            if connected[0] == n:
                all_in.set()
            tail = b""
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                buf = tail + data
                counts[i] += buf.count(CHANGE)
                if b"event: error" in buf:
                    dropped[i] = True
                tail = buf[-(len(CHANGE) - 1):]
        except (OSError, asyncio.IncompleteReadError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    async def main() -> None:
        connected = [0]
        all_in = asyncio.Event()
        tasks = [asyncio.create_task(one(i, connected, all_in)) for i in range(n)]
        try:
            await asyncio.wait_for(all_in.wait(), 60)
            ready.put("ok")
        except TimeoutError:
            ready.put(("error", f"only {connected[0]} of {n} streams connected; {errors[:3]}"))
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the last batch
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    results.put({"counts": counts, "dropped": sum(dropped), "errors": errors})


def hold_unread(host: str, port: int, token: str, n: int, ready: Any, stop: Any, results: Any) -> None:
    """Open ``n`` streams from since=0 and read nothing (not even the answer's head)."""
    import socket as _socket

    socks = []
    errors = []
    for _ in range(n):
        try:
            s = _socket.create_connection((host, port), timeout=30)
            s.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, 4096)  # a client that takes nothing
            s.sendall(f"GET /v1/changes/stream?since=0 HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                      "Accept: text/event-stream\r\n\r\n".encode())
            socks.append(s)
        except OSError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    ready.put("ok")
    stop.wait(600)
    for s in socks:
        s.close()
    results.put({"opened": len(socks), "errors": errors[:3]})


def measure_unread(hub: HubProcess, token: str, streams: int, seconds: float) -> dict[str, Any]:
    """The hub's memory and /health's answer time while ``streams`` clients hold unread streams from since=0."""
    host, port = hub.url.removeprefix("http://").split(":")
    time.sleep(2)
    before = hub.rss_mb()
    ready, results, stop = bc.SPAWN.Queue(), bc.SPAWN.Queue(), bc.SPAWN.Event()
    holder = bc.start_child(hold_unread, host, int(port), token, streams, ready, stop, results, name=f"unread-{streams}")
    bc.wait_ready(ready, 1, [holder], timeout=120)
    rss = [hub.rss_mb()]
    health: list[float] = []
    failures = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        try:
            ok = httpx.get(f"{hub.url}/health", timeout=30).status_code == 200
        except httpx.HTTPError:
            ok = False
        health.append((time.perf_counter() - started) * 1000)
        failures += 0 if ok else 1
        rss.append(hub.rss_mb())
        time.sleep(0.25)
    bc.stop_children([holder], stop, timeout=30)
    got = results.get(timeout=10)
    time.sleep(3)
    return {"streams": streams, "opened": got["opened"], "before": before, "peak": max(rss), "added": max(rss) - before,
            "after": hub.rss_mb(), "health_p50": statistics.median(health), "health_max": max(health), "health_failed": failures}


def prefill(admin: Any, n: int) -> None:
    """``n`` documents of about 1 KB each in the change log (what an unread stream from since=0 would have to take)."""
    pad = "x" * 1000
    for i in range(n):
        admin.put("history", {"i": i, "pad": pad}, f"h{i:06d}", actor="user:bench")


# ---- one measurement ---------------------------------------------------------------------
def measure(hub: HubProcess, token: str, streams: int, seconds: float, tag: str) -> dict[str, Any]:
    host, port = hub.url.removeprefix("http://").split(":")
    ready, results, stop = bc.SPAWN.Queue(), bc.SPAWN.Queue(), bc.SPAWN.Event()
    holder = None
    if streams:
        since = httpx.get(f"{hub.url}/v1/head", headers={"Authorization": f"Bearer {token}"}).json()["seq"]
        holder = bc.start_child(hold_streams, host, int(port), token, streams, since, ready, stop, results,
                                name=f"streams-{streams}")
        bc.wait_ready(ready, 1, [holder], timeout=90)
    rss = [hub.rss_mb()]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.2):
            rss.append(hub.rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    errors = 0
    with httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        for i in range(30):  # warm-up: connections, statements, the reader
            client.put(f"/v1/db/bench/docs/{tag}-warm{i}", json={"i": i})
        writes = 0
        cpu = hub.cpu_s()
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            r = client.put(f"/v1/db/bench/docs/{tag}-{writes}", json={"i": writes, "pad": "x" * 100})
            if r.status_code != 200:
                errors += 1
            writes += 1
        elapsed = time.perf_counter() - started
        cpu = hub.cpu_s() - cpu
    sampling.set()
    sampler.join()
    out: dict[str, Any] = {"streams": streams, "writes": writes, "rate": writes / elapsed, "rss": max(rss), "errors": errors,
                           "cpu_ms": 1000 * cpu / max(1, writes)}
    if holder is not None:
        bc.stop_children([holder], stop, timeout=20)
        got = results.get(timeout=10)
        expected = writes + 30
        out.update(min_events=min(got["counts"]), complete=sum(1 for c in got["counts"] if c >= expected),
                   dropped=got["dropped"], stream_errors=len(got["errors"]), first_errors=got["errors"][:3])
    return out


def run_backend(backend: str, args: argparse.Namespace) -> dict[int, list[dict[str, Any]]]:
    """Every stream count ``args.repeat`` times, interleaved (0, 10, 50, 200, 0, 10, ...), on one
    hub, so that noise from other load on the machine falls on every count alike."""
    from hub.app import build_rules
    from hub.auth import add_user
    from ledger import open_store

    fresh = bc.sqlite_file() if backend == "sqlite" else bc.pg_schema("skyhub_streams")
    with fresh as url:
        folder = os.path.dirname(url.removeprefix("sqlite:///")) if backend == "sqlite" else "/tmp"
        hub = HubProcess(url, folder)
        admin = open_store(url, build_rules(), SYSTEM)
        try:
            token = add_user(admin, "bench", clock=SYSTEM)
            runs: dict[int, list[dict[str, Any]]] = {n: [] for n in args.streams}
            if args.unread:
                print(f"  .. {backend}: {args.log:,} changes in the log, then {args.unread} unread streams from since=0",
                      file=sys.stderr, flush=True)
                prefill(admin, args.log)
                try:
                    runs[-1] = [measure_unread(hub, token, args.unread, max(args.seconds, 10.0))]
                except Exception as exc:  # noqa: BLE001 - reported; the run goes on
                    print(f"  .. FAILED: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr, flush=True)
                    bc.kill_all_children()
            for rep in range(args.repeat):
                for n in args.streams:
                    print(f"  .. {backend}: {n} streams, {args.seconds:g} s of writes, run {rep + 1}/{args.repeat}",
                          file=sys.stderr, flush=True)
                    try:
                        runs[n].append(measure(hub, token, n, args.seconds, f"r{rep}s{n}"))
                    except Exception as exc:  # noqa: BLE001 - reported; the run goes on
                        print(f"  .. FAILED: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr, flush=True)
                        bc.kill_all_children()
            return runs
        finally:
            admin.close()
            hub.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=10.0, help="seconds of writes per measurement (default 10)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each stream count, interleaved; medians reported (default 3)")
    p.add_argument("--streams", default="0,10,100,200,500", help="open streams per measurement (default 0,10,100,200,500)")
    p.add_argument("--unread", type=int, default=200, help="unread streams from since=0 (default 200; 0 skips it)")
    p.add_argument("--log", type=int, default=20_000, help="changes in the log before the unread streams open (default 20,000)")
    p.add_argument("--backends", default="sqlite,postgres", help="comma-separated: sqlite,postgres")
    args = p.parse_args(argv)
    args.streams = [int(s) for s in args.streams.split(",")]
    atexit.register(bc.kill_all_children)
    print(bc.table("Machine", ["", ""], bc.machine_description()))
    rows = []
    unread_rows = []
    errors = []
    for backend in args.backends.split(","):
        runs = run_backend(backend, args)
        for u in runs.pop(-1, []):
            unread_rows.append([backend, u["streams"], u["opened"], u["before"], u["peak"], u["added"], u["after"], u["health_p50"],
                                u["health_max"], u["health_failed"], bc.verdict(u["added"] < UNREAD_ADDED_MB)])
        rate = {n: statistics.median(r["rate"] for r in rs) for n, rs in runs.items() if rs}
        for n, rs in runs.items():
            if not rs:
                rows.append([backend, n, "failed", None, "-", None, "-", "-", "-", None, "-", "-"])
                continue
            share = rate[n] / rate[0] if rate.get(0) else None
            rss = max(r["rss"] for r in rs)
            rows.append([
                backend, n, " ".join(f"{r['rate']:.0f}" for r in rs), rate[n], f"{share:.0%}" if share is not None else "-",
                statistics.median(r["cpu_ms"] for r in rs),
                f"{sum(r.get('complete', 0) for r in rs)}/{n * len(rs)}" if n else "-",
                sum(r.get("dropped", 0) for r in rs) if n else "-",
                sum(r["errors"] + r.get("stream_errors", 0) for r in rs), rss,
                bc.verdict(share >= RATE_SHARE) if n in RATE_AT and share is not None else "-",
                bc.verdict(rss < RSS_MB),
            ])
            errors += [f"{backend}, {n} streams: {e}" for r in rs for e in r.get("first_errors", [])]
    for e in errors:
        print(f"stream error: {e}")
    load = os.getloadavg()
    print(bc.table(
        "Write rate with open change streams: one client, one PUT at a time, over HTTP",
        ["backend", "streams", "each run (writes/s)", "writes/s", "vs none", "hub CPU ms/write", "streams complete", "dropped",
         "errors", "hub RSS MB", f">= {RATE_SHARE:.0%} (100, 500)", f"RSS < {RSS_MB:g} MB"],
        rows,
        f"   {args.seconds:g} s of writes per run, {args.repeat} runs per row interleaved; writes/s and CPU: medians.\n"
        "   hub CPU ms/write: user + system CPU time of the hub process per write (less noisy than the rate on a\n"
        "   busy machine). streams complete: streams that received every write of their run, of all opened.\n"
        "   hub RSS: the most resident memory of the `skyhub run` process sampled during the row's runs.\n"
        f"   load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
    ))
    if unread_rows:
        print(bc.table(
            f"Streams that never read: opened at since=0 over {args.log:,} changes of ~1 KB, nothing read",
            ["backend", "streams", "opened", "RSS before MB", "peak MB", "added MB", "after close MB", "/health p50 ms",
             "/health max ms", "/health failed", f"added < {UNREAD_ADDED_MB:g} MB"],
            unread_rows,
            "   RSS: resident memory of the `skyhub run` process; after close: 3 s after the clients hung up.\n"
            "   /health: one request every 0.25 s while the streams were open, from this process.",
        ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
