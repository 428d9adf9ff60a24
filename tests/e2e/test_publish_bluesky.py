"""Publishing end to end on a real local Bluesky network (@atproto/dev-env): a post queued with
``skyhub publish bsky`` (two images served from 127.0.0.1, alt text, a mention, a link and a
tag) is published by ``skyhub run``'s publish tick, and read back through the AppView; two ~6 MB
phone photos with GPS are published under the blob limit without EXIF, read back as blobs."""

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
