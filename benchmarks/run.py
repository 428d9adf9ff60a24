#!/usr/bin/env python
"""skyhub benchmarks: commit-to-handler latency, end-to-end jobs/s, recovery after a lease
expires, each on SQLite and PostgreSQL, Procrastinate on the same PostgreSQL and huey's
SqliteHuey on the same machine for comparison; the CLI's start time, an idle hub's memory, and the bot's ingest tick over
thousands of mentions. Prints aligned plain-text tables; see docs/benchmarks.md.

    ./dev bench              # full size (a few minutes)
    ./dev bench --quick      # smoke run (about a minute)
    .venv/bin/python benchmarks/run.py --help

PostgreSQL is the server named by SKYHUB_TEST_PG_URL (default
postgresql://postgres@127.0.0.1:5432/test). Every measurement gets a fresh schema (skyhub)
or a fresh database (Procrastinate), or a fresh SQLite file in a temporary folder; all are
removed at the end, and every child process is stopped.
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import signal
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_common as bc  # noqa: E402
import bench_huey as hu  # noqa: E402
import bench_ingest as ing  # noqa: E402
import bench_process as proc  # noqa: E402
import bench_procrastinate as pq  # noqa: E402
import bench_skyhub as sk  # noqa: E402

# commit-to-handler (ms), feed in the writing process: (p50, p99) by backend and by how the writes come
TARGETS = {
    "sqlite": {"back to back": (1.0, 5.0), "spaced": (1.0, 5.0)},
    "postgres": {"back to back": (0.5, 5.0), "spaced": (0.8, 5.0)},
}
CROSS_SQLITE = (1.0, 3.0)  # commit-to-handler p50, p99 (ms), SQLite, handler in another process
SQLITE_JOBS_PER_S = 2500.0
SQLITE_VS_HUEY = 1.0  # skyhub's SQLite jobs/s / huey's SqliteHuey's (process workers, its best poll), 1 and 2 workers
SQLITE_TWO_VS_ONE = 1.0  # 2 workers must be faster than 1 (a ratio above this)
PG_VS_PROCRASTINATE = 2.0
RECOVERY_MS = 50.0
DB_GET_S, DB_GET_VS_PYTHON = 0.15, 8.0  # `skyhub db get` median wall time, and against bare Python
HELP_S = 0.15  # `skyhub --help` median wall time
# huey's configurations: (worker type, poll); the first is run in every repeat and is the one the target compares with
HUEY_CONFIGS = (("process", "best poll"), ("thread", "best poll"), ("process", "defaults"), ("thread", "defaults"))
RSS_MB = {"no bot": 55.0, "bot configured": 80.0}  # idle `skyhub run`
INGEST_S, INGEST_N, INGEST_LINEAR = 5.0, 10_000, 1.5  # the ingest tick over 10,000 new mentions; time per mention, largest / smallest
# where an idle hub's memory goes: one interpreter importing these in turn, in the order a hub starts
IMPORTS = ("click", "hub.cli", "pydantic", "hub.settings", "ledger.sqlite", "vault", "hub.app", "fastapi",
           "uvicorn", "hub.server", "jinja2", "prometheus_client", "hub.console", "hub.webapp", "apscheduler.schedulers.background",
           "keyring", "platforms.bluesky", "bot.ingest", "bot.reply")
BACKENDS = ("sqlite", "postgres")
SECTIONS = ("latency", "jobs", "recovery", "procrastinate", "huey", "cli", "rss", "ingest")


def fresh(backend: str) -> AbstractContextManager[str]:
    return bc.sqlite_file() if backend == "sqlite" else bc.pg_schema("skyhub_bench")


def say(text: str = "") -> None:
    print(text, flush=True)


def progress(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.results: dict[str, Any] = {}
        self.errors: list[str] = []

    def attempt(self, key: str, label: str, fn: Callable[..., Any], *fargs: Any) -> Any:
        progress(label)
        started = time.monotonic()
        try:
            value = fn(*fargs)
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            self.errors.append(f"{label}: {type(exc).__name__}: {exc}")
            progress(f"FAILED: {type(exc).__name__}: {exc}")
            if self.args.verbose:
                traceback.print_exc()
            return None
        progress(f"done in {time.monotonic() - started:.1f} s")
        self.results[key] = value
        return value

    def measure(self, key: str, label: str, backend: str, fn: Callable[..., Any], *fargs: Any) -> Any:
        def inner() -> Any:
            with fresh(backend) as url:
                return fn(url, *fargs)

        return self.attempt(key, label, inner)

    def get(self, *path: str) -> Any:
        node: Any = self.results
        for p in path:
            if not isinstance(node, dict) or p not in node:
                return None
            node = node[p]
        return node


def sizes(args: argparse.Namespace) -> None:
    quick = args.quick
    defaults = {
        "samples": (200, 2000),
        "warmup": (30, 200),
        "spaced_samples": (100, 1000),
        "cross_samples": (100, 1000),
        "cross_budget": (5.0, 20.0),
        "jobs": (300, 5000),
        "pg_jobs": (200, 1500),
        "repeat": (1, 3),
        "recoveries": (5, 20),
        "cli_runs": (5, 15),
        "settle": (1.5, 3.0),
        "ingest_sizes": ("500,1000,2000", "1000,5000,10000"),
    }
    for name, (small, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    args.ingest_sizes = sorted(int(n) for n in str(args.ingest_sizes).split(",") if n)


def lat_row(label: str, mode: str, s: dict[str, Any], ret: dict[str, Any] | None, backend: str, how: str) -> list[Any]:
    p50, p99 = TARGETS[backend][how]
    return [label, mode, s["n"], s["p50"], s["p90"], s["p99"], s["max"],
            ret["p50"] if ret else None, ret["p99"] if ret else None,
            f"<= {p50:g}", bc.verdict(s["p50"] <= p50), f"<= {p99:g}", bc.verdict(s["p99"] <= p99)]


def run_latency(run: Run) -> None:
    a = run.args
    rows, cross_rows = [], []
    for backend in a.backends:
        r = run.measure(f"latency.{backend}", f"{backend}: commit-to-handler latency, feed in-process, back to back",
                        backend, sk.latency_in_process, a.samples, a.warmup)
        if r:
            rows.append(lat_row(backend, "back to back", r["from_commit"], r["from_return"], backend, "back to back"))
        r = run.measure(f"latency_spaced.{backend}",
                        f"{backend}: commit-to-handler latency, feed in-process, writes {a.gap_ms:g} ms apart",
                        backend, sk.latency_in_process, a.spaced_samples, min(a.warmup, 50), a.gap_ms)
        if r:
            rows.append(lat_row(backend, f"{a.gap_ms:g} ms apart", r["from_commit"], r["from_return"], backend, "spaced"))
    for backend in a.backends:
        r = run.measure(f"latency_cross.{backend}", f"{backend}: commit-to-handler latency, feed in another process",
                        backend, sk.latency_cross_process, a.cross_samples, min(a.warmup, 50), a.cross_budget)
        if r:
            c = r["from_return"]
            wake = "socket in <db>.wake/" if backend == "sqlite" else "LISTEN/NOTIFY"
            goal = [f"<= {CROSS_SQLITE[0]:g}", bc.verdict(c["p50"] <= CROSS_SQLITE[0]), f"<= {CROSS_SQLITE[1]:g}",
                    bc.verdict(c["p99"] <= CROSS_SQLITE[1])] if backend == "sqlite" else ["-", "", "-", ""]
            cross_rows.append([f"skyhub {backend}", wake, c["n"], c["p50"], c["p90"], c["p99"], c["max"], c["over_100ms"], *goal])
    if "procrastinate" in a.sections and "postgres" in a.backends:
        r = run.attempt("procrastinate.latency", "procrastinate: defer-to-start latency, worker in another process",
                        in_procrastinate_db(pq.latency, a.cross_samples, min(a.warmup, 50), a.cross_budget))
        if r:
            c = r["from_return"]
            cross_rows.append(["procrastinate", "LISTEN/NOTIFY (+5 s poll)", c["n"], c["p50"], c["p90"], c["p99"], c["max"],
                               c["over_100ms"], "-", "", "-", ""])
    say(bc.table(
        "1. Commit-to-handler latency (ms): Feed.start() in the writing process, one write at a time",
        ["backend", "writes", "samples", "p50", "p90", "p99", "max", "p50*", "p99*", "target p50", "", "target p99", ""],
        rows,
        "   p50..max: from the commit (a commit listener the store calls right after COMMIT) to the handler's first line.\n"
        "   p50*/p99*: the same, timed from store.put()'s return instead.\n"
        "   back to back: the next write as soon as the handler was called;"
        f" {a.gap_ms:g} ms apart: the feed (and the server) idle between writes.",
    ))
    say(bc.table(
        "1b. Commit-to-handler latency (ms), handler in another process: skyhub Feed, or a Procrastinate worker "
        "(timed from put()/defer()'s return)",
        ["system", "wake-up", "samples", "p50", "p90", "p99", "max", "> 100 ms", "target p50", "", "target p99", ""],
        cross_rows,
        f"   at most {a.cross_samples} samples or {a.cross_budget:g} s of measuring each, whichever ends first.",
    ))


def in_procrastinate_db(fn: Callable[..., Any], *fargs: Any) -> Callable[[], Any]:
    def inner() -> Any:
        with bc.pg_database("procrastinate_bench") as url:
            pq.apply_schema(url)
            return fn(url, *fargs)

    return inner


def run_jobs(run: Run) -> None:
    """Repeated and interleaved (skyhub on PostgreSQL, then Procrastinate; skyhub on SQLite,
    then huey), so that noise from other load on the machine falls on both alike; medians are
    reported. huey's first configuration runs in every repeat, the others in the first only."""
    a = run.args
    with_pq = "procrastinate" in a.sections and "postgres" in a.backends
    with_huey = "huey" in a.sections and "sqlite" in a.backends
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for rep in range(a.repeat):
        for backend in a.backends:
            n = a.jobs if backend == "sqlite" else a.pg_jobs
            for workers in (1, 2):
                tag = f"run {rep + 1}/{a.repeat}"
                r = run.measure(f"jobs.{backend}.{workers}.{rep}", f"{backend}: {n} jobs end to end, {workers} worker "
                                f"process(es), {tag}", backend, sk.jobs_end_to_end, n, workers)
                if r:
                    runs.setdefault((f"skyhub {backend}", workers), []).append(r)
                if backend == "sqlite" and with_huey:
                    for kind, poll in HUEY_CONFIGS[:1] if rep else HUEY_CONFIGS:
                        r = run.attempt(f"huey.jobs.{kind}.{poll}.{workers}.{rep}", f"huey: {n} no-op tasks, {workers} "
                                        f"{kind} worker(s), {poll}, {tag}", hu.jobs_end_to_end, n, workers, kind, poll)
                        if r:
                            runs.setdefault((f"huey {kind}, {poll}", workers), []).append(r)
                if backend == "postgres" and with_pq:
                    r = run.attempt(f"procrastinate.jobs.{workers}.{rep}", f"procrastinate: {n} no-op tasks, {workers} "
                                    f"worker process(es), {tag}", in_procrastinate_db(pq.jobs_end_to_end, n, workers))
                    if r:
                        runs.setdefault(("procrastinate", workers), []).append(r)
    rows = []
    used = next((rs[0]["settings"] for (system, _), rs in runs.items() if system.startswith("huey")), "not run")
    for (system, workers), rs in runs.items():
        rate = statistics.median(r["jobs_per_s"] for r in rs)
        run.results.setdefault("jobs_median", {})[f"{system}.{workers}"] = rate
        split = rs[-1].get("delivered") or rs[-1].get("per_worker") or []
        ok = all(r["verified"].get("ok") for r in rs)
        once = f"yes, {len(rs)} run{'s' if len(rs) > 1 else ''}" if ok else "NO: " + "; ".join(
            str(r["verified"]) for r in rs if not r["verified"].get("ok"))
        rows.append([system, workers, rs[0]["n"], rate, " ".join(f"{r['jobs_per_s']:.0f}" for r in rs),
                     statistics.median(r["create_per_s"] for r in rs), statistics.median(r["elapsed_s"] for r in rs),
                     statistics.median(r["elapsed_s"] - r["create_s"] for r in rs),
                     "/".join(str(x) for x in split), once])
    say(bc.table(
        "2. End-to-end jobs/s: jobs created (deferred) one at a time by the parent process while worker processes "
        "run them",
        ["system", "workers", "jobs", "jobs/s", "each run", "creates/s", "total s", "tail s", "per worker", "exactly once"],
        rows,
        "   jobs/s: median over the runs; total: first create -> last done committed (skyhub: 'at' of the last\n"
        "   transition to done; Procrastinate: the last 'succeeded' event); tail: after the last create.\n"
        "   per worker (last run): skyhub, changes delivered to each worker's handler (1 per job and warm-up job:\n"
        "   the handler skips its own running and done writes); Procrastinate, jobs each worker ran; huey, tasks\n"
        "   each worker ran (warm-up included). huey: SqliteHuey at its defaults (" + used + "), a consumer\n"
        "   process with process (forked) or thread workers; poll 'defaults': -d 0.1 -b 1.15 -m 10, 'best poll':\n"
        "   -d 0.001 -b 1 -m 0.001 (huey_consumer's options); its end: the last task's run.",
    ))


