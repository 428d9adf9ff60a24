"""Mention builds end to end on a real local Bluesky network (@atproto/dev-env): `skyhub run`
ingests the mentions, `skyhub build run` builds them as a device over the hub's API, and the
reply tick answers in each thread. Everything is asserted through the AppView."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from hub.auth import approve_device, new_device_key, private_key_to_pem, public_key_of
from skyhub_testkit.hub import ROOT, Hub
from vault import new_key_text
from vault.remote import RemoteVault


def wait_for(what, check, timeout=90.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_mentions_are_ingested_built_and_replied_to_once(bsky_network, tmp_path):
    net = bsky_network
    bot = net.create_account("skybot.test", "bot-password-1")
    alice, bob, carol, dave = (net.create_account(h) for h in ("alice.test", "bob.test", "carol.test", "dave.test"))
    guardrails = tmp_path / "guardrails.toml"
    guardrails.write_text('per_author_daily = 2\nmax_age = "1h"\n[blocklist]\nhandles = ["carol.test"]\n')

    # the conversation, before the bot starts
    first = net.post(alice, "@skybot.test make me a pomodoro timer", mentions=[bot])
    second = net.post(alice, "@skybot.test make me a todo list", mentions=[bot])
    over_cap = net.post(alice, "@skybot.test and a counter", mentions=[bot])
    thread_root = net.post(alice, "what should we build today?")
    in_thread = net.reply(bob, thread_root, "@skybot.test a dice roller for this thread", mentions=[bot])
    blocked = net.post(carol, "@skybot.test build me anything", mentions=[bot])
    muted_root = net.post(alice, "a thread the bot has muted")
    net.procedure("app.bsky.graph.muteThread", {"root": muted_root.uri}, account=bot)
    in_muted = net.reply(bob, muted_root, "@skybot.test hello in here", mentions=[bot])
    net.process_all()

    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": new_key_text(), "SKYHUB_PLATFORMS__BLUESKY_PDS": net.pds, "SKYHUB_VAULT__EVERY": "1s",
        "SKYHUB_BOT__HANDLE": "skybot.test", "SKYHUB_BOT__GUARDRAILS": str(guardrails),
        "SKYHUB_BOT__INGEST_EVERY": "1s", "SKYHUB_BOT__REPLY_EVERY": "1s", "SKYHUB_LOG_LEVEL": "INFO",
        # the built pages are served on this machine: the operator lets the guarded fetcher check them there
        "SKYHUB_FETCH__ALLOW_HTTP": "true", "SKYHUB_FETCH__ALLOW_NETWORKS": '["127.0.0.1/32"]',
    })
    try:
        ops = hub.client("user:ops")
        meta = RemoteVault(ops).put("bluesky", "skybot.test", bot.password, verify=True)
        assert meta["status"] == "ok" and meta["needsReauth"] is False, meta

        mentions = {"first": first, "second": second, "over_cap": over_cap, "in_thread": in_thread, "blocked": blocked, "in_muted": in_muted}
        ids = {name: f"{ref.uri.split('/')[2]}:{ref.uri.split('/')[-1]}" for name, ref in mentions.items()}

        def ingested():
            docs = {}
            for name, doc_id in ids.items():
                try:
                    docs[name] = hub.admin.get("requests", doc_id)
                except Exception:
                    return None
            return docs

        docs = wait_for("the ingest tick", ingested)
        assert {n: (d["status"], d.get("skipReason")) for n, d in docs.items()} == {
            "first": ("pending-build", None), "second": ("pending-build", None), "over_cap": ("skipped", "author cap"),
            "in_thread": ("pending-build", None), "blocked": ("skipped", "blocklist"), "in_muted": ("skipped", "muted thread"),
        }
        assert docs["in_thread"]["root"] == {"uri": thread_root.uri, "cid": thread_root.cid}
        # duplicate ingest: forget the checkpoint; the next ticks find the same mentions, write nothing
        checkpoint = hub.admin.get("bot", "ingest-checkpoint")
        hub.admin.delete("bot", "ingest-checkpoint", actor="admin", if_rev=checkpoint["_rev"])
        wait_for("a new checkpoint", lambda: _exists(hub.admin, "bot", "ingest-checkpoint"))
        assert all(len(hub.admin.history("requests", doc_id)) == 1 for doc_id in ids.values())

        # a mention from a client whose clock is 7 minutes behind, arriving after newer ones were ingested:
        # the AppView lists it below them (by the earlier of createdAt and its index time); it is not lost
        minutes_ago = (datetime.now(UTC) - timedelta(minutes=7)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        late = net.post(dave, "@skybot.test make me a counter", mentions=[bot], created_at=minutes_ago)
        net.process_all()
        mentions["late"] = late
        ids["late"] = f"{late.uri.split('/')[2]}:{late.uri.split('/')[-1]}"
        assert wait_for("the late mention", lambda: _exists(hub.admin, "requests", ids["late"]))
        assert hub.admin.get("requests", ids["late"])["status"] == "pending-build"

        # the builder lane, as a device over the hub's API
        key = new_device_key()
        approve_device(hub.admin, "gha-builder", "device:builder", public_key_of(key), clock=hub.clock)
        site = tmp_path / "site"
        site.mkdir()
        pages = PageServer(site)  # stands in for GitHub Pages: not serving until the "push" lands
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_HUB_URL": hub.url, "SKYHUB_DEVICE": "gha-builder",
               "SKYHUB_DEVICE_KEY": private_key_to_pem(key), "SKYHUB_BUILD_OUT": str(site),
               "SKYHUB_BUILD_BASE_URL": pages.url}
        built = subprocess.run([sys.executable, "-m", "hub", "build", "run", "--max", "10"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert built.returncode == 0, built.stderr
        assert json.loads(built.stdout) == {"built": 4}

        accepted = ("first", "second", "in_thread", "late")
        # the pages are not served yet: the reply waits (no attempt, no post), saying why
        waiting = wait_for("the reply tick to notice", lambda: all(
            "waiting for the page" in (hub.admin.get("requests", ids[n]).get("lastError") or "") for n in accepted))
        assert waiting and all(hub.admin.get("requests", ids[n])["status"] == "built" for n in accepted)
        pages.start()
        wait_for("the reply tick", lambda: all(hub.admin.get("requests", ids[n])["status"] == "replied" for n in accepted))
        net.process_all()

        # through the AppView: one reply from the bot per accepted mention, in its thread, with a working link
        for name in accepted:
            doc = hub.admin.get("requests", ids[name])
            thread = net.query("app.bsky.feed.getPostThread", {"uri": mentions[name].uri, "depth": 2})["thread"]
            from_bot = [r for r in thread.get("replies", []) if r["post"]["author"]["did"] == bot.did]
            assert len(from_bot) == 1, name
            post = from_bot[0]["post"]
            assert post["uri"] == doc["replyUri"] and doc["permalink"] == f"https://bsky.app/profile/{bot.did}/post/{doc['replyRkey']}"
            record = post["record"]
            assert record["reply"]["parent"]["uri"] == mentions[name].uri
            assert record["reply"]["root"]["uri"] == (thread_root.uri if name == "in_thread" else mentions[name].uri)
            (facet,) = record["facets"]
            url = doc["result"]["url"]
            link = record["text"].encode()[facet["index"]["byteStart"]:facet["index"]["byteEnd"]].decode()
            assert link == url and facet["features"][0]["uri"] == url
            assert (site / url.rstrip("/").rsplit("/", 1)[1] / "index.html").exists()
            assert [(c.doc["status"], c.actor) for c in hub.admin.history("requests", ids[name])] == [
                ("pending-build", "tick:ingest"), ("building", "device:builder"), ("built", "device:builder"),
                ("built", "tick:reply"), ("built", "tick:reply"), ("replied", "tick:reply")]  # waited for the page, fixed the key, replied
        for name in ("over_cap", "blocked", "in_muted"):
            thread = net.query("app.bsky.feed.getPostThread", {"uri": mentions[name].uri, "depth": 2})["thread"]
            assert not [r for r in thread.get("replies", []) if r["post"]["author"]["did"] == bot.did], name
            assert [c.actor for c in hub.admin.history("requests", ids[name])] == ["tick:ingest"]
        # and the reply tick, running on, never posts twice
        time.sleep(3)
        net.process_all()
        feed = net.query("app.bsky.feed.getAuthorFeed", {"actor": bot.did, "limit": 50})["feed"]
        assert len([item for item in feed if item["post"]["author"]["did"] == bot.did]) == 4
    finally:
        hub.stop()
        if "pages" in locals():
            pages.stop()
    assert bot.password not in "".join(hub.stderr)


def test_a_mention_gets_a_page_made_by_a_language_model_and_one_reply_naming_it(bsky_network, tmp_path):
    """The builder lane with the test kit's fake model behind the built-in generator: the request
    is planned and written by the model, the page checked (a prompt leak refused, then repaired),
    opened in chromium and published; the mention keeps the tokens it cost, the day's budget counts
    them on the hub, and the bot replies once, naming the page, with its link."""
    from skyhub_testkit.fakemodel import FakeModel

    net = bsky_network
    bot = net.create_account(net.unique_handle("modelbot"), "bot-password-2")
    erin = net.create_account(net.unique_handle("erin"))
    asked = net.post(erin, f"@{bot.handle} make me a bingo card for our standup", mentions=[bot])
    net.process_all()
    model = FakeModel(key="sk-e2e-model-key-5150")
    model.answers = ["leak"]  # the first page pastes the instructions in: refused, repaired
    served = model.serve()
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": new_key_text(), "SKYHUB_PLATFORMS__BLUESKY_PDS": net.pds, "SKYHUB_VAULT__EVERY": "1s",
        "SKYHUB_BOT__HANDLE": bot.handle, "SKYHUB_BOT__INGEST_EVERY": "1s", "SKYHUB_BOT__REPLY_EVERY": "1s",
        "SKYHUB_FETCH__ALLOW_HTTP": "true", "SKYHUB_FETCH__ALLOW_NETWORKS": '["127.0.0.1/32"]',
    })
    pages = None
    try:
        meta = RemoteVault(hub.client("user:ops")).put("bluesky", bot.handle, bot.password, verify=True)
        assert meta["status"] == "ok", meta
        doc_id = f"{erin.did}:{asked.uri.split('/')[-1]}"
        assert wait_for("the ingest tick", lambda: _exists(hub.admin, "requests", doc_id))
        assert hub.admin.get("requests", doc_id)["status"] == "pending-build"

        key = new_device_key()
        approve_device(hub.admin, "gha-builder", "device:builder", public_key_of(key), clock=hub.clock)
        site = tmp_path / "site"
        site.mkdir()
        pages = PageServer(site)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("SKYHUB_CODEGEN")},
               "PYTHONPATH": str(ROOT), "SKYHUB_HUB_URL": hub.url, "SKYHUB_DEVICE": "gha-builder",
               "SKYHUB_DEVICE_KEY": private_key_to_pem(key), "SKYHUB_BUILD_OUT": str(site), "SKYHUB_BUILD_BASE_URL": pages.url,
               "SKYHUB_CODEGEN__PROVIDER": "anthropic", "SKYHUB_CODEGEN__BASE_URL": served.url, "SKYHUB_CODEGEN__MODEL": "fake-1",
               "SKYHUB_CODEGEN_API_KEY": "sk-e2e-model-key-5150", "SKYHUB_CODEGEN__BROWSER": "/usr/bin/chromium"}
        built = subprocess.run([sys.executable, "-m", "hub", "build", "run"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        assert built.returncode == 0, built.stderr
        assert json.loads(built.stdout) == {"built": 1} and "sk-e2e-model-key-5150" not in built.stderr

        doc = hub.admin.get("requests", doc_id)
        result = doc["result"]
        assert (result["title"], result["provider"], result["repaired"], result["browser"]) == (
            "Bingo card for our standup", "anthropic", True, "loaded")
        assert len(model.calls) == 3 and doc["tokens"] == result["tokens"] and doc["tokens"]["out"] > 0
        (budget,) = hub.admin.query("bot", "kind", "token-budget").docs
        assert budget["used"] == doc["tokens"]["in"] + doc["tokens"]["out"]
        html = (site / result["url"].rstrip("/").rsplit("/", 1)[1] / "index.html").read_text()
        assert "Content-Security-Policy" in html and f"Made by skyhub for @{erin.handle}" in html
        assert f"https://bsky.app/profile/{erin.did}/post/{asked.uri.split('/')[-1]}" in html
        assert "skyhub-canary-" not in html

        pages.start()  # the Pages deploy lands
        wait_for("the reply tick", lambda: hub.admin.get("requests", doc_id)["status"] == "replied")
        net.process_all()
        thread = net.query("app.bsky.feed.getPostThread", {"uri": asked.uri, "depth": 2})["thread"]
        from_bot = [r["post"] for r in thread.get("replies", []) if r["post"]["author"]["did"] == bot.did]
        assert len(from_bot) == 1
        record = from_bot[0]["record"]
        assert record["text"] == f"Your Bingo card for our standup is ready: {result['url']}"
        (facet,) = record["facets"]
        assert facet["features"][0]["uri"] == result["url"]
        time.sleep(3)  # the reply tick runs on: still one reply
        net.process_all()
        thread = net.query("app.bsky.feed.getPostThread", {"uri": asked.uri, "depth": 2})["thread"]
        assert len([r for r in thread.get("replies", []) if r["post"]["author"]["did"] == bot.did]) == 1
    finally:
        hub.stop()
        served.stop()
        if pages is not None:
            pages.stop()
    assert "sk-e2e-model-key-5150" not in "".join(hub.stderr)


class PageServer:
    """A static file server on 127.0.0.1 for the built pages, answering 404 (as GitHub Pages does
    before a push is deployed) until ``start()``, the Pages deploy landing. It listens from the
    start, so every check gets the same answer: a socket that never accepts would answer checks
    differently as its backlog fills (read timeouts, then connect timeouts)."""

    def __init__(self, folder):
        import functools
        import http.server
        import threading

        outer = self
        self.live = False

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - the stdlib's name
                if not outer.live:
                    self.send_error(404, "not deployed yet")
                    return
                try:
                    super().do_GET()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the checker read what it needed

        handler = functools.partial(Handler, directory=str(folder))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/builds"
        self.folder = folder
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def start(self):
        # the pages live under /builds/ as they would under a Pages project site
        (self.folder / "builds").symlink_to(self.folder, target_is_directory=True)
        self.live = True

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _exists(store, db, doc_id):
    try:
        store.get(db, doc_id)
        return True
    except Exception:
        return False
