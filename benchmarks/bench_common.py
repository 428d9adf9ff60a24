"""Shared helpers for the benchmarks: statistics, aligned tables, the machine description,
throw-away PostgreSQL schemas and databases, SQLite temp files, and child processes that
are always cleaned up."""

from __future__ import annotations

import math
import multiprocessing
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

PG_URL = os.environ.get("SKYHUB_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

# Child processes are started with "spawn": the parent runs threads (store pollers,
# listeners) and forking a threaded process is unsafe.
SPAWN = multiprocessing.get_context("spawn")


# ---- statistics ----------------------------------------------------------------------
def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of ``values``; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary_ms(values_ns: Sequence[int]) -> dict[str, float]:
    """p50/p90/p99/max/mean in milliseconds of nanosecond samples."""
    ms = [v / 1e6 for v in values_ns]
    return {
        "n": len(ms),
        "p50": percentile(ms, 50),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "max": max(ms) if ms else math.nan,
        "mean": sum(ms) / len(ms) if ms else math.nan,
        "over_100ms": sum(1 for v in ms if v > 100),
    }


# ---- tables --------------------------------------------------------------------------
def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], note: str | None = None) -> str:
    """A plain-text table: text columns left-aligned, numeric columns right-aligned."""
    cells = [[fmt(c) for c in row] for row in rows]
    numeric = [
        all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) if rows else False
        for i in range(len(headers))
    ]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        out = []
        for i, v in enumerate(values):
            out.append(v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]))
        return "  ".join(out).rstrip()

    parts = [title, "=" * len(title), line(headers), line(["-" * w for w in widths])]
    parts += [line(r) for r in cells]
    if note:
        parts.append(note)
    return "\n".join(parts) + "\n"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("PASS" if ok else "MISS")


# ---- the machine ---------------------------------------------------------------------
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def scalar(cursor: Any) -> Any:
    """The first column of the first row of an executed query."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the query returned no row")
    return row[0]


def pg_server_version() -> str:
    import psycopg

    try:
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=5) as conn:
            return str(scalar(conn.execute("SHOW server_version")))
    except psycopg.Error as exc:
        return f"unreachable ({str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__})"


def package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def skyhub_revision() -> str:
    """The checkout's commit, and whether the engine has uncommitted changes (read-only git)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "ledger", "hub"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not head:
        return "unknown (no commit)"
    return head + (" + uncommitted changes in ledger/ or hub/" if dirty else "")


def machine_description() -> list[tuple[str, str]]:
    load = os.getloadavg()
    return [
        ("skyhub", skyhub_revision()),
        ("CPU", cpu_model()),
        ("cores", f"{os.cpu_count()} (usable: {len(os.sched_getaffinity(0))})"),
        ("kernel", platform.release()),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()})"),
        ("SQLite", sqlite3.sqlite_version),
        ("PostgreSQL", pg_server_version()),
        ("psycopg", package_version("psycopg")),
        ("procrastinate", package_version("procrastinate")),
        ("huey", package_version("huey")),
        ("load average", f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1/5/15 min, at start)"),
    ]


# ---- throw-away databases ------------------------------------------------------------
def _with_options(url: str, options: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}{options}"


@contextmanager
def pg_schema(prefix: str = "bench") -> Iterator[str]:
    """A URL whose search_path is a new, empty schema in the test database; dropped after."""
    import psycopg

    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _with_options(PG_URL, f"options=-csearch_path%3D{schema}")
    finally:
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@contextmanager
def pg_database(prefix: str = "bench") -> Iterator[str]:
    """A URL of a new, empty database on the test server; dropped (forcibly) after."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(PG_URL)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(PG_URL, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def sqlite_file() -> Iterator[str]:
    """A ``sqlite:///`` URL of a new file in a temporary folder; the folder is removed after."""
    folder = tempfile.mkdtemp(prefix="skyhub-bench-")
    try:
        yield f"sqlite:///{folder}/bench.db"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---- child processes -----------------------------------------------------------------
_children: list[Any] = []


def start_child(target: Any, *args: Any, name: str, daemon: bool = True) -> Any:
    """A spawned child, stopped at the end of the run whatever happens (``daemon=False`` for
    one that starts processes of its own: ``kill_all_children`` still ends it)."""
    proc = SPAWN.Process(target=target, args=args, name=name, daemon=daemon)
    proc.start()
    _children.append(proc)
    return proc


def stop_children(procs: Sequence[Any], stop_event: Any | None = None, timeout: float = 15.0) -> list[int | None]:
    """Ask children to stop (event), then terminate, then kill; returns their exit codes."""
    if stop_event is not None:
        stop_event.set()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.1, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)
    for p in procs:
        if p in _children:
            _children.remove(p)
    return [p.exitcode for p in procs]


def kill_all_children() -> None:
    """Last resort (atexit / signal): end every child this run started."""
    for p in list(_children):
        try:
            if p.is_alive():
                p.terminate()
                p.join(3)
            if p.is_alive():
                p.kill()
                p.join(3)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    _children.clear()


def check_alive(procs: Sequence[Any]) -> None:
    for p in procs:
        if not p.is_alive():
            raise RuntimeError(f"child process {p.name} exited early (exit code {p.exitcode})")


def wait_for_count(
    count: Callable[[], int], target: int, procs: Sequence[Any], timeout: float, *, what: str,
    explain: Callable[[], str] | None = None, stall: float = 60.0,
) -> float:
    """Until ``count()`` reaches ``target`` (each system's "N done" loop): returns the wall time it
    did; fails when a child died, after ``timeout`` seconds, or after ``stall`` seconds without
    progress, saying ``"<done> of <target> <what>, <why>"`` and ``explain()``'s details."""
    deadline = time.monotonic() + timeout
    last, last_change = -1, time.monotonic()
    while True:
        done = count()
        if done >= target:
            return time.time()
        if done != last:
            last, last_change = done, time.monotonic()
        check_alive(procs)
        now = time.monotonic()
        if now > deadline or now - last_change > stall:
            why = f"after {timeout:g} s" if now > deadline else f"no progress for {stall:g} s"
            details = f"; {explain()}" if explain is not None else ""
            raise TimeoutError(f"{done} of {target} {what}, {why}{details}")
        time.sleep(0.05)


def wait_ready(ready: Any, count: int, procs: Sequence[Any], timeout: float = 60.0) -> None:
    """Wait until ``count`` children have put something on the ``ready`` queue."""
    import queue as _queue

    deadline = time.monotonic() + timeout
    got = 0
    while got < count:
        check_alive(procs)
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {got} of {count} child processes became ready within {timeout:g} s")
        try:
            msg = ready.get(timeout=0.2)
        except _queue.Empty:
            continue
        if isinstance(msg, tuple) and msg and msg[0] == "error":
            raise RuntimeError(f"child process failed to start: {msg[1]}")
        got += 1


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (the peak) of process ``pid``, in kB, from /proc."""
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                got[key] = int(value.split()[0])
    return got


def stop_process(proc: subprocess.Popen[Any], timeout: float = 30.0) -> int | None:
    """Ask a child process to stop (SIGTERM), kill it after ``timeout`` s; its exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode
