"""``skyhub errors`` and ``skyhub db bulk`` as an operator runs them: a subprocess on the local file and
against a running hub, with their exit codes and one-line errors for a bad filter or an unknown database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from skyhub_testkit.hub import ROOT, Hub


def skyhub(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hub", *args], env={**os.environ, "PYTHONPATH": str(ROOT), **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def _seed(run) -> None:  # noqa: ANN001
    for i in range(4):
        job = {"type": "job", "status": "failed", "input": {"n": i}, "attempts": 3, "lastError": f"timed out after {i + 30} s (job {i})"}
        assert run("db", "put", "--db", "jobs", "--as", "admin", "--id", f"job-{i}", json.dumps(job)).returncode == 0
    other = {"type": "job", "status": "failed", "input": {}, "attempts": 3, "lastError": "disk full"}
    assert run("db", "put", "--db", "jobs", "--as", "admin", "--id", "job-x", json.dumps(other)).returncode == 0


def _operate(run) -> None:  # noqa: ANN001
    found = run("errors", "--db", "jobs", "--json")
    assert found.returncode == 0, found.stderr
    groups = json.loads(found.stdout)
    assert [g["count"] for g in groups] == [4, 1] and groups[0]["pattern"] == "timed out after <n> s (job <n>)"
    fp = groups[0]["fingerprint"]

    dry = run("db", "bulk", "retry", "--db", "jobs", "--status", "failed", "--error", fp, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert (json.loads(dry.stdout)["matched"], json.loads(dry.stdout)["audit"]) == (4, None)

    stale = run("db", "bulk", "retry", "--db", "jobs", "--status", "failed", "--error", fp, "--expect", "0" * 16)  # not this set
    assert stale.returncode == 3 and stale.stderr.strip().count("\n") == 0, stale.stderr
    assert f"4 documents match now (digest {json.loads(dry.stdout)['digest']}); nothing was written" in stale.stderr
    assert json.loads(run("errors", "--db", "jobs", "--json").stdout)[0]["count"] == 4  # nothing moved
    bad_digest = run("db", "bulk", "retry", "--db", "jobs", "--expect", "nope")
    assert bad_digest.returncode == 2 and "--expect takes the 16-character digest" in bad_digest.stderr

    done = run("db", "bulk", "retry", "--db", "jobs", "--status", "failed", "--error", fp, "--json",
               "--expect", json.loads(dry.stdout)["digest"])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["written"], out["refused"], sorted(out["ids"])) == (4, 0, [f"job-{i}" for i in range(4)]) and out["audit"]
    left = json.loads(run("errors", "--db", "jobs", "--json").stdout)
    assert [(g["count"], g["pattern"]) for g in left] == [(1, "disk full")]

    bad = run("db", "bulk", "retry", "--db", "jobs", "--field", "platform")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0 and "a field filter needs both --field and --key" in bad.stderr
    unknown = run("db", "bulk", "retry", "--db", "nosuchdb", "--status", "failed")
    assert unknown.returncode == 5 and unknown.stderr.strip().count("\n") == 0 and "nosuchdb" in unknown.stderr


def test_errors_and_bulk_retry_on_the_local_file(tmp_path: Path) -> None:
    env = {"SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/skyhub.db", "USER": "ana"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return skyhub(*args, env=env, cwd=tmp_path)

    _seed(run)
    _operate(run)


def test_errors_and_bulk_retry_against_a_hub(tmp_path: Path) -> None:
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False)
    try:
        for i in range(4):
            hub.admin.put("jobs", {"type": "job", "status": "failed", "input": {"n": i}, "attempts": 3,
                                   "lastError": f"timed out after {i + 30} s (job {i})"}, f"job-{i}", actor="admin")
        hub.admin.put("jobs", {"type": "job", "status": "failed", "input": {}, "attempts": 3, "lastError": "disk full"}, "job-x",
                      actor="admin")
        env = {"SKYHUB_TOKEN": hub.token("ana")}

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return skyhub("--hub", hub.url, *args, env=env, cwd=tmp_path)

        _operate(run)
        assert hub.admin.history("jobs", "job-0")[-1].actor == "user:ana"
    finally:
        hub.close_clients()
        hub.stop()
