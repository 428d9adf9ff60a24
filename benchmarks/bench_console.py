#!/usr/bin/env python
"""The console with 100,000 documents in one database: the overview, a status list (a page of
documents in one status, and the publishing queue filtered by status) and a ``/metrics``
scrape, each timed from a client on the same machine against a real ``skyhub run`` (so the
figure is server time plus one loopback round trip: an upper bound of the server's time).

The documents are publish requests in ``requests`` (90 % done, 5 % pending, 3 % error, 2 %
cancelled), written through the store's normal write path (``store.put``, as admin, from four
threads). Targets: overview and status list under 200 ms, a scrape under 100 ms (p90 of
``--repeat`` requests after one warm-up).

    .venv/bin/python benchmarks/bench_console.py [--docs 100000] [--backends sqlite,postgres] [--repeat 30]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common as bc  # noqa: E402
import httpx  # noqa: E402
import psycopg  # noqa: E402

from hub.app import build_rules  # noqa: E402
from ledger import (
    SYSTEM,
    open_store,  # noqa: E402
)
from skyhub_testkit.hub import Hub  # noqa: E402

TARGETS_MS = {"overview": 200.0, "status list": 200.0, "publish queue": 200.0, "metrics": 100.0}
MIX = (("done", 0.90), ("pending", 0.05), ("error", 0.03), ("cancelled", 0.02))


def fill(url: str, n: int, threads: int = 4) -> float:
    """Write ``n`` publish requests through ``store.put``; returns the seconds it took."""
    store = open_store(url, build_rules(), SYSTEM)
    statuses = [s for s, share in MIX for _ in range(int(n * share))]
    statuses += ["done"] * (n - len(statuses))
    started = time.perf_counter()

    def write(part: int) -> None:
        for i in range(part, n, threads):
            status = statuses[i]
            body = {"kind": "publish-request", "platform": "ig", "account": "17841400000000000", "slug": f"p{i}", "status": status,
                    "caption": f"post {i}", "images": [{"url": f"https://cdn.example.org/{i}.jpg", "alt": "a picture"}], "attempts": 0,
                    "createdAt": "2026-11-30T10:00:00.000Z"}
            if status == "done":
                body.update(mediaId=f"m{i}", permalink=f"https://www.instagram.com/p/P{i}/")
            if status == "error":
                body["lastError"] = "Instagram answered 400 (code -1, subcode 2207052): change the image and queue it again"
            store.put("requests", body, f"ig:17841400000000000:p{i}", actor="admin")

    workers = [threading.Thread(target=write, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    took = time.perf_counter() - started
    store.close()
    return took


def time_get(client: httpx.Client, path: str, repeat: int) -> dict[str, float]:
    client.get(path).raise_for_status()  # warm-up (templates, caches, the activity reader's first read)
    samples = []
    for _ in range(repeat):
        t = time.perf_counter_ns()
        r = client.get(path)
        samples.append(time.perf_counter_ns() - t)
        r.raise_for_status()
    return bc.summary_ms(samples)


def sign_in(client: httpx.Client, token: str) -> None:
    page = client.get("/console/sign-in")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    r = client.post("/console/sign-in", data={"csrf": csrf.group(1), "token": token, "next": "/"})
    assert r.status_code == 303, r.text


def run(backend: str, n: int, repeat: int) -> list[list[str]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-console-"))
    schema = None
    if backend == "sqlite":
        url = f"sqlite:///{tmp}/console.db"
    else:
        schema = "bc_" + uuid.uuid4().hex[:10]
        with psycopg.connect(bc.PG_URL, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in bc.PG_URL else "?"
        url = f"{bc.PG_URL}{sep}options=-csearch_path%3D{schema}"
    rows = []
    try:
        took = fill(url, n)
        print(f"{backend}: wrote {n:,} documents in {took:.1f} s ({n / took:,.0f}/s)", file=sys.stderr)
        hub = Hub(url, tmp, jobs=False)
        try:
            token = hub.token("bench")
            with httpx.Client(base_url=hub.url, timeout=60) as client:
                sign_in(client, token)
                for name, path in (("overview", "/"), ("status list", "/console/db/requests?status=done"),
                                   ("publish queue", "/console/publish?status=error"), ("metrics", "/metrics")):
                    s = time_get(client, path, repeat)
                    verdict = "PASS" if s["p90"] < TARGETS_MS[name] else "MISS"
                    rows.append([backend, name, f"{n:,}", bc.fmt(s["p50"]), bc.fmt(s["p90"]), bc.fmt(s["max"]),
                                 f"{TARGETS_MS[name]:.0f}", verdict])
        finally:
            hub.stop()
    finally:
        if schema:
            with psycopg.connect(bc.PG_URL, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    load = os.getloadavg()
    rows = []
    for backend in args.backends.split(","):
        rows += run(backend, args.docs, args.repeat)
    after = os.getloadavg()
    print(bc.table("The console with many documents in one database (ms, loopback round trip included)",
                   ["backend", "request", "documents", "p50", "p90", "max", "target", "verdict"], rows,
                   note=f"load average (1 min) before: {load[0]:.2f}, after: {after[0]:.2f}"))
    for key, value in bc.machine_description():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
