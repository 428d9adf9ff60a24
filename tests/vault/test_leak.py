"""A canary secret goes through every vault surface; it must come out of none of them.

Covered: every vault CLI command (local and over a hub), every vault API endpoint and the
change feed and stream, every tick path (success and failure, with platforms that echo the
token back in their error messages), logs at DEBUG, exception texts, reprs, and the bytes of
the database files.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import respx

from hub.app import build_rules
from ledger import FakeClock, Ledger, LedgerError, open_store
from platforms.graph import RetryPolicy
from skyhub_testkit.hub import ROOT, Hub
from tests.vault.conftest import ENDPOINTS
from vault import Checks, Maintainer, Policy, Vault, new_key_text, parse_key
from vault.remote import RemoteVault

CANARY = "CANARY-6b1f0c9e-do-not-leak"


class Echo(BaseHTTPRequestHandler):
    """A platform that refuses every credential and quotes it back in the error."""

    def _echo(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        quoted = f"{self.headers.get('Authorization', '')} {body}"
        if "createSession" in self.path or "refreshSession" in self.path:
            payload = {"error": "AuthenticationRequired", "message": f"Invalid identifier or password: {quoted}"}
        else:
            payload = {"error": {"message": f"Invalid OAuth access token: {quoted}", "code": 190}}
        data = json.dumps(payload).encode()
        self.send_response(401 if "Session" in self.path else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _echo

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def assert_clean(*texts: str) -> None:
    for text in texts:
        assert CANARY not in text


def db_bytes(folder) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*.db*") if p.is_file())  # not the .wake folder


def test_in_process_tick_paths_logs_and_exceptions(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    key = parse_key(new_key_text(), "test")
    clock = FakeClock(1_800_000_000_000)
    store = open_store(f"sqlite:///{tmp_path}/vault.db", build_rules(), clock)
    person = Vault(Ledger(store, "user:ana", clock), key)
    platforms = Checks(httpx.Client(), ENDPOINTS, retry=RetryPolicy(attempts=2, wait=0, sleep=lambda s: None), now_ms=clock.now_ms)
    tick = Maintainer(Ledger(store, "tick:vault", clock), key, platforms, Policy())
    texts: list[str] = []
    with respx.mock:
        echo = lambda request: httpx.Response(400, json={"error": {"message": f"bad token {request.headers.get('Authorization')}", "code": 190}})  # noqa: E731
        ok = httpx.Response(200, json={"id": "1", "access_token": CANARY + "-next", "expires_in": 60})
        # success paths: verify and refresh, for every platform
        for platform, me, refresh in [("instagram", "https://ig.test/me", "https://ig.test/refresh_access_token"),
                                      ("threads", "https://threads.test/me", "https://threads.test/refresh_access_token")]:
            respx.get(me).mock(return_value=ok)
            respx.get(refresh).mock(return_value=ok)
            texts.append(json.dumps(person.put(platform, "1", CANARY)))
        respx.get("https://graph.test/v21.0/me").mock(return_value=ok)
        respx.post("https://graph.test/v21.0/oauth/access_token").mock(return_value=ok)
        texts.append(json.dumps(person.put("facebook", "1", json.dumps({"accessToken": CANARY, "appId": "a", "appSecret": CANARY}))))
        session = httpx.Response(200, json={"accessJwt": "a." + CANARY + ".b", "refreshJwt": CANARY + "-r", "did": "did:plc:x", "handle": "bot.test"})
        respx.post("https://pds.test/xrpc/com.atproto.server.createSession").mock(return_value=session)
        respx.post("https://pds.test/xrpc/com.atproto.server.refreshSession").mock(return_value=session)
        texts.append(json.dumps(person.put("bluesky", "bot.test", CANARY)))
        texts.append(json.dumps(tick.run()))
        clock.advance(8 * 86_400_000)
        texts.append(json.dumps(tick.run()))
        # failure paths: the platforms quote the token back
        for route in list(respx.mock.routes):
            route.mock(side_effect=echo)
        respx.post("https://pds.test/xrpc/com.atproto.server.createSession").mock(
            side_effect=lambda r: httpx.Response(401, json={"error": "AuthenticationRequired", "message": r.content.decode()}))
        respx.post("https://pds.test/xrpc/com.atproto.server.refreshSession").mock(
            side_effect=lambda r: httpx.Response(400, json={"error": "ExpiredToken", "message": r.headers["Authorization"]}))
        clock.advance(8 * 86_400_000)
        texts.append(json.dumps(tick.run()))
        for platform in ("instagram", "threads", "facebook", "bluesky"):
            texts.append(json.dumps(person.put(platform, "1" if platform != "bluesky" else "bot.test", CANARY)))
        texts.append(json.dumps(tick.run()))
    texts.append(json.dumps(person.list()))
    assert any(c["needsReauth"] for c in person.list())
    for call in (lambda: person.reveal("instagram:1"), lambda: Vault(Ledger(store, "tick:x", clock), parse_key(new_key_text(), "other")).reveal("instagram:1")):
        with pytest.raises(LedgerError) as err:
            call()
        texts += [str(err.value), repr(err.value)]
    texts += [repr(person), repr(key), repr(tick.key), caplog.text]
    texts += [json.dumps([c.as_dict() for c in store.history("vault", cid)]) for cid in ("instagram:1", "bluesky:bot.test")]
    assert_clean(*texts)
    platforms.http.close()
    store.close()
    assert CANARY.encode() not in db_bytes(tmp_path)


def test_every_cli_command_and_api_endpoint(tmp_path, echo_server):
    key_text = new_key_text()
    env = {
        **os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_VAULT_KEY": key_text, "SKYHUB_LOG_LEVEL": "DEBUG",
        "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/local.db", "SKYHUB_ACTOR": "user:ana",
        "SKYHUB_PLATFORMS__INSTAGRAM_URL": echo_server, "SKYHUB_PLATFORMS__THREADS_URL": echo_server,
        "SKYHUB_PLATFORMS__FACEBOOK_URL": echo_server, "SKYHUB_PLATFORMS__GRAPH_VERSION": "",
        "SKYHUB_PLATFORMS__BLUESKY_PDS": echo_server, "SKYHUB_VAULT__RETRIES": "1",
    }
    outputs: list[str] = []

    def cli(*args, stdin=None, extra=None):
        proc = subprocess.run([sys.executable, "-m", "hub", *args], input=stdin, capture_output=True, text=True,
                              env={**env, **(extra or {})}, cwd=tmp_path, timeout=60)
        outputs.extend([proc.stdout, proc.stderr])
        return proc

    # local
    for platform, account in [("instagram", "1"), ("threads", "2"), ("facebook", "3"), ("bluesky", "bot.test")]:
        assert cli("vault", "put", platform, account, stdin=CANARY).returncode == 0
        assert cli("vault", "put", platform, account, "--verify", stdin=CANARY).returncode == 1  # refused: needs re-auth
    assert cli("vault", "put", "instagram", "9", CANARY).returncode == 2  # never from argv, never echoed
    for args in (["vault", "list"], ["vault", "list", "--json"], ["vault", "show", "instagram:1"], ["tick", "vault"],
                 ["db", "get", "--db", "vault", "instagram:1"], ["db", "history", "--db", "vault", "instagram:1", "--json"],
                 ["db", "changes", "--json"], ["db", "query", "--db", "vault", "--field", "kind", "--key", "credential", "--json"]):
        cli(*args)
    assert cli("vault", "rm", "threads:2").returncode == 0
    assert "NEEDS RE-AUTH" in "".join(outputs)

    # over a hub, and the API itself
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, env={k: v for k, v in env.items() if k.startswith(("SKYHUB_V", "SKYHUB_PLATFORMS")) or k == "SKYHUB_LOG_LEVEL"})
    try:
        token = hub.token("ana")
        remote = {"SKYHUB_HUB_URL": hub.url, "SKYHUB_TOKEN": token}
        assert cli("vault", "put", "instagram", "1", stdin=CANARY, extra=remote).returncode == 0
        assert cli("vault", "put", "bluesky", "bot.test", "--verify", stdin=CANARY, extra=remote).returncode == 1
        for args in (["vault", "list"], ["vault", "show", "instagram:1"], ["db", "changes", "--json"]):
            cli(*args, extra=remote)
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=hub.url, headers=auth) as http:
            responses = [
                http.put("/v1/vault/credentials/threads/7", json={"secret": CANARY}),
                http.put("/v1/vault/credentials/facebook/8", params={"verify": "true"}, json={"secret": {"accessToken": CANARY, "appId": "a", "appSecret": CANARY}}),
                http.put("/v1/vault/credentials/nowhere/7", json={"secret": CANARY}),
                http.put("/v1/vault/credentials/threads/7", json={"wrong": CANARY}),
                http.get("/v1/vault/credentials"), http.get("/v1/vault/credentials/threads:7"),
                http.get("/v1/db/vault/docs/threads:7"), http.get("/v1/db/vault/history/threads:7"),
                http.get("/v1/changes", params={"limit": 1000}), http.delete("/v1/vault/credentials/threads:7"),
                http.get("/health"),
            ]
            outputs.extend(r.text for r in responses)
            assert [r.status_code for r in responses[:4]] == [200, 200, 400, 422]
            with http.stream("GET", "/v1/changes/stream") as stream:
                for line in stream.iter_lines():
                    outputs.append(line)
                    if "facebook" in line:
                        break
        with pytest.raises(LedgerError) as err:
            RemoteVault(hub.client("device:builder")).put("instagram", "1", CANARY)
        outputs += [str(err.value), repr(hub.client("user:bob"))]
    finally:
        hub.stop()
    outputs.append("".join(hub.stderr))
    assert_clean(*outputs)
    assert CANARY.encode() not in db_bytes(tmp_path)
