"""A real `skyhub run` on SQLite and on PostgreSQL, probed as an attacker and a careless client
would (issue 9): every probe gets a 4xx with the API's error body (never a 5xx), and the hub
still answers ``/health`` and ``/v1/changes`` afterwards.

The HTTP layer's probes pass on their own. Those marked STORE below probe input that only the
store can refuse (nesting depth, lone surrogates and NUL inside documents, indexes made for
any queried field); they pass once the store raises ``Invalid`` for them (the ledger work of
issue 9), and fail before.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
import uuid
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from skyhub_testkit.hub import Hub
from tests.conftest import database

BODY_TIMEOUT = 2.0
HEADER_TIMEOUT = 2.0
MARGIN = 6.0  # a loaded 2-core machine: how much later than its timeout a close may come
LIMITS = {
    "SKYHUB_HTTP__BODY_TIMEOUT": f"{BODY_TIMEOUT:g}s",
    "SKYHUB_HTTP__HEADER_TIMEOUT": f"{HEADER_TIMEOUT:g}s",
    "SKYHUB_HTTP__KEEP_ALIVE": "2s",
}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hub(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"hostile-{request.param}")
    with database(request.param, folder) as url:
        hub = Hub(url, folder, jobs=False, env=LIMITS)
        hub.kind = request.param
        try:
            yield hub
        finally:
            hub.stop()


@pytest.fixture(scope="module")
def token(hub):
    return hub.token(f"probe{uuid.uuid4().hex[:6]}")


@pytest.fixture
def http(hub, token):
    with httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        yield client
    assert_still_serving(hub, token)


def assert_still_serving(hub, token):
    health = httpx.get(f"{hub.url}/health", timeout=10)
    assert health.status_code == 200 and health.json()["ok"] is True, health.text
    changes = httpx.get(f"{hub.url}/v1/changes", params={"limit": 1}, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert changes.status_code == 200 and "changes" in changes.json(), changes.text


def refused(response, status, code="invalid"):
    """The API's refusal: this status, the error body, a sentence."""
    assert response.status_code == status, (response.status_code, response.text[:300])
    body = response.json()
    assert set(body) == {"error", "reason"} and body["error"] == code and len(body["reason"]) > 10, body
    return body["reason"]


