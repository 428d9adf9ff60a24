"""The publish tick in real processes (``skyhub tick publish``) on one store, SQLite and
PostgreSQL, with a local HTTP server standing in for Meta: two ticks racing publish once, and a
tick killed with SIGKILL between ``media_publish`` and its ``done`` write leaves one post."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from hub.app import build_rules
from ledger import SYSTEM, Ledger, open_store
from publishers.queue import new_request, queue
from publishers.validate import Admission
from skyhub_testkit.fakemeta import FakeMeta
from skyhub_testkit.hub import ROOT
from vault import Vault, new_key_text, parse_key

pytestmark = pytest.mark.slow
IG = "17841400000000000"


@pytest.fixture
def world(backend_url, tmp_path):
    store = open_store(backend_url, build_rules(), SYSTEM)
    key_text = new_key_text()
    maya = Ledger(store, "user:maya", SYSTEM)
    Vault(maya, parse_key(key_text, "test")).put("instagram", IG, {"accessToken": "good-token"})
    head = store.get("vault", f"instagram:{IG}")
    store.put("vault", {**head, "status": "ok"}, actor="admin")
    meta = FakeMeta(SYSTEM.now_ms)
    server = meta.serve()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_DATABASE_URL": backend_url, "SKYHUB_VAULT_KEY": key_text,
           "SKYHUB_PLATFORMS__INSTAGRAM_URL": server.url, "SKYHUB_PLATFORMS__TIMEOUT": "2s", "SKYHUB_JOBS__ENABLED": "false",
           "SKYHUB_LOG_LEVEL": "WARNING"}

    class World:
        pass

    w = World()
    w.store, w.meta, w.env, w.tmp = store, meta, env, tmp_path
    w.doc_id = queue(maya, new_request("ig", account=IG, slug="race", caption="Once", images=[
        {"url": "https://cdn.example.org/p/1.jpg", "alt": "one"}], now_ms=SYSTEM.now_ms()), admission=Admission())[0]["_id"]

    def tick(**kwargs):
        return subprocess.Popen([sys.executable, "-m", "hub", "tick", "publish"], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)

    def finish(proc):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        return json.loads(out)

    w.tick, w.finish = tick, finish
    assert finish(tick())["outcome"] == "ok"  # the container
    assert store.get("requests", w.doc_id)["status"] == "carousel-created"
    yield w
    server.stop()
    store.close()


def test_two_ticks_racing_in_two_processes_publish_once(world):
    arrived = threading.Barrier(2, timeout=60)
    world.meta.before["limit"] = arrived.wait  # both have read the request and the container before either writes
    first, second = world.tick(), world.tick()
    assert world.finish(first)["outcome"] == "ok" and world.finish(second)["outcome"] == "ok"
    d = world.store.get("requests", world.doc_id)
    assert d["status"] == "done" and world.meta.calls["publish"] == 1 and len(world.meta.live()) == 1
    assert world.meta.calls["limit"] == 2
    intents = [c for c in world.store.history("requests", world.doc_id) if (c.doc.get("intent") or {}).get("step") == "publish"]
    assert len(intents) == 1  # one process won the intent; the other got a conflict and left it


def test_a_tick_killed_between_media_publish_and_done_leaves_one_post(world):
    published, release = threading.Event(), threading.Event()

    def hang():
        published.set()
        release.wait(60)

    world.meta.on_publish = hang
    proc = world.tick()
    assert published.wait(90), "the tick never published"
    proc.kill()  # SIGKILL: nothing after media_publish runs
    proc.communicate(timeout=30)
    release.set()
    world.meta.on_publish = None
    d = world.store.get("requests", world.doc_id)
    assert d["status"] == "carousel-created" and d["intent"]["step"] == "publish" and len(world.meta.live()) == 1
    assert world.finish(world.tick())["outcome"] == "ok"
    d = world.store.get("requests", world.doc_id)
    assert d["status"] == "done" and d["mediaId"] == world.meta.live()[0].id
    assert world.meta.calls["publish"] == 1 and world.meta.calls["recent"] == 1


def test_a_tick_killed_between_the_first_comment_and_its_record_leaves_one_comment(world):
    """The comment is posted, the process dies before it writes ``commented``: the next run finds the comment
    among the media's comments and records it, without commenting again."""
    maya = Ledger(world.store, "user:maya", SYSTEM)
    doc_id = queue(maya, new_request("ig", account=IG, slug="said", caption="Said once", first_comment="Link in bio",
                                     images=[{"url": "https://cdn.example.org/p/2.jpg", "alt": "two"}],
                                     now_ms=SYSTEM.now_ms()), admission=Admission())[0]["_id"]
    for _ in range(3):  # its container, and the first post's publish; then its own publish
        assert world.finish(world.tick())["outcome"] == "ok"
        if world.store.get("requests", doc_id)["status"] == "done":
            break
    assert world.store.get("requests", doc_id)["commentDue"] is True
    commented, release = threading.Event(), threading.Event()

    def hang():
        commented.set()
        release.wait(60)

    world.meta.after["comment"] = hang
    proc = world.tick()
    assert commented.wait(90), "the tick never commented"
    proc.kill()  # SIGKILL: nothing after the comment call runs
    proc.communicate(timeout=30)
    release.set()
    del world.meta.after["comment"]
    d = world.store.get("requests", doc_id)
    assert d["status"] == "done" and d["intent"]["step"] == "comment" and len(world.meta.comments) == 1
    assert world.finish(world.tick())["outcome"] == "ok"
    d = world.store.get("requests", doc_id)
    assert d["status"] == "commented" and d["commentId"] == world.meta.comments[0].id
    assert world.meta.calls["comment"] == 1 and len(world.meta.comments) == 1