def run_recovery(run: Run) -> None:
    a = run.args
    rows = []
    for backend in a.backends:
        for where, fn in (("same process", sk.recovery_in_process), ("other process", sk.recovery_cross_process)):
            key = f"recovery.{backend}.{'in' if where == 'same process' else 'cross'}"
            r = run.measure(key, f"{backend}: recovery after lease expiry, sweeper in the {where}", backend,
                            fn, a.recoveries, a.lease_ms)
            if r:
                c, at = r["commit"], r["at"]
                states = ", ".join(f"{k} x{v}" for k, v in sorted(r["states"].items()))
                rows.append([backend, where, c["n"], c["p50"], c["p99"], c["max"], at["p50"], at["max"], states,
                             f"<= {RECOVERY_MS:g}", bc.verdict(c["max"] <= RECOVERY_MS)])
    say(bc.table(
        f"3. Recovery delay (ms) after a lease expires: lease {a.lease_ms} ms, never finished, Sweeper.start()",
        ["backend", "sweeper", "reps", "p50", "p99", "max", "p50 at", "max at", "returned to", "target max", ""],
        rows,
        "   p50..max: leaseUntil -> the sweep's write committed (commit listener in the sweeping process).\n"
        "   'at': leaseUntil -> the sweep's own clock reading for the write (the change's 'at', whole ms).",
    ))


def comparison(run: Run) -> None:
    rows = []

    def ratio(x: float | None, y: float | None) -> float | None:
        return x / y if x is not None and y else None

    plat = run.get("procrastinate.latency", "from_return")
    for key, label in (("latency_cross.postgres", "handler in another process"), ("latency.postgres", "skyhub feed in-process")):
        lat = run.get(key, "from_commit" if key == "latency.postgres" else "from_return")
        for stat in ("p50", "p99"):
            s, p = (lat[stat] if lat else None), (plat[stat] if plat else None)
            rows.append([f"latency {stat} (ms), {label}", s, p, ratio(s, p), "(lower is better)", "-"])
    for workers in (1, 2):
        s = run.get("jobs_median", f"skyhub postgres.{workers}")
        p = run.get("jobs_median", f"procrastinate.{workers}")
        r = ratio(s, p)
        rows.append([f"end-to-end jobs/s, {workers} worker process{'es' if workers > 1 else ''}", s, p, r,
                     f">= {PG_VS_PROCRASTINATE:g}x", bc.verdict(None if r is None else r >= PG_VS_PROCRASTINATE)])
    say(bc.table(
        "4. PostgreSQL: skyhub vs Procrastinate (same server, same machine, same run)",
        ["metric", "skyhub", "procrastinate", "skyhub/procr.", "target", ""],
        rows,
        "   Procrastinate latency is always a worker in another process; jobs/s are the medians of table 2.",
    ))


