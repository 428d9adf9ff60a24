#!/usr/bin/env python
"""The publish tick at scale: one run over N queued Instagram posts of 20 accounts (N = 250,
500, 1,000), each taking one step (intent, container, result), against Meta stood in for by
the tests' stateful fake behind an ``httpx.MockTransport`` (no network). On SQLite and
PostgreSQL, with a fresh store each.

Prints, per backend and size: the tick's wall time, store reads and writes per request (every
``get``/``query``/``put`` the tick and its vault make, counted at the store interface), Meta
calls per request, and the time per request, which stays flat when the tick is linear (the
queue is read once per run, a page at a time, not once per request).

    .venv/bin/python benchmarks/bench_publish.py [--sizes 250,500,1000] [--backends sqlite,postgres]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common as bc  # noqa: E402
import httpx  # noqa: E402

from hub.app import build_rules  # noqa: E402
from ledger import FakeClock, Ledger, Services, TickEvent, open_store  # noqa: E402
from ledger.context import make_context  # noqa: E402
from platforms.settings import PlatformSettings  # noqa: E402
from publishers.queue import new_request, queue  # noqa: E402
from publishers.settings import PublishSettings  # noqa: E402
from publishers.tick import publish  # noqa: E402
from skyhub_testkit.fakemeta import FakeMeta  # noqa: E402
from vault import Vault, new_key_text, parse_key  # noqa: E402

ACCOUNTS = 20
NOW = 1_800_000_000_000


class Counting:
    """The store interface, counting the calls that reach the database."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name in ("get", "put", "query", "delete", "history"):
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls[name] += 1
                return attr(*args, **kwargs)
            return counted
        return attr


def measure(url: str, n: int) -> dict[str, Any]:
    clock = FakeClock(NOW)
    store = open_store(url, build_rules(), clock)
    try:
        key = parse_key(new_key_text(), "bench")
        maya = Ledger(store, "user:maya", clock)
        accounts = [f"178414{i:011d}" for i in range(ACCOUNTS)]
        for account in accounts:
            Vault(maya, key).put("instagram", account, {"accessToken": "good-token"})
            head = store.get("vault", f"instagram:{account}")
            store.put("vault", {**head, "status": "ok"}, actor="admin")
        for i in range(n):
            body = new_request("ig", account=accounts[i % ACCOUNTS], slug=f"post-{i:05d}", caption=f"Post {i}",
                               images=[{"url": f"https://cdn.example.org/{i}.jpg", "alt": "a photo"}], now_ms=clock.now_ms())
            queue(maya, body)
        meta = FakeMeta(clock.now_ms)
        http = httpx.Client(transport=httpx.MockTransport(meta.handle))
        counting = Counting(store)
        services = Services(vault=lambda db: Vault(db, key), http=http,
                            platforms=PlatformSettings(instagram_url="https://graph.instagram.test"))
        ctx = make_context(Ledger(counting, "tick:publish", clock), "publish", services, settings=PublishSettings())  # type: ignore[arg-type]
        ctx.vault = Vault(Ledger(counting, "tick:publish", clock), key)  # type: ignore[arg-type]
        event = TickEvent("publish", datetime.fromtimestamp(NOW / 1000, tz=UTC))
        start = time.perf_counter()
        counts = publish(event, ctx)
        wall = time.perf_counter() - start
        http.close()
        assert counts == {"carousel-created": n}, counts
        reads = counting.calls["get"] + counting.calls["query"]
        return {"n": n, "wall": wall, "reads": reads / n, "queries": counting.calls["query"], "writes": counting.calls["put"] / n,
                "meta": sum(meta.calls.values()) / n, "per_request_ms": wall * 1000 / n}
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="250,500,1000")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for backend in args.backends.split(","):
        for n in sizes:
            if backend == "sqlite":
                with bc.sqlite_file() as url:
                    r = measure(url, n)
            else:
                with bc.pg_schema("publish") as url:
                    r = measure(url, n)
            rows.append([backend, r["n"], bc.fmt(r["wall"]), bc.fmt(r["per_request_ms"]), bc.fmt(r["reads"]), r["queries"],
                         bc.fmt(r["writes"]), bc.fmt(r["meta"])])
            print(f"{backend} n={n}: {r['wall']:.2f} s", file=sys.stderr)
    print(bc.table(f"one publish tick over N queued Instagram posts of {ACCOUNTS} accounts (one step each)",
                   ["backend", "requests", "wall s", "ms/request", "reads/request", "queries in all", "writes/request",
                    "Meta calls/request"], rows,
                   note="reads: get + query at the store interface (the queue pages, the 20 account documents, the vault); "
                        "writes: the intent and the result of each step"))
    for label, value in bc.machine_description():
        print(f"{label}: {value}")


if __name__ == "__main__":
    main()
