"""A real `skyhub run` on SQLite and PostgreSQL, driven as an attacker holding a person's token
(or a leaked device key) would drive it (issue 16): posts whose images point at the hub's own
files and network, a device queueing posts, ``/metrics`` through a reverse proxy on the same
machine, made-up HTTP methods, bodies that mean two things, guessed tokens. Every probe is
refused with a sentence and writes nothing; the canary server is never reached."""

from __future__ import annotations

import http.server
import socket
import threading
import time

import httpx
import pytest

from ledger import Forbidden
from publishers.remote import publish_queue
from skyhub_testkit.hub import Hub
from skyhub_testkit.servers import LocalServer
from tests.conftest import database

HANDLE = "shop.example.org"
CANARY_FILE_BYTES = b"\x89PNG\r\n\x1a\n" + b"canary" * 100


class Proxy:
    """A reverse proxy on this machine, as the README recommends (TLS omitted): it forwards to the
    hub and says who the outside client was in X-Forwarded-For."""

    def __init__(self, upstream: str, client: str = "203.0.113.7") -> None:
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                headers["X-Forwarded-For"] = client
                headers["X-Forwarded-Proto"] = "https"
                r = httpx.get(upstream + self.path, headers=headers, timeout=30)
                self.send_response(r.status_code)
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        outer.upstream = upstream

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def canary():
    c = LocalServer("127.0.0.1", default=CANARY_FILE_BYTES)  # must never be reached: every request is recorded
    yield c
    c.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hub(request, tmp_path_factory, canary):
    folder = tmp_path_factory.mktemp(f"attacked-{request.param}")
    (folder / "canary.png").write_bytes(CANARY_FILE_BYTES)
    with database(request.param, folder) as url:
        hub = Hub(url, folder, jobs=False, env={"SKYHUB_PUBLISH__EVERY": "1s", "SKYHUB_PUBLISH__ACCOUNTS__BSKY": HANDLE})
        hub.folder = folder
        try:
            yield hub
        finally:
            hub.stop()
    assert canary.hits == [], f"the hub reached the canary: {canary.hits}"


@pytest.fixture(scope="module")
def attacker(hub):
    with httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {hub.token('mallory')}"}, timeout=30) as client:
        yield client


def bad_urls(hub, canary):
    own = socket.gethostname()  # this machine's own name: it resolves to one of its own addresses
    return [
        str(hub.folder / "canary.png"), f"file://{hub.folder}/canary.png", "../hub.db", "~/.ssh/id_ed25519",
        f"http://127.0.0.1:{canary.port}/cam.png", f"https://127.0.0.1:{canary.port}/cam.png", "https://169.254.169.254/latest/",
        f"https://[::1]:{canary.port}/a.png", f"https://[::ffff:127.0.0.1]:{canary.port}/a.png", f"https://localhost:{canary.port}/a",
        f"https://2130706433:{canary.port}/a.png", "https://10.1.2.3/a.png", "https://[fe80::1]/a.png", "https://[64:ff9b::7f00:1]/a",
        "http://[::1/a", f"https://{own}.localhost/a.png",
    ]


def test_images_naming_the_hubs_files_or_network_are_refused_through_every_door(hub, attacker, canary):
    for n, url in enumerate(bad_urls(hub, canary)):
        body = {"platform": "bsky", "slug": f"probe{n}", "caption": "x", "images": [{"url": url, "alt": "x"}]}
        api = attacker.post("/v1/publish", json=body)
        assert api.status_code == 422 and api.json()["error"] == "invalid_post" and "image 1" in api.json()["reason"], (url, api.text)
        doc = {"kind": "publish-request", "status": "pending", "platform": "bsky", "account": HANDLE, "slug": f"raw{n}",
               "attempts": 0, "caption": "x", "images": [{"url": url, "alt": "x"}]}
        put = attacker.put(f"/v1/db/requests/docs/raw{n}", json=doc)
        assert put.status_code == 403 and "image 1" in put.json()["reason"], (url, put.text)
        for reason in (api.json()["reason"], put.json()["reason"]):
            assert "bytes" not in reason and "exist" not in reason and "JPEG, PNG" not in reason  # no file oracle
    assert attacker.get("/v1/publish").json()["docs"] == []


