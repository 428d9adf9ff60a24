"""The builder lane against a real hub over HTTP, signing as a device."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hub.auth import approve_device, new_device_key, private_key_to_pem, public_key_of
from skyhub_testkit.hub import ROOT, Hub


def test_skyhub_build_run_against_a_hub_with_a_device_credential(tmp_path):
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False)
    try:
        key = new_device_key()
        approve_device(hub.admin, "gha-builder", "device:builder", public_key_of(key), clock=hub.clock)
        ids = []
        for i, text in enumerate(["@skybot.test make me a pomodoro timer", "@skybot.test a to-do list please"]):
            uri = f"at://did:plc:alice/app.bsky.feed.post/3kb{i}"
            doc = {"kind": "mention", "status": "pending-build", "uri": uri, "cid": f"bafy{i}", "text": text, "authorDid": "did:plc:alice",
                   "root": {"uri": uri, "cid": f"bafy{i}"}, "parent": {"uri": uri, "cid": f"bafy{i}"}, "attempts": 0}
            ids.append(hub.admin.put("requests", doc, f"did:plc:alice:3kb{i}", actor="tick:ingest", create_only=True)["_id"])
        env = {
            **os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_HUB_URL": hub.url, "SKYHUB_DEVICE": "gha-builder",
            "SKYHUB_DEVICE_KEY": private_key_to_pem(key), "SKYHUB_BUILD_OUT": str(tmp_path / "site"),
            "SKYHUB_BUILD_BASE_URL": "https://owner.github.io/builds", "SKYHUB_BOT__CODEGEN": f"{sys.executable} -m bot.codegen",
        }
        proc = subprocess.run([sys.executable, "-m", "hub", "build", "run", "--max", "5"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {"built": 2}
        assert "[1/5] building" in proc.stderr and "built: https://owner.github.io/builds/" in proc.stderr
        assert "PRIVATE KEY" not in proc.stderr + proc.stdout
        for doc_id in ids:
            doc = hub.admin.get("requests", doc_id)
            assert doc["status"] == "built" and doc["result"]["url"].startswith("https://owner.github.io/builds/did-plc-alice-3kb")
            assert [(c.doc["status"], c.actor) for c in hub.admin.history("requests", doc_id)] == [
                ("pending-build", "tick:ingest"), ("building", "device:builder"), ("built", "device:builder")]
        assert len(list((tmp_path / "site").glob("*/index.html"))) == 2
        again = subprocess.run([sys.executable, "-m", "hub", "build", "run"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        assert json.loads(again.stdout) == {} and "nothing to build" in again.stderr
        # the lane signs for the URL it was given; the hub checks against its own public URL
        elsewhere = hub.url.replace("127.0.0.1", "localhost")
        wrong = subprocess.run([sys.executable, "-m", "hub", "build", "run"], capture_output=True, text=True,
                               env={**env, "SKYHUB_HUB_URL": elsewhere}, cwd=tmp_path, timeout=120)
        assert wrong.returncode == 4, wrong.stderr
        assert f"this request was signed for hub '{elsewhere}', but this hub is '{hub.url}'" in wrong.stderr
    finally:
        hub.stop()


def test_the_lane_builds_with_a_language_model_and_keeps_the_days_budget_on_the_hub(tmp_path):
    """`skyhub build run` as a device over the hub's API, the codegen speaking to the test kit's
    fake model: the page is made, checked and written; the mention gets its title and tokens, and
    the day's budget document is written through the API by the device."""
    from skyhub_testkit.fakemodel import FakeModel

    model = FakeModel(key="sk-lane-key-4242")
    served = model.serve()
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False)
    try:
        key = new_device_key()
        approve_device(hub.admin, "gha-builder", "device:builder", public_key_of(key), clock=hub.clock)
        uri = "at://did:plc:alice/app.bsky.feed.post/3kq"
        doc = {"kind": "mention", "status": "pending-build", "uri": uri, "cid": "bafyq", "text": "@skybot.test a tip splitter in euros",
               "authorDid": "did:plc:alice", "authorHandle": "alice.test", "root": {"uri": uri, "cid": "bafyq"},
               "parent": {"uri": uri, "cid": "bafyq"}, "attempts": 0}
        hub.admin.put("requests", doc, "did:plc:alice:3kq", actor="tick:ingest", create_only=True)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SKYHUB_CODEGEN")},
            "PYTHONPATH": str(ROOT), "SKYHUB_HUB_URL": hub.url, "SKYHUB_DEVICE": "gha-builder",
            "SKYHUB_DEVICE_KEY": private_key_to_pem(key), "SKYHUB_BUILD_OUT": str(tmp_path / "site"),
            "SKYHUB_BUILD_BASE_URL": "https://owner.github.io/builds",
            "SKYHUB_CODEGEN__PROVIDER": "openai", "SKYHUB_CODEGEN__BASE_URL": served.url + "/v1", "SKYHUB_CODEGEN__MODEL": "fake-1",
            "SKYHUB_CODEGEN_API_KEY": "sk-lane-key-4242", "SKYHUB_CODEGEN__DAILY_TOKEN_BUDGET": "50000",
        }
        proc = subprocess.run([sys.executable, "-m", "hub", "build", "run"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == {"built": 1}
        assert "sk-lane-key-4242" not in proc.stderr + proc.stdout
        d = hub.admin.get("requests", "did:plc:alice:3kq")
        assert d["status"] == "built" and d["result"]["title"] == "Tip splitter in euros" and d["result"]["browser"] == "loaded"
        assert d["tokens"]["in"] > 0 and d["tokens"]["out"] > 0
        (budget,) = hub.admin.query("bot", "kind", "token-budget").docs
        assert budget["used"] == d["tokens"]["in"] + d["tokens"]["out"] and budget["limit"] == 50000
        assert [c.actor for c in hub.admin.history("bot", budget["_id"])] == ["device:builder"]
        assert [c.body["model"] for c in model.calls] == ["fake-1", "fake-1"]
        page = (tmp_path / "site" / "did-plc-alice-3kq" / "index.html").read_text()
        assert "Content-Security-Policy" in page and "who asked: \u201ca tip splitter in euros\u201d" in page
    finally:
        hub.stop()
        served.stop()
