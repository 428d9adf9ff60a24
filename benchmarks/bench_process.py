"""What a person and a server feel of skyhub as a program: how long the CLI takes to start
(`skyhub db get` on a local SQLite file, `skyhub --help`, against bare Python), and how much
memory an idle `skyhub run` holds, with and without the bot configured.

Every command runs as a subprocess of the installed entry point (`.venv/bin/skyhub`, the
interpreter beside the one running this script) in a temporary folder, with HOME pointed
there and every SKYHUB_* variable of the caller's environment removed, so no user settings
leak in; the database is named with SKYHUB_DATABASE_URL, as the README documents.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import bench_common as bc

BIN = os.path.dirname(sys.executable)
SKYHUB = os.path.join(BIN, "skyhub")
EXIT_NOT_FOUND = 5  # the CLI's exit code for "not found" (README: exit codes)


@contextmanager
def sandbox() -> Iterator[tuple[str, dict[str, str]]]:
    """A temporary folder and an environment for skyhub in it: HOME there, no SKYHUB_* from the
    caller, the database a SQLite file in the folder."""
    folder = tempfile.mkdtemp(prefix="skyhub-bench-proc-")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SKYHUB_")}
    env.update({"HOME": folder, "SKYHUB_DATABASE_URL": f"sqlite:///{folder}/hub.db", "SKYHUB_LOG_LEVEL": "WARNING"})
    # The skyhub measured is this checkout's, not whichever one the venv's editable install
    # points at: a bench run from a worktree must time the worktree's code.
    env["PYTHONPATH"] = str(pathlib.Path(__file__).resolve().parent.parent)
    try:
        yield folder, env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _timed(argv: Sequence[str], env: dict[str, str], cwd: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter_ns()
    proc = subprocess.run(list(argv), env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    return (time.perf_counter_ns() - started) / 1e9, proc


def _series(argv: Sequence[str], env: dict[str, str], cwd: str, runs: int, expect: int, says: str = "") -> dict[str, Any]:
    """One warm-up run, then ``runs`` timed runs; each must exit ``expect`` (and say ``says``)."""
    times = []
    for i in range(runs + 1):
        took, proc = _timed(argv, env, cwd)
        if proc.returncode != expect or (says and says not in (proc.stdout + proc.stderr).lower()):
            raise RuntimeError(f"{' '.join(argv[-4:])} exited {proc.returncode} (expected {expect}"
                               f"{', saying ' + repr(says) if says else ''}): {(proc.stderr or proc.stdout).strip()[:300]}")
        if i:
            times.append(took)
    return {"n": runs, "median": statistics.median(times), "p90": bc.percentile(times, 90), "min": min(times),
            "max": max(times), "runs": times}


def cli_start(runs: int) -> dict[str, Any]:
    """Wall time of `skyhub db get --db x nope` (a missing document in a local SQLite file made
    beforehand), of `skyhub --help`, and of `python -c "import sqlite3"` with the same interpreter."""
    with sandbox() as (folder, env):
        made = subprocess.run([SKYHUB, "db", "put", "--db", "x", '{"v": 1}'], env=env, cwd=folder, capture_output=True,
                              text=True, timeout=60)
        if made.returncode != 0:
            raise RuntimeError(f"could not make the database: {made.stderr.strip()[:300]}")
        out = {
            "python": _series([sys.executable, "-c", "import sqlite3"], env, folder, runs, 0),
            "db_get": _series([SKYHUB, "db", "get", "--db", "x", "nope"], env, folder, runs, EXIT_NOT_FOUND, "not_found"),
            "help": _series([SKYHUB, "--help"], env, folder, runs, 0, "usage"),
        }
    out["db_get"]["ratio"] = out["db_get"]["median"] / out["python"]["median"]
    out["help"]["ratio"] = out["help"]["median"] / out["python"]["median"]
    return out


# ---- idle hub ----------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _health(url: str) -> int | None:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)  # 503 is an answer too: the hub is up and says what is down
    except OSError:
        return None


def idle_hub(bot: bool, vault_key: bool, settle_s: float) -> dict[str, Any]:
    """RSS of an idle `skyhub run` on the SQLite default: started, /health answered, ``settle_s``
    seconds left alone, then VmRSS/VmHWM read from /proc; then SIGTERM, which must end it cleanly.

    ``bot``: a bot handle is set, with the Bluesky PDS setting pointed at a local port where
    nothing listens (the hub must start without reaching the internet). ``vault_key``: a master
    key in SKYHUB_VAULT_KEY, as a server without an OS keyring has it (else the hub probes the
    keyring at start and says the vault has no key)."""
    with sandbox() as (folder, env):
        port = free_port()
        if bot:
            env["SKYHUB_BOT__HANDLE"] = "skybot.test"
            env["SKYHUB_PLATFORMS__BLUESKY_PDS"] = f"http://127.0.0.1:{free_port()}"
        if vault_key:
            from vault import new_key_text

            env["SKYHUB_VAULT_KEY"] = new_key_text()
        log_path = os.path.join(folder, "hub.log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen([SKYHUB, "run", "--port", str(port)], env=env, cwd=folder, stdout=log,
                                    stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            started = time.monotonic()
            status = None
            while status is None:
                if proc.poll() is not None:
                    raise RuntimeError(f"skyhub run exited {proc.returncode}: {_tail(log_path)}")
                if time.monotonic() - started > 60:
                    raise TimeoutError(f"/health did not answer within 60 s: {_tail(log_path)}")
                time.sleep(0.05)
                status = _health(url)
            up_s = time.monotonic() - started
            at_health = bc.memory_kb(proc.pid)
            time.sleep(settle_s)
            if proc.poll() is not None:
                raise RuntimeError(f"skyhub run exited {proc.returncode} while idle: {_tail(log_path)}")
            settled = bc.memory_kb(proc.pid)
        finally:
            code = bc.stop_process(proc)
        if code != 0:
            raise RuntimeError(f"skyhub run did not stop cleanly on SIGTERM (exit {code}): {_tail(log_path)}")
    return {"rss_mb": settled["VmRSS"] / 1024, "hwm_mb": settled["VmHWM"] / 1024,
            "rss_at_health_mb": at_health["VmRSS"] / 1024, "health": status, "up_s": up_s, "exit": code}


def _tail(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()[-600:].strip()
    except OSError:
        return "(no log)"


def import_rss(modules: Sequence[str]) -> list[tuple[str, float]]:
    """RSS (MB) of one interpreter importing ``modules`` one after another, read after each: what
    each adds on top of those before it (the order of a hub's start)."""
    probe = ("import importlib, sys\n"
             "def rss():\n    return [l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1]\n"
             "print('(bare python)', rss())\n"
             "for m in sys.argv[1].split(','):\n    importlib.import_module(m)\n    print(m, rss())\n")
    with sandbox() as (folder, env):
        proc = subprocess.run([sys.executable, "-c", probe, ",".join(modules)], env=env, cwd=folder, capture_output=True,
                              text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"importing failed: {proc.stderr.strip()[-300:]}")
    return [(name, int(kb) / 1024) for name, kb in (line.rsplit(" ", 1) for line in proc.stdout.strip().splitlines())]
