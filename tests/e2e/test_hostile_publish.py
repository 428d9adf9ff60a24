"""The publish tick under attack, end to end on a real local Bluesky network (issue 16): a person
with a token queues Bluesky posts whose images lead, one way or another, to the hub's own files
and network. A "public" image server (127.0.0.2, the one network the operator allows, standing in
for the internet) answers with redirects to the canary server on 127.0.0.1, to ``[::1]``, to
``localhost``, to the cloud metadata address and to ``file://``; with a 60 MB image that never
says its size; with a page that calls itself an image. A name that resolves to this machine's
own address is tried, and a document naming a canary file by path is slipped in as a legacy
write. Every post ends in ``error`` with a sentence that names nothing of the hub, the canary
server is never reached, and the shop's account publishes nothing."""

from __future__ import annotations

import socket
import time

import httpx

from skyhub_testkit.hub import Hub
from skyhub_testkit.servers import LocalServer, redirect
from tests.e2e.test_publish_bluesky import wait_for
from tests.publishers.test_bluesky import png
from vault import new_key_text
from vault.remote import RemoteVault

CANARY_BYTES = png(7, 7)


def huge(handler):
    handler.send_response(200)
    handler.send_header("Content-Type", "image/png")
    handler.end_headers()  # no length: the hub must stop reading by itself
    try:
        handler.wfile.write(CANARY_BYTES)
        for _ in range(60):
            handler.wfile.write(b"\0" * 1_000_000)
    except OSError:
        pass  # the hub hung up, as it should


def html(handler):
    body = b"<html><body>I am an image, honest</body></html>"
    handler.send_response(200)
    handler.send_header("Content-Type", "image/png")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def test_no_post_reaches_the_hubs_files_or_network(bsky_network, tmp_path):
    net = bsky_network
    shop = net.create_account(net.unique_handle("shop"), "shop-password-1")
    canary = LocalServer("127.0.0.1", default=CANARY_BYTES)
    canary_file = tmp_path / "canary.png"
    canary_file.write_bytes(CANARY_BYTES)
    c = canary.port
    public = LocalServer("127.0.0.2", default=CANARY_BYTES, routes={
        "/to-loopback.png": redirect(f"http://127.0.0.1:{c}/a.png"), "/to-v6.png": redirect(f"http://[::1]:{c}/a.png"),
        "/to-localhost.png": redirect(f"http://localhost:{c}/a.png"), "/to-metadata.png": redirect("http://169.254.169.254/latest/"),
        "/to-file.png": redirect(f"file://{canary_file}"), "/to-mapped.png": redirect(f"http://[::ffff:127.0.0.1]:{c}/a.png"),
        "/huge.png": huge, "/page.png": html,
    })
    key = new_key_text()
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key, "SKYHUB_PLATFORMS__BLUESKY_PDS": net.pds, "SKYHUB_VAULT__EVERY": "1s",
        "SKYHUB_PUBLISH__EVERY": "1s", "SKYHUB_PUBLISH__ACCOUNTS__BSKY": shop.handle,
        # the operator allows http and one non-public network, 127.0.0.2, where "the internet" is in this test
        "SKYHUB_FETCH__ALLOW_HTTP": "true", "SKYHUB_FETCH__ALLOW_NETWORKS": '["127.0.0.2/32"]',
    })
    try:
        ops = hub.client("user:ops")
        assert RemoteVault(ops).put("bluesky", shop.handle, shop.password, verify=True)["status"] == "ok"
        mallory = httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {hub.token('mallory')}"}, timeout=30)
        urls = [f"http://127.0.0.2:{public.port}{path}" for path in (
            "/to-loopback.png", "/to-v6.png", "/to-localhost.png", "/to-metadata.png", "/to-file.png", "/to-mapped.png",
            "/huge.png", "/page.png")]
        urls.append(f"http://{socket.gethostname()}:{c}/own-name.png")  # a name that resolves to this machine
        ids = []
        for n, url in enumerate(urls):
            r = mallory.post("/v1/publish", json={"platform": "bsky", "slug": f"p{n}", "caption": f"probe {n}",
                                                  "images": [{"url": url, "alt": "x"}]})
            assert r.status_code == 200, (url, r.text)
            ids.append(r.json()["id"])
        # a document from before the rules, naming a file on the hub (only an admin's write skips the machine)
        legacy = {"kind": "publish-request", "status": "pending", "platform": "bsky", "account": shop.handle, "slug": "legacy",
                  "attempts": 0, "caption": "legacy", "images": [{"url": str(canary_file), "alt": "x"}]}
        ids.append(hub.admin.put("requests", legacy, f"bsky:{shop.handle}:legacy", actor="admin")["_id"])

        done = wait_for("every probe to end", lambda: all(hub.admin.get("requests", i)["status"] in ("error", "done") for i in ids),
                        timeout=120)
        assert done
        reasons = {i: hub.admin.get("requests", i)["lastError"] for i in ids}
        for doc_id, reason in reasons.items():
            assert hub.admin.get("requests", doc_id)["status"] == "error", (doc_id, reason)
            assert str(c) not in reason.replace(urls[-1], "") and "127.0.0.1" not in reason.replace(str(canary_file), ""), reason
        for doc_id, url in zip(ids, urls):
            if url.endswith(("huge.png",)):
                assert "over 10,485,760 bytes" in reasons[doc_id]  # the fetcher's cap (fetch.max_bytes)
            elif url.endswith("page.png"):
                assert "is not a JPEG, PNG, GIF or WebP image" in reasons[doc_id]
            else:
                assert "is not fetched" in reasons[doc_id], reasons[doc_id]
        assert "breaks the hub's rules now" in reasons[ids[-1]] and "bytes" not in reasons[ids[-1]]
        time.sleep(2)
        net.process_all()
        feed = net.query("app.bsky.feed.getAuthorFeed", {"actor": shop.did, "limit": 50})["feed"]
        assert feed == []  # nothing was published
        blobs = httpx.get(f"{net.pds}/xrpc/com.atproto.sync.listBlobs", params={"did": shop.did}, timeout=30).json()["cids"]
        assert blobs == []  # nothing was even uploaded
        assert canary.hits == [], canary.hits
        mallory.close()
    finally:
        hub.stop()
        canary.stop()
        public.stop()
