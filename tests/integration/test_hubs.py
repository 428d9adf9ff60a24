"""Two `skyhub run` processes on one PostgreSQL, jobs injected by the CLI through one of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from skyhub_testkit.hub import ROOT, Hub
from tests.integration.test_processes import _all, check_done_exactly_once

pytestmark = pytest.mark.slow
FAST = {"SKYHUB_JOBS__LEASE": "2s", "SKYHUB_FEED__LEASE": "1s", "SKYHUB_SWEEP__SAFETY_INTERVAL": "1s", "SKYHUB_FEED__BACKOFF": "100ms"}


def inject(hub_url, token, n, cwd):
    lines = "\n".join(json.dumps({"_id": f"job{i:04d}", "type": "job", "status": "pending", "input": {"i": i}}) for i in range(n))
    env = {**os.environ, "SKYHUB_HUB_URL": hub_url, "SKYHUB_TOKEN": token, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "hub", "db", "put", "--db", "jobs", "--lines", "-"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
    ), lines


def wait_done(store, n, timeout=120):
    deadline = time.monotonic() + timeout
    while sum(1 for _ in _all(store, "done")) < n:
        assert time.monotonic() < deadline, {s: sum(1 for _ in _all(store, s)) for s in ("pending", "running", "done", "failed")}
        time.sleep(0.2)


def test_two_hubs_share_200_jobs_and_survive_kill_9_of_one(pg_url, tmp_path):
    a = Hub(pg_url, tmp_path, env=FAST)
    b = Hub(pg_url, tmp_path, env=FAST)
    try:
        token = a.token("ops")
        proc, lines = inject(a.url, token, 200, tmp_path)
        out, err = proc.communicate(lines, timeout=120)
        assert proc.returncode == 0, err
        assert len(out.splitlines()) == 200
        wait_done(a.admin, 200)
        ids = [f"job{i:04d}" for i in range(200)]
        check_done_exactly_once(a.admin, ids)
        pids = {a.admin.get("jobs", i)["result"]["pid"] for i in ids}
        assert len(pids) == 2, "both hubs should have done some of the work"

        # second round: kill -9 hub B while it is working
        lines = "\n".join(json.dumps({"_id": f"more{i:04d}", "type": "job", "status": "pending", "input": {"i": i}}) for i in range(200))
        proc, _ = inject(a.url, token, 0, tmp_path)
        proc.stdin.write(lines)
        proc.stdin.close()
        deadline = time.monotonic() + 60
        while True:
            done_by_b = [d for d in _all(a.admin, "done") if d["_id"].startswith("more") and d["result"]["pid"] == b.proc.pid]
            if len(done_by_b) >= 5:
                break
            assert time.monotonic() < deadline, "hub B never took work"
            time.sleep(0.01)
        b.kill()
        assert proc.wait(120) == 0, proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        wait_done(a.admin, 400)
        more = [f"more{i:04d}" for i in range(200)]
        check_done_exactly_once(a.admin, more)
        assert a.admin.query("jobs", "status", "failed").docs == []
    finally:
        b.stop()
        assert a.stop() == 0