def huey_comparison(run: Run) -> None:
    rows = []
    base = f"huey {HUEY_CONFIGS[0][0]}, {HUEY_CONFIGS[0][1]}"
    for workers in (1, 2):
        s = run.get("jobs_median", f"skyhub sqlite.{workers}")
        for kind, poll in HUEY_CONFIGS:
            h = run.get("jobs_median", f"huey {kind}, {poll}.{workers}")
            r = s / h if s and h else None
            target = f"huey {kind}, {poll}" == base
            rows.append([f"end-to-end jobs/s, {workers} worker{'s' if workers > 1 else ''}", f"{kind} workers, {poll}", s, h, r,
                         f">= {SQLITE_VS_HUEY:g}x" if target else "-",
                         bc.verdict(None if r is None else r >= SQLITE_VS_HUEY) if target else ""])
    say(bc.table(
        "4b. SQLite: skyhub vs huey's SqliteHuey (same jobs, same parent, same machine, same run)",
        ["metric", "huey run as", "skyhub jobs/s", "huey jobs/s", "skyhub/huey", "target", ""],
        rows,
        "   jobs/s are the medians of table 2. skyhub keeps every revision (history), leases and the change feed's\n"
        "   delivery; huey deletes a task when a worker takes it. The target compares with huey's process workers at its\n"
        "   best poll (its fastest in issue 21's measurements).",
    ))


def run_cli(run: Run) -> None:
    a = run.args
    r = run.attempt("cli", f"CLI start: {a.cli_runs} runs each of `skyhub db get` (local SQLite, missing document), "
                    "`skyhub --help` and bare Python", proc.cli_start, a.cli_runs)
    if not r:
        return
    rows = []
    for key, label in (("python", 'python -c "import sqlite3"'), ("db_get", "skyhub db get --db x nope"),
                       ("help", "skyhub --help")):
        c = r[key]
        rows.append([label, c["n"], c["median"], c["p90"], c["min"], c["max"], c.get("ratio")])
    say(bc.table(
        "5. CLI start: wall time of one command, in seconds (a new process each time)",
        ["command", "runs", "median", "p90", "min", "max", "x bare python"],
        rows,
        "   after one warm-up run each; a temporary HOME and folder, the database a SQLite file made beforehand\n"
        "   (SKYHUB_DATABASE_URL); `db get` must exit 5 (not found). x bare python: median / bare Python's median.",
    ))


def run_rss(run: Run) -> None:
    a = run.args
    rows = []
    for key, label, bot, key_set in (("rss.no_bot", "no bot", False, False),
                                      ("rss.no_bot_key", "no bot, vault key set", False, True),
                                      ("rss.bot", "bot configured", True, True)):
        r = run.attempt(key, f"idle hub RSS: skyhub run, {label}, {a.settle:g} s idle after /health", proc.idle_hub, bot,
                        key_set, a.settle)
        if r:
            goal = RSS_MB.get(label)
            rows.append([label, r["rss_at_health_mb"], r["rss_mb"], r["hwm_mb"], r["up_s"], r["health"], r["exit"],
                         f"<= {goal:g}" if goal else "-", bc.verdict(r["rss_mb"] <= goal) if goal else ""])
    say(bc.table(
        "6. Idle hub memory: `skyhub run` on the SQLite default, MB",
        ["hub", "RSS at /health", "RSS idle", "peak (HWM)", "up in s", "/health", "exit", "target", ""],
        rows,
        "   no bot: the defaults on a machine without a keyring (the vault key is looked for, and missing).\n"
        "   vault key set: SKYHUB_VAULT_KEY, as a server has it. bot configured: that, and SKYHUB_BOT__HANDLE, the PDS a\n"
        "   local port where nothing listens. 'exit': after SIGTERM (0 is a clean stop).",
    ))
    r = run.attempt("rss.imports", "RSS of one interpreter importing a hub's packages in turn", proc.import_rss, IMPORTS)
    if r:
        rows, before = [], None
        for name, mb in r:
            rows.append([name, mb, None if before is None else mb - before])
            before = mb
        say(bc.table(
            "6b. Where an idle hub's memory goes: RSS (MB) of one interpreter importing these in turn",
            ["then import", "RSS", "added"],
            rows,
            "   what each adds on top of everything above it; keyring is imported by a hub only when no vault key is set,\n"
            "   platforms.bluesky and bot.* only when the bot is configured.",
        ))