def rss_mb(hub):
    with open(f"/proc/{hub.proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def address(hub):
    parts = urlsplit(hub.url)
    return parts.hostname, parts.port


def raw(hub, data: bytes):
    """A socket that sent ``data`` and sends nothing more."""
    sock = socket.create_connection(address(hub), timeout=30)
    sock.sendall(data)
    return sock


def read_until_closed(sock, limit):
    """Everything the server sends until it closes the connection, and how long that took;
    (..., None) if it was still open after ``limit`` seconds. The socket is closed after."""
    started = time.monotonic()
    sock.settimeout(0.25)
    got = b""
    try:
        while time.monotonic() - started < limit:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return got, time.monotonic() - started
            got += chunk
        return got, None
    finally:
        sock.close()


# ---- bodies: the credential first, then at most 1 MiB, in bounded time ---------------------------------
def chunks(total_mib):
    block = b"x" * (64 * 1024)
    for _ in range(total_mib * 16):
        yield block


@pytest.mark.parametrize("mib", [5, 64])
def test_a_chunked_body_without_credential_is_refused_before_it_is_read(hub, http, token, mib):
    for _ in range(3):
        http.get("/v1/whoami")  # warm
    before = rss_mb(hub)
    started = time.monotonic()
    response = httpx.request("GET", f"{hub.url}/v1/whoami", content=chunks(mib), timeout=30)
    elapsed = time.monotonic() - started
    refused(response, 401, "unauthorized")
    with_token = httpx.request("PUT", f"{hub.url}/v1/db/notes/docs/big", content=chunks(mib), timeout=30,
                               headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert "over 1,114,112 bytes" in refused(with_token, 413, "too_large")
    assert rss_mb(hub) - before < 5, f"the hub grew from {before:.0f} to {rss_mb(hub):.0f} MiB"
    assert elapsed < 10, f"{mib} MiB without a credential took {elapsed:.1f} s to refuse"
    assert http.get("/v1/db/notes/history/big").json() == []


def test_a_client_refused_mid_body_is_told_to_reconnect_and_its_next_request_succeeds(hub, http):
    for i in range(10):  # the refused connection is closed after lingering; the client must not reuse it
        big = http.put("/v1/db/notes/docs/big", content=b"x" * (2 * 1024 * 1024), headers={"Content-Type": "application/json"})
        refused(big, 413, "too_large")
        assert big.headers["connection"] == "close"
        assert http.put(f"/v1/db/notes/docs/after{i}", json={"i": i}).status_code == 200
        anonymous = httpx.put(f"{hub.url}/v1/db/notes/docs/x", content=b"{}" * 300_000, headers={"Content-Type": "application/json"})
        refused(anonymous, 401, "unauthorized")
        assert anonymous.headers["connection"] == "close"
    assert http.get("/v1/whoami").headers.get("connection") != "close"  # no body: the connection stays


def test_a_declared_body_that_never_arrives_does_not_hold_the_connection(hub, http, token):
    head = "PUT /v1/db/notes/docs/slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
    authorized = raw(hub, f"{head}Authorization: Bearer {token}\r\n\r\n{{\"v\": ".encode())
    anonymous = raw(hub, f"{head}\r\n{{\"v\": ".encode())
    got, took = read_until_closed(authorized, BODY_TIMEOUT + MARGIN)
    assert took is not None, "the server kept a connection whose body never came"
    assert got.startswith(b"HTTP/1.1 408") and b'"error":"timeout"' in got, got[:300]
    got, took = read_until_closed(anonymous, BODY_TIMEOUT + MARGIN)
    assert took is not None and got.startswith(b"HTTP/1.1 401"), got[:300]
    assert http.get("/v1/db/notes/history/slow").json() == []


def test_headers_that_never_end_and_silent_connections_are_closed(hub, http):
    started = time.monotonic()
    dribbling = raw(hub, b"GET /health HTTP/1.1\r\nHost: x\r\n")
    silent = raw(hub, b"")
    for sock in (dribbling, silent):
        got, took = read_until_closed(sock, HEADER_TIMEOUT + MARGIN)
        assert took is not None and got == b"", (got[:200], took)
    assert time.monotonic() - started < HEADER_TIMEOUT + MARGIN


def test_two_hundred_stalled_connections_are_all_closed_and_the_hub_serves_meanwhile(hub, http, token):
    stalled = []
    for i in range(200):
        kind = i % 3
        if kind == 0:
            stalled.append(raw(hub, b"PUT /v1/db/notes/docs/s HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n"))
        elif kind == 1:
            stalled.append(raw(hub, b"PUT /v1/db/notes/docs/s HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{"))
        else:
            stalled.append(raw(hub, f"PUT /v1/db/notes/docs/s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                                    "Content-Length: 500\r\n\r\n{".encode()))
    assert http.get("/health").status_code == 200  # served while 200 connections stall
    deadline = time.monotonic() + max(BODY_TIMEOUT, HEADER_TIMEOUT) + MARGIN
    open_ = []
    for sock in stalled:
        _, took = read_until_closed(sock, max(0.5, deadline - time.monotonic()))
        if took is None:
            open_.append(sock)
    assert not open_, f"{len(open_)} of 200 stalled connections were still open"


def test_content_length_that_is_not_a_size_is_refused(hub, http):
    got, _ = read_until_closed(raw(hub, b"PUT /v1/db/notes/docs/x HTTP/1.1\r\nHost: x\r\nContent-Length: " + b"9" * 20 + b"\r\n\r\n"), 10)
    assert got.startswith(b"HTTP/1.1 413"), got[:200]
    got, _ = read_until_closed(raw(hub, b"PUT /v1/db/notes/docs/x HTTP/1.1\r\nHost: x\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n"), 10)
    assert got.startswith(b"HTTP/1.1 400"), got[:200]


# ---- what the HTTP layer parses: paths, headers, key_json, bodies ----------------------------------------
def test_ids_are_the_utf8_the_client_sent(hub, http):
    for raw_id in ("a%FF", "a%FE", "%C3", "%ED%A0%80"):  # not UTF-8; the last a UTF-8-encoded surrogate
        assert "not valid UTF-8" in refused(http.put(f"/v1/db/notes/docs/{raw_id}", json={"v": 1}), 400)
        refused(http.get(f"/v1/db/notes/docs/{raw_id}"), 400)
        refused(http.delete(f"/v1/db/notes/docs/{raw_id}"), 400)
        refused(http.get(f"/v1/db/notes/history/{raw_id}"), 400)
    assert "\ufffd" not in json.dumps([c["id"] for c in http.get("/v1/changes", params={"limit": 1000}).json()["changes"]])
    ok = http.put("/v1/db/notes/docs/caf%C3%A9", json={"v": 1})
    assert ok.status_code == 200 and ok.json()["id"] == "café"
    assert http.get("/v1/db/notes/docs/caf%C3%A9").json()["_id"] == "café"
    refused(http.get("/v1/db/notes/query?field=v&key=%FF"), 400)


@pytest.mark.parametrize("value", [str(2**70), "-1", "abc", "9" * 5000, "1.5", "0x10", "١٢"])
def test_a_last_event_id_that_is_not_a_sequence_number_is_refused(hub, http, value):
    headers = {"Last-Event-ID": value.encode("utf-8")}
    with http.stream("GET", "/v1/changes/stream", headers=headers) as response:
        response.read()
    assert "Last-Event-ID" in refused(response, 400)


def test_a_good_last_event_id_resumes_the_stream(hub, http):
    http.put("/v1/db/notes/docs/le1", json={"v": 1})
    since = http.get("/v1/head").json()["seq"]
    http.put("/v1/db/notes/docs/le2", json={"v": 2})
    with http.stream("GET", "/v1/changes/stream", headers={"Last-Event-ID": str(since)}) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                assert json.loads(line[6:])["id"] == "le2"
                break


@pytest.mark.parametrize("key_json,status", [
    ("NaN", 400), ("Infinity", 400), ("-Infinity", 400), (str(2**70), 400), ("-" + str(2**70), 400), ("9" * 5000, 422),
    ("9" * 4000, 400), ("1e999", 400), ('"\\ud800"', 400), ('"a\\udfffb"', 400), ("[" * 3000, 400), ("{", 400), ("", 400),
])
def test_key_json_is_parsed_strictly(hub, http, key_json, status):
    response = http.get("/v1/db/notes/query", params={"field": "v", "key_json": key_json})
    assert "key_json" in refused(response, status, "unprocessable" if status == 422 else "invalid")


def test_a_strict_key_json_still_matches(hub, http):
    http.put("/v1/db/kj/docs/n", json={"n": 2**62, "f": 1.5, "s": "é"})
    for field, key in (("n", str(2**62)), ("f", "1.5"), ("s", '"\\u00e9"')):
        assert [d["_id"] for d in http.get("/v1/db/kj/query", params={"field": field, "key_json": key}).json()["docs"]] == ["n"]


@pytest.mark.parametrize("body", [
    b'{"v": "\xff"}', b"{not json", b'{"v": 1', b'{"a":' * 5000 + b"1" + b"}" * 5000, b'{"v": ' + b"1" * 5000 + b"}",
    b"[1, 2]", b'"text"', b"\xef\xbb\xbf{}" + b"\xc0",
])
def test_a_body_that_is_not_a_json_object_is_422_whatever_is_wrong_with_it(hub, http, body):
    response = http.put("/v1/db/notes/docs/b", content=body, headers={"Content-Type": "application/json"})
    refused(response, 422, "unprocessable")
    assert http.get("/v1/db/notes/history/b").json() == []


# ---- /health answers within its budget -----------------------------------------------------------------
def test_health_answers_within_a_second_and_says_what_is_wrong_while_the_store_hangs(remote_hubs):
    """On PostgreSQL, where a lock can make the store's reads wait (a SQLite file in WAL mode
    cannot be locked against readers; tests/hub/test_api.py checks the budget without a store)."""
    hub = remote_hubs("postgres")
    conn = psycopg.connect(hub.database_url)
    conn.execute("LOCK TABLE changes, docs IN ACCESS EXCLUSIVE MODE")
    try:
        for _ in range(2):  # the second check joins the one still waiting on the store
            started = time.monotonic()
            response = httpx.get(f"{hub.url}/health", timeout=30)
            took = time.monotonic() - started
            assert response.status_code == 503, response.text
            assert response.json()["ok"] is False
            assert response.json()["store"]["ok"] is False
            assert response.json()["store"]["error"] == "the store did not answer within 1 s"
            assert took < 1 + MARGIN / 2, f"/health took {took:.1f} s"
    finally:
        conn.rollback()
        conn.close()
    deadline = time.monotonic() + 60
    while httpx.get(f"{hub.url}/health", timeout=30).status_code != 200:
        assert time.monotonic() < deadline, "the hub did not recover after the store came back"
        time.sleep(0.2)


# ---- STORE: input only the store can refuse (passes with the ledger work of issue 9) -------------------
def nested(depth):
    doc: dict = {"leaf": 1}
    for _ in range(depth - 1):
        doc = {"a": doc}
    return doc


def test_store_a_deeply_nested_document_is_refused_and_readers_are_unharmed(hub, http):
    http.put("/v1/db/deep/docs/plain", json={"status": "open"})
    start = http.get("/v1/head").json()["seq"]
    response = http.put("/v1/db/deep/docs/d", content=json.dumps(nested(256)), headers={"Content-Type": "application/json"})
    assert response.status_code in (400, 422), response.text[:300]
    refused(response, response.status_code)
    assert http.get("/v1/db/deep/history/d").json() == []
    assert http.get("/v1/db/deep/docs/plain").json()["status"] == "open"
    assert [d["_id"] for d in http.get("/v1/db/deep/query", params={"field": "status", "key": "open"}).json()["docs"]] == ["plain"]
    http.put("/v1/db/deep/docs/after", json={"status": "open"})
    with http.stream("GET", "/v1/changes/stream", params={"since": start}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                assert json.loads(line[6:])["id"] == "after"
                break


@pytest.mark.parametrize("body", [
    '{"v": "\\ud800"}', '{"v": "a\\udfffb"}', '{"\\ud800": 1}',  # lone surrogates
    '{"v": "a\\u0000b"}', '{"a\\u0000b": 1}', '{"v": {"w": ["\\u0000"]}}',  # NUL
])
def test_store_lone_surrogates_and_nul_in_a_document_are_refused(hub, http, body):
    response = http.put("/v1/db/notes/docs/bad", content=body.encode(), headers={"Content-Type": "application/json"})
    refused(response, 400)
    assert http.get("/v1/db/notes/history/bad").json() == []


@pytest.mark.parametrize("params", [{"field": "v", "key": "a\x00b"}, {"field": "v", "key_json": '"a\\u0000b"'}])
def test_store_nul_in_a_query_key_is_refused(hub, http, params):
    refused(http.get("/v1/db/notes/query", params=params), 400)


def test_store_queries_on_two_hundred_fields_make_no_index(hub, http):
    before = index_count(hub)
    for i in range(200):
        response = http.get("/v1/db/notes/query", params={"field": f"probe{i}", "key": "x"})
        assert response.status_code == 200, response.text
    assert index_count(hub) == before


def index_count(hub):
    if hub.kind == "sqlite":
        conn = sqlite3.connect(hub.database_url.removeprefix("sqlite:///"))
        try:
            return conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'index'").fetchone()[0]
        finally:
            conn.close()
    with psycopg.connect(hub.database_url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema()").fetchone()[0]