def test_a_device_cannot_queue_a_post(hub):
    client = hub.client("device:builder")  # a leaked CI key
    with pytest.raises(Forbidden) as refused:
        publish_queue(client, {"platform": "bsky", "account": HANDLE, "slug": "leak", "caption": "Buy now"})
    assert "device:builder may not queue a post" in str(refused.value)
    doc = {"kind": "publish-request", "status": "pending", "platform": "bsky", "account": HANDLE, "slug": "leak2", "attempts": 0,
           "caption": "Buy now"}
    with pytest.raises(Forbidden) as raw:
        client.put("requests", doc, "leak2", actor="device:builder", create_only=True)
    assert "may not queue a post" in str(raw.value)


def test_metrics_through_a_reverse_proxy_on_the_same_machine_need_a_token(hub, attacker):
    proxy = Proxy(hub.url)
    try:
        assert httpx.get(f"{proxy.url}/metrics", timeout=30).status_code == 401
        assert httpx.get(f"{hub.url}/metrics", timeout=30).status_code == 401  # loopback alone is not enough
        spoofed = httpx.get(f"{hub.url}/metrics", headers={"X-Forwarded-For": "127.0.0.1"}, timeout=30)
        assert spoofed.status_code == 401
        assert attacker.get("/metrics").status_code == 200  # a person's token: what Prometheus is given
    finally:
        proxy.stop()


def test_made_up_methods_do_not_grow_the_metrics(hub, attacker):
    host, port = hub.url.removeprefix("http://").split(":")
    for i in range(200):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(f"ZX{i} /x{i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            while s.recv(4096):
                pass
    text = attacker.get("/metrics").text
    methods = {line.split('method="')[1].split('"')[0] for line in text.splitlines()
               if line.startswith("skyhub_http_requests_total{") and 'method="' in line}
    assert methods <= {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "other"} and "other" in methods
    assert not any(f"/x{i}" in text for i in range(200))


def test_a_body_that_gives_a_key_twice_is_refused(attacker):
    r = attacker.put("/v1/db/notes/docs/dup", content=b'{"status": "ok", "status": "done"}',
                     headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "gives the key 'status' twice" in r.json()["reason"]
    assert attacker.get("/v1/db/notes/docs/dup").status_code == 404


def test_every_answer_carries_the_security_headers(hub, attacker):
    for response in (httpx.get(f"{hub.url}/health"), attacker.get("/v1/whoami"), httpx.get(f"{hub.url}/v1/whoami"),
                     httpx.get(f"{hub.url}/docs"), httpx.get(f"{hub.url}/metrics"), attacker.get("/v1/db/notes/docs/none")):
        h = response.headers
        assert h["x-content-type-options"] == "nosniff" and h["x-frame-options"] == "DENY", response.url
        assert "camera=()" in h["permissions-policy"] and "frame-ancestors 'none'" in h["content-security-policy"]
    docs = httpx.get(f"{hub.url}/docs")
    assert "script-src 'self'" in docs.headers["content-security-policy"] and "cdn" not in docs.text.lower()


def test_a_guessed_token_costs_time_and_a_good_one_does_not(hub, attacker):
    wrong = {"Authorization": "Bearer skh_000000000000_" + "y" * 43}
    waits = []
    for _ in range(3):
        started = time.perf_counter()
        assert httpx.get(f"{hub.url}/v1/whoami", headers=wrong, timeout=30).status_code == 401
        waits.append(time.perf_counter() - started)
    assert waits[0] >= 0.1 and waits[1] >= 0.2 and waits[2] >= 0.4  # each failure from this address waits longer
    assert attacker.get("/v1/whoami").status_code == 200