def run_ingest(run: Run) -> None:
    a = run.args
    run.attempt("ingest.warmup", "ingest tick: warm-up (imports the bot's modules, as a hub with the bot does at start)",
                ing.ingest_tick, 50)
    rows = []
    for n in a.ingest_sizes:
        r = run.attempt(f"ingest.{n}", f"ingest tick over {n} new mentions, fake PDS/AppView, fresh SQLite store",
                        ing.ingest_tick, n)
        if r:
            calls = r["http_calls"]
            rows.append([n, r["s"], r["per_s"], r["us_per_mention"], r["reads_per_mention"], r["writes_per_mention"],
                         calls.get("app.bsky.notification.listNotifications", 0), calls.get("app.bsky.feed.getPosts", 0),
                         f"pending-build x{r['outcomes'].get('pending-build', 0)}"])
    done = [run.results[f"ingest.{n}"] for n in a.ingest_sizes if f"ingest.{n}" in run.results]
    linear = (f"\n   linearity: us/mention at {done[-1]['n']:,} / at {done[0]['n']:,} = "
              f"{done[-1]['us_per_mention'] / done[0]['us_per_mention']:.2f}" if len(done) > 1 else "")
    say(bc.table(
        "7. The bot's ingest tick: one run over N new mentions (every one becomes pending-build)",
        ["mentions", "seconds", "mentions/s", "us/mention", "store reads/mention", "writes/mention", "list pages",
         "getPosts", "outcome"],
        rows,
        "   the real tick (bot.ingest.ingest from a tick context, the session from the vault, a fake clock); Bluesky\n"
        "   behind httpx.MockTransport: listNotifications pages of 100, getPosts 25 uris a call. Caps set to N." + linear,
    ))


