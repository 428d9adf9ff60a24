"""Publishing end to end on a real local Bluesky network (@atproto/dev-env): a post queued with
``skyhub publish bsky`` (two images served from 127.0.0.1, alt text, a mention, a link and a
tag) is published by ``skyhub run``'s publish tick, and read back through the AppView; two ~6 MB
phone photos with GPS are published under the blob limit without EXIF, read back as blobs; and one
post for three networks, reviewed, published everywhere with its first comment once."""

from __future__ import annotations

import functools
import http.server
import io
import json
import os
import subprocess
import sys
import threading
import time

import httpx

from hub.remote import RemoteStore, TokenAuth
from skyhub_testkit.hub import ROOT, Hub
from tests.publishers.test_bluesky import png
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


class Files:
    """A static file server on 127.0.0.1 (where the manager's images live)."""

    def __init__(self, folder):
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        handler = functools.partial(Quiet, directory=str(folder))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_post_with_two_images_is_published_once(bsky_network, tmp_path):
    net = bsky_network
    shop = net.create_account(net.unique_handle("shop"), "shop-password-1")
    ana = net.create_account(net.unique_handle("ana"))
    images = tmp_path / "images"
    images.mkdir()
    (images / "box.png").write_bytes(png(120, 80))
    (images / "beach.png").write_bytes(png(40, 30))
    files = Files(images)
    key = new_key_text()
    # the image server is on this machine: the operator lets the guarded fetcher reach it (and only it)
    local_images = {"SKYHUB_FETCH__ALLOW_HTTP": "true", "SKYHUB_FETCH__ALLOW_NETWORKS": '["127.0.0.1/32"]'}
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key, "SKYHUB_PLATFORMS__BLUESKY_PDS": net.pds, "SKYHUB_VAULT__EVERY": "1s",
        "SKYHUB_PUBLISH__EVERY": "1s", "SKYHUB_LOG_LEVEL": "INFO", **local_images,
    })
    try:
        ops = hub.client("user:ops")
        meta = RemoteVault(ops).put("bluesky", shop.handle, shop.password, verify=True)
        assert meta["status"] == "ok", meta
        text = f"It's here, made with @{ana.handle}: https://shop.example.org/box #launch"
        cli_env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db",
                   "SKYHUB_ACTOR": "user:maya", "SKYHUB_VAULT_KEY": key, **local_images}
        # one image is a file on maya's machine (its bytes travel with the post), one a URL the hub fetches
        argv = [sys.executable, "-m", "hub", "publish", "bsky", "--slug", "launch", "--account", shop.handle,
                "--image", str(images / "box.png"), "--alt", "The box, closed", "--image", f"{files.url}/beach.png",
                "--alt", "The box on a beach", "--caption", text]
        queued = subprocess.run(argv, capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=120)
        assert queued.returncode == 0, queued.stderr
        doc_id = json.loads(queued.stdout)["id"]
        assert doc_id == f"bsky:{shop.handle}:launch"

        doc = wait_for("the publish tick", lambda: (d := hub.admin.get("requests", doc_id))["status"] == "done" and d)
        rkey = doc["rkey"]
        assert doc["recordUri"] == f"at://{shop.did}/app.bsky.feed.post/{rkey}"
        assert doc["permalink"] == f"https://bsky.app/profile/{shop.handle}/post/{rkey}"
        net.process_all()

        feed = net.query("app.bsky.feed.getAuthorFeed", {"actor": shop.did, "limit": 50})["feed"]
        (item,) = [f for f in feed if f["post"]["author"]["did"] == shop.did]
        post = item["post"]
        assert post["uri"] == doc["recordUri"] and post["record"]["text"] == text
        shown = post["embed"]["images"]
        assert [(i["alt"], i["aspectRatio"]["width"], i["aspectRatio"]["height"]) for i in shown] == [
            ("The box, closed", 120, 80), ("The box on a beach", 40, 30)]
        facets = {f["features"][0]["$type"].rsplit("#", 1)[1]: f for f in post["record"]["facets"]}
        assert facets["mention"]["features"][0]["did"] == ana.did
        assert facets["link"]["features"][0]["uri"] == "https://shop.example.org/box"
        assert facets["tag"]["features"][0]["tag"] == "launch"
        raw = text.encode()
        for kind, expected in (("mention", f"@{ana.handle}"), ("link", "https://shop.example.org/box"), ("tag", "#launch")):
            index = facets[kind]["index"]
            assert raw[index["byteStart"]:index["byteEnd"]].decode() == expected

        again = subprocess.run(argv, capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=120)
        assert again.returncode == 0 and json.loads(again.stdout)["queued"] is False, again.stderr
        time.sleep(3)  # a few more publish ticks
        net.process_all()
        feed = net.query("app.bsky.feed.getAuthorFeed", {"actor": shop.did, "limit": 50})["feed"]
        assert len([f for f in feed if f["post"]["author"]["did"] == shop.did]) == 1
        assert [c.doc["status"] for c in hub.admin.history("requests", doc_id)] == ["pending", "pending", "done"]
    finally:
        hub.stop()
        files.stop()
    assert shop.password not in "".join(hub.stderr)


def test_a_6_mb_gps_photo_is_published_under_the_blob_limit_without_exif(bsky_network, tmp_path):
    """Issue 18's acceptance: two ~6 MB phone photos with GPS in their EXIF, one a file on maya's
    machine (stripped before it is stored, scaled when it is published), one a URL the hub fetches
    (stripped and scaled when it is published), both read back from the PDS as blobs."""
    from PIL import Image

    from tests.publishers.photos import has_metadata, photo

    net = bsky_network
    shop = net.create_account(net.unique_handle("shop"), "shop-password-1")
    images = tmp_path / "images"
    images.mkdir()
    sources = {"beach.jpg": photo(2800, 1900), "street.jpg": photo(2800, 1900, orientation=6)}  # stored sideways, upright once turned
    for name, data in sources.items():
        assert len(data) > 5_500_000 and "a GPS IFD" in has_metadata(data), name
        (images / name).write_bytes(data)
    files = Files(images)
    key = new_key_text()
    local_images = {"SKYHUB_FETCH__ALLOW_HTTP": "true", "SKYHUB_FETCH__ALLOW_NETWORKS": '["127.0.0.1/32"]'}
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key, "SKYHUB_PLATFORMS__BLUESKY_PDS": net.pds, "SKYHUB_VAULT__EVERY": "1s",
        "SKYHUB_PUBLISH__EVERY": "1s", **local_images,
    })
    try:
        assert RemoteVault(hub.client("user:ops")).put("bluesky", shop.handle, shop.password, verify=True)["status"] == "ok"
        cli_env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db",
                   "SKYHUB_ACTOR": "user:maya", "SKYHUB_VAULT_KEY": key, **local_images}
        argv = [sys.executable, "-m", "hub", "publish", "bsky", "--slug", "photos", "--account", shop.handle,
                "--image", str(images / "beach.jpg"), "--alt", "The beach", "--image", f"{files.url}/street.jpg",
                "--alt", "The street", "--caption", "Two photos"]
        queued = subprocess.run(argv, capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=120)
        assert queued.returncode == 0, queued.stderr
        doc_id = json.loads(queued.stdout)["id"]
        stored = hub.admin.get("requests", doc_id)["images"][0]["upload"]
        assert stored["size"] > 1_000_000  # kept whole in the hub (without its EXIF); scaled only for Bluesky
        doc = wait_for("the publish tick", lambda: (d := hub.admin.get("requests", doc_id))["status"] in ("done", "error") and d)
        assert doc["status"] == "done", doc.get("lastError")
        record = httpx.get(f"{net.pds}/xrpc/com.atproto.repo.getRecord", timeout=30, params={  # from the PDS itself
            "repo": shop.did, "collection": "app.bsky.feed.post", "rkey": doc["rkey"]}).json()["value"]
        shown = record["embed"]["images"]
        assert [i["alt"] for i in shown] == ["The beach", "The street"]
        for image, (width, height) in zip(shown, [(2800, 1900), (1900, 2800)]):  # the street photo is upright now
            cid = image["image"]["ref"]["$link"]
            blob = httpx.get(f"{net.pds}/xrpc/com.atproto.sync.getBlob", params={"did": shop.did, "cid": cid}, timeout=30)
            assert blob.status_code == 200
            data = blob.content
            assert len(data) <= 1_000_000 and image["image"]["size"] == len(data)
            im = Image.open(io.BytesIO(data))
            assert im.format == "JPEG" and (image["aspectRatio"]["width"], image["aspectRatio"]["height"]) == im.size
            assert abs(im.width / im.height - width / height) < 1 / min(im.size), (im.size, width, height)
            assert has_metadata(data) == [] and len(im.getexif()) == 0
        assert len(doc["imageNotes"]) == 2 and all("was scaled from" in n for n in doc["imageNotes"])
    finally:
        hub.stop()
        files.stop()


def test_one_post_for_three_networks_reviewed_then_published_with_its_first_comment_once(bsky_network, tmp_path):
    """An editor writes a post for Instagram, Threads and Bluesky (its own caption and image there) with a
    first comment; the hub requires review, so it waits until an approver approves it with the CLI; the
    tick publishes each network once and then posts the first comment once: a reply in the Bluesky thread
    on the real network (read back through the AppView), a comment and a reply on the fake Meta."""
    from hub.auth import add_user
    from ledger import Ledger
    from skyhub_testkit.fakemeta import FakeMeta
    from vault import Vault, parse_key

    net = bsky_network
    shop = net.create_account(net.unique_handle("shop"), "shop-password-2")
    ig_id, th_id = "17841400000000077", "2900000000000077"
    instagram, threads = FakeMeta(lambda: int(time.time() * 1000)), FakeMeta(lambda: int(time.time() * 1000), threads=True)
    ig_server, th_server = instagram.serve(), threads.serve()
    key = new_key_text()
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key, "SKYHUB_PLATFORMS__BLUESKY_PDS": net.pds, "SKYHUB_PLATFORMS__INSTAGRAM_URL": ig_server.url,
        "SKYHUB_PLATFORMS__THREADS_URL": th_server.url, "SKYHUB_VAULT__EVERY": "1s", "SKYHUB_PUBLISH__EVERY": "1s",
        "SKYHUB_PUBLISH__REQUIRE_REVIEW": "true", "SKYHUB_LOG_LEVEL": "INFO",
    })
    comment = "Made by hand in Lyon: https://shop.example.org/box"
    try:
        ops = hub.client("user:ops")
        assert RemoteVault(ops).put("bluesky", shop.handle, shop.password, verify=True)["status"] == "ok"
        vault = Vault(Ledger(hub.admin, "user:ops", hub.clock), parse_key(key, "test"))
        for platform, account in (("instagram", ig_id), ("threads", th_id)):
            vault.put(platform, account, {"accessToken": "good-token"})
            head = hub.admin.get("vault", f"{platform}:{account}")
            hub.admin.put("vault", {**head, "status": "ok"}, actor="admin")
        editor = RemoteStore(hub.url, TokenAuth(add_user(hub.admin, "ed", "editor", clock=hub.clock)))
        from publishers import media

        upload = {"upload": media.store(Ledger(editor, "user:ed", hub.clock), png(60, 40), name="box.png", mime="image/png")}  # as the CLI does
        made = editor.request("POST", "/v1/posts", json={
            "slug": "box-launch", "caption": "The box is here", "firstComment": comment,
            "images": [{"url": "https://cdn.example.org/box.jpg", "alt": "The box, closed"}],
            "variants": [{"platform": "ig", "account": ig_id}, {"platform": "threads", "account": th_id, "images": []},
                         {"platform": "bsky", "account": shop.handle, "caption": "The box is here, on Bluesky",
                          "images": [{**upload, "alt": "The box, closed"}]}]})
        assert made["status"] == "in-review", made  # an editor's post waits for an approver
        time.sleep(3)  # a few publish ticks: nothing goes out before the approval
        assert instagram.calls["create"] == 0 and all(v["status"] == "in-review" for v in hub.admin.query(
            "requests", "post", "box-launch").docs)

        cli_env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_HUB_URL": hub.url,
                   "SKYHUB_TOKEN": add_user(hub.admin, "ann", "approver", clock=hub.clock)}
        approved = subprocess.run([sys.executable, "-m", "hub", "publish", "approve", "box-launch"], capture_output=True, text=True,
                                  env=cli_env, cwd=tmp_path, timeout=120)
        assert approved.returncode == 0 and json.loads(approved.stdout)["status"] == "approved", approved.stderr

        ids = [f"ig:{ig_id}:box-launch", f"threads:{th_id}:box-launch", f"bsky:{shop.handle}:box-launch"]
        docs = wait_for("every network published and commented", lambda: (
            found := [hub.admin.get("requests", i) for i in ids]) and all(d["status"] == "commented" for d in found) and found,
            timeout=180)
        ig_doc, th_doc, bsky_doc = docs
        net.process_all()
        thread = net.query("app.bsky.feed.getPostThread", {"uri": bsky_doc["recordUri"], "depth": 2})["thread"]
        assert thread["post"]["record"]["text"] == "The box is here, on Bluesky"
        assert thread["post"]["embed"]["images"][0]["alt"] == "The box, closed"
        (reply,) = thread["replies"]
        assert reply["post"]["uri"] == bsky_doc["commentUri"] and reply["post"]["author"]["did"] == shop.did
        assert reply["post"]["record"]["text"] == comment
        assert [c.text for c in instagram.comments] == [comment] and instagram.comments[0].id == ig_doc["commentId"]
        assert [m.caption for m in threads.replies(to=th_doc["mediaId"])] == [comment]

        again = editor.request("POST", "/v1/posts", json={
            "slug": "box-launch", "caption": "The box is here", "firstComment": comment,
            "images": [{"url": "https://cdn.example.org/box.jpg", "alt": "The box, closed"}],
            "variants": [{"platform": "ig", "account": ig_id}, {"platform": "threads", "account": th_id, "images": []},
                         {"platform": "bsky", "account": shop.handle, "caption": "The box is here, on Bluesky",
                          "images": [{**upload, "alt": "The box, closed"}]}]})
        assert again["queued"] is False and again["updated"] is False
        time.sleep(3)  # a few more publish ticks
        net.process_all()
        thread = net.query("app.bsky.feed.getPostThread", {"uri": bsky_doc["recordUri"], "depth": 2})["thread"]
        assert len(thread["replies"]) == 1 and len(instagram.comments) == 1 and len(threads.replies()) == 1
        assert instagram.calls["publish"] == 1 and threads.calls["publish"] == 1 and threads.calls["reply-publish"] == 1
        editor.close()
    finally:
        hub.stop()
        ig_server.stop()
        th_server.stop()
    assert shop.password not in "".join(hub.stderr)
