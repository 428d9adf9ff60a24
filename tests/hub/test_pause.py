"""Pausing as an operator does it, across processes: ``skyhub pause`` (a subprocess on the hub's database)
pauses the publish tick of a running ``skyhub run``, whose runs are then recorded as paused; ``skyhub
status``, ``/metrics`` and ``/v1/pauses`` say so; resuming over the API lets the tick run again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from skyhub_testkit.hub import ROOT, Hub


def skyhub(*args, env):
    return subprocess.run([sys.executable, "-m", "hub", *args], env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                          capture_output=True, text=True, timeout=60)


def wait_for(outcome, hub, since_ms, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = [r for r in hub.admin.tick_runs("publish", limit=5) if r.scheduled_at > since_ms and r.finished_at]
        if runs and runs[0].outcome == outcome:
            return runs[0]
        time.sleep(0.2)
    raise AssertionError(f"no publish run ended {outcome!r}: {hub.admin.tick_runs('publish', limit=5)}")


@pytest.fixture
def hub(backend_url, tmp_path):
    hub = Hub(backend_url, tmp_path, jobs=False, env={"SKYHUB_PUBLISH__EVERY": "1s"})
    yield hub
    hub.close_clients()
    hub.stop()


def test_the_cli_pauses_a_running_hubs_tick_and_the_api_resumes_it(hub, backend_url):
    env = {"SKYHUB_DATABASE_URL": backend_url, "SKYHUB_ACTOR": "user:ana"}
    wait_for("ok", hub, 0)
    done = skyhub("pause", "publish", "--reason", "Meta's API is down", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tick:publish paused"
    paused_at = hub.clock.now_ms()
    wait_for("paused", hub, paused_at)
    time.sleep(1.5)
    assert {r.outcome for r in hub.admin.tick_runs("publish", limit=50) if r.scheduled_at > paused_at + 1000} == {"paused"}

    status = skyhub("status", env=env)
    assert "PAUSED (1)" in status.stdout and "Meta's API is down" in status.stdout, status.stdout
    assert "publish (paused)" in status.stdout
    listed = json.loads(skyhub("pause", "--json", env=env).stdout)
    assert [p["_id"] for p in listed["paused"]] == ["tick:publish"]

    token = hub.token("ops")
    headers = {"Authorization": f"Bearer {token}"}
    metrics = httpx.get(f"{hub.url}/metrics", headers=headers).text
    assert 'skyhub_paused{target="tick:publish"} 1.0' in metrics
    over = httpx.get(f"{hub.url}/v1/pauses", headers=headers).json()
    assert [p["_id"] for p in over["paused"]] == ["tick:publish"] and "publish" in over["ticks"]
    bad = httpx.post(f"{hub.url}/v1/pauses", headers=headers, json={"target": "publsh"})
    assert bad.status_code == 400 and "nothing to pause is named 'publsh'" in bad.json()["reason"]

    resumed = httpx.post(f"{hub.url}/v1/pauses/resume", headers=headers, json={"target": "publish"})
    assert resumed.status_code == 200 and resumed.json()["status"] == "resumed"
    wait_for("ok", hub, hub.clock.now_ms())
    history = [(c.doc["status"], c.actor) for c in hub.admin.history("pauses", "tick:publish")]
    assert history == [("paused", "user:ana"), ("resumed", "user:ops")]
    again = skyhub("resume", "publish", env=env)
    assert again.returncode == 5 and again.stderr.strip() == "skyhub: not_found: tick:publish is not paused"
    assert 'skyhub_paused{target="tick:publish"}' not in httpx.get(f"{hub.url}/metrics", headers=headers).text


def test_an_editor_cannot_pause(hub, backend_url):
    from hub.auth import set_role

    token = hub.token("ed")
    set_role(hub.admin, "ed", "editor", clock=hub.clock)
    refused = httpx.post(f"{hub.url}/v1/pauses", headers={"Authorization": f"Bearer {token}"}, json={"target": "publish"})
    assert refused.status_code == 403, refused.text
    assert not hub.admin.has_db("pauses")