def targets(run: Run) -> None:
    rows: list[list[Any]] = []

    def add(name: str, measured: float | None, limit: float, higher_is_better: bool, unit: str,
            missing: str = "not measured", strictly: bool = False) -> None:
        if measured is None:
            rows.append([name, None, missing, "-", "-"])
            return
        if strictly:
            ok = measured > limit if higher_is_better else measured < limit
        else:
            ok = measured >= limit if higher_is_better else measured <= limit
        if ok:
            by = "-"
        elif higher_is_better:
            by = f"{limit - measured:.2f}{unit} short ({measured / limit:.0%} of target)"
        else:
            by = f"{measured - limit:.2f}{unit} over ({measured / limit:.1f}x target)"
        cmp = (">" if higher_is_better else "<") + ("" if strictly else "=")
        rows.append([name, measured, f"{cmp} {limit:g}{unit}", bc.verdict(ok), by])

    a = run.args
    for workers in (1, 2):
        s = run.get("jobs_median", f"skyhub postgres.{workers}")
        p = run.get("jobs_median", f"procrastinate.{workers}")
        add(f"postgres jobs/s / procrastinate's, {workers} worker(s)", s / p if s and p else None,
            PG_VS_PROCRASTINATE, True, "x")
    for workers in (1, 2):
        s = run.get("jobs_median", f"skyhub sqlite.{workers}")
        h = run.get("jobs_median", f"huey {HUEY_CONFIGS[0][0]}, {HUEY_CONFIGS[0][1]}.{workers}")
        add(f"sqlite jobs/s / huey's ({HUEY_CONFIGS[0][0]} workers, {HUEY_CONFIGS[0][1]}), {workers} worker(s)",
            s / h if s and h else None, SQLITE_VS_HUEY, True, "x")
    one, two = run.get("jobs_median", "skyhub sqlite.1"), run.get("jobs_median", "skyhub sqlite.2")
    add("sqlite jobs/s, 2 workers / 1 worker (2 must be faster)", two / one if one and two else None, SQLITE_TWO_VS_ONE,
        True, "x", strictly=True)
    add("sqlite jobs/s, 1 worker process", run.get("jobs_median", "skyhub sqlite.1"), SQLITE_JOBS_PER_S, True, "")
    for key, how, mode in (("latency", "back to back", "back to back"),
                           ("latency_spaced", f"writes {a.gap_ms:g} ms apart", "spaced")):
        for backend in BACKENDS:
            lat = run.get(f"{key}.{backend}", "from_commit")
            for stat, limit in zip(("p50", "p99"), TARGETS[backend][mode], strict=True):
                add(f"{backend} commit-to-handler {stat}, in-process, {how}", lat[stat] if lat else None, limit, False, " ms")
    cross = run.get("latency_cross.sqlite", "from_return")
    for stat, limit in zip(("p50", "p99"), CROSS_SQLITE, strict=True):
        add(f"sqlite commit-to-handler {stat}, handler in another process", cross[stat] if cross else None, limit, False,
            " ms")
    get, helped = run.get("cli", "db_get"), run.get("cli", "help")
    add("`skyhub db get` (local SQLite, missing doc) median", get["median"] if get else None, DB_GET_S, False, " s")
    add("`skyhub db get` median / bare python's", get["ratio"] if get else None, DB_GET_VS_PYTHON, False, "x")
    add("`skyhub --help` median", helped["median"] if helped else None, HELP_S, False, " s")
    for label, goal in RSS_MB.items():
        r = run.get(f"rss.{'bot' if label == 'bot configured' else 'no_bot'}")
        add(f"idle hub RSS, {label}", r["rss_mb"] if r else None, goal, False, " MB")
    sizes = [n for n in a.ingest_sizes if run.get(f"ingest.{n}")]
    if sizes:
        big, small = run.results[f"ingest.{sizes[-1]}"], run.results[f"ingest.{sizes[0]}"]
        limit = INGEST_S * big["n"] / INGEST_N
        scaled = "" if big["n"] == INGEST_N else f" (target scaled from {INGEST_S:g} s at {INGEST_N:,})"
        add(f"ingest tick, {big['n']:,} new mentions{scaled}", big["s"], limit, False, " s")
        add(f"ingest tick linearity: us/mention at {big['n']:,} / at {small['n']:,}",
            big["us_per_mention"] / small["us_per_mention"] if len(sizes) > 1 else None, INGEST_LINEAR, False, "x")
    else:
        add(f"ingest tick, {INGEST_N:,} new mentions", None, INGEST_S, False, " s")
        add("ingest tick linearity", None, INGEST_LINEAR, False, "x")
    for backend in BACKENDS:
        for where in ("in", "cross"):
            rec = run.get(f"recovery.{backend}.{where}", "commit")
            label = "same process" if where == "in" else "other process"
            add(f"{backend} recovery max, sweeper in {label}", rec["max"] if rec else None, RECOVERY_MS, False, " ms")
    say(bc.table("Targets", ["target", "measured", "limit", "", "by how much"], rows))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    p.add_argument("--samples", type=int, help="latency samples, feed in-process, back to back (default 2000; quick 200)")
    p.add_argument("--warmup", type=int, help="latency warm-up writes, not counted (default 200; quick 30)")
    p.add_argument("--spaced-samples", type=int, help="latency samples with writes --gap-ms apart (default 1000; quick 100)")
    p.add_argument("--gap-ms", type=float, default=10.0, help="the pause between writes for the spaced latency run")
    p.add_argument("--cross-samples", type=int,
                   help="latency samples with the handler in another process, skyhub and Procrastinate (default 1000)")
    p.add_argument("--cross-budget", type=float, help="seconds of measuring at most for each of those (default 20; quick 5)")
    p.add_argument("--jobs", type=int, help="jobs per end-to-end run on SQLite (default 5000; quick 300)")
    p.add_argument("--pg-jobs", type=int, help="jobs per end-to-end run on PostgreSQL, skyhub and Procrastinate (default 1500)")
    p.add_argument("--repeat", type=int, help="end-to-end runs per configuration, interleaved; median reported (default 3)")
    p.add_argument("--recoveries", type=int, help="lease expiries per recovery measurement (default 20; quick 5)")
    p.add_argument("--lease-ms", type=int, default=200, help="the short lease for the recovery measurement")
    p.add_argument("--cli-runs", type=int, help="timed runs of each CLI command, after one warm-up (default 15; quick 5)")
    p.add_argument("--settle", type=float, help="seconds an idle hub is left alone before its RSS is read (default 3)")
    p.add_argument("--ingest-sizes", help="comma-separated mention counts for the ingest tick (default 1000,5000,10000; "
                   "quick 500,1000,2000)")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: sqlite,postgres")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated: {','.join(SECTIONS)}")
    p.add_argument("--json", metavar="PATH", help="also write every figure as JSON to PATH")
    p.add_argument("-v", "--verbose", action="store_true", help="tracebacks for failed measurements")
    args = p.parse_args(argv)
    args.backends = [b for b in args.backends.split(",") if b]
    args.sections = [s for s in args.sections.split(",") if s]
    for b in args.backends:
        if b not in BACKENDS:
            p.error(f"unknown backend {b!r}")
    for s in args.sections:
        if s not in SECTIONS:
            p.error(f"unknown section {s!r}")
    sizes(args)
    return args


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: schemas dropped, children stopped


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _terminate)
    atexit.register(bc.kill_all_children)
    run = Run(args)
    started = time.monotonic()
    say("skyhub benchmarks" + (" (--quick)" if args.quick else ""))
    machine = bc.machine_description()
    say(bc.table("Machine", ["", ""], machine))
    say(f"sizes: latency {args.samples} samples (+{args.warmup} warm-up), {args.spaced_samples} spaced "
        f"{args.gap_ms:g} ms apart, {args.cross_samples} (or {args.cross_budget:g} s) cross-process; "
        f"end-to-end {args.jobs} jobs (SQLite) / {args.pg_jobs} (PostgreSQL) x {args.repeat} runs; "
        f"{args.recoveries} lease expiries of {args.lease_ms} ms; CLI {args.cli_runs} runs per command; idle hub "
        f"{args.settle:g} s; ingest {', '.join(f'{n:,}' for n in args.ingest_sizes)} mentions\n")
    try:
        if "latency" in args.sections:
            run_latency(run)
        if "jobs" in args.sections:
            run_jobs(run)
        if "recovery" in args.sections:
            run_recovery(run)
        if "procrastinate" in args.sections and "postgres" in args.backends:
            comparison(run)
        if "huey" in args.sections and "sqlite" in args.backends and "jobs" in args.sections:
            huey_comparison(run)
        if "cli" in args.sections:
            run_cli(run)
        if "rss" in args.sections:
            run_rss(run)
        if "ingest" in args.sections:
            run_ingest(run)
        targets(run)
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    finally:
        bc.kill_all_children()
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": dict(machine), "args": vars(args), "results": run.results,
                           "errors": run.errors}, f, indent=2, default=str)
    load = os.getloadavg()
    say(f"finished in {time.monotonic() - started:.0f} s; load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if run.errors:
        say("\nFAILED measurements:")
        for e in run.errors:
            say(f"  {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
