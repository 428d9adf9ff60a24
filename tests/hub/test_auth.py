"""Credentials: tokens for people, signed requests for devices; refused requests write nothing."""

from __future__ import annotations

import httpx
import pytest

from hub.app import build_rules
from hub.auth import (
    AUTH_DB,
    Authenticator,
    Unauthorized,
    add_user,
    approve_device,
    canonical_hub,
    list_tokens,
    new_device_key,
    public_key_of,
    revoke_device,
    revoke_token,
    sign_request,
)
from ledger import SYSTEM, FakeClock, Forbidden, Invalid, open_store
from tests.conftest import reset_database

HUB = "http://hub.test:8470"


@pytest.fixture
def local(tmp_path):
    clock = FakeClock()
    store = open_store(f"sqlite:///{tmp_path}/auth.db", build_rules(), clock)
    yield store, clock
    store.close()


def test_a_token_authenticates_as_its_person_until_revoked(local):
    store, clock = local
    token = add_user(store, "ana", clock=clock)
    auth = Authenticator(store, HUB)
    assert auth.authenticate(f"Bearer {token}", "GET", "/v1/whoami", b"", clock.now_ms()).actor == "user:ana"
    (meta,) = list_tokens(store)
    assert meta["name"] == "ana" and "hash" not in meta and token not in str(meta)
    revoke_token(store, "ana", clock=clock)
    with pytest.raises(Unauthorized) as err:
        auth.authenticate(f"Bearer {token}", "GET", "/v1/whoami", b"", clock.now_ms())
    assert "revoked" in err.value.reason


@pytest.mark.parametrize("header,reason", [
    (None, "no credential"),
    ("Bearer nope", "malformed"),
    ("Bearer skh_0123456789ab_" + "x" * 43, "unknown token"),
    ("Basic dXNlcjpwYXNz", "unknown authorization scheme"),
    ('SkyhubDevice v="2",hub="http://hub.test:8470",name="ghost",ts="1",nonce="0123456789ab",sig="' + "A" * 86 + '=="',
     "unknown device"),
    ('SkyhubDevice name="ghost",ts="1",nonce="n",sig="AAAA"', "old format (skyhub-device-v1)"),
    ('SkyhubDevice name="x"', "malformed"),
    ('SkyhubDevice v="2",name="x",ts="1",nonce="0123456789ab",sig="AAAA"', "malformed"),
    ('SkyhubDevice v="2",hub="h",name="x",ts="' + "9" * 5000 + '",nonce="0123456789ab",sig="' + "A" * 86 + '=="', "malformed"),
])
def test_bad_credentials_are_refused_with_a_reason(local, header, reason):
    store, clock = local
    with pytest.raises(Unauthorized) as err:
        Authenticator(store, HUB).authenticate(header, "GET", "/v1/whoami", b"", clock.now_ms())
    assert reason in err.value.reason


def test_device_signatures_bind_method_path_time_body_and_are_used_once(local):
    store, clock = local
    key = new_device_key()
    approve_device(store, "gha-builder", "device:builder", public_key_of(key), clock=clock)
    auth = Authenticator(store, HUB)
    now = clock.now_ms()

    def sign(k=key, name="gha-builder", method="PUT", target="/v1/db/jobs/docs/j1?if_rev=1-a", body=b'{"a":1}', ts=now, hub=HUB):
        return sign_request(k, name, method, target, body, ts, hub=hub)

    header = sign()
    assert auth.authenticate(header, "PUT", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":1}', now).actor == "device:builder"
    with pytest.raises(Unauthorized, match="replay"):
        auth.authenticate(header, "PUT", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":1}', now)
    for method, target, body in [("POST", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":1}'),
                                 ("PUT", "/v1/db/jobs/docs/j2?if_rev=1-a", b'{"a":1}'),
                                 ("PUT", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":2}')]:
        with pytest.raises(Unauthorized, match="does not match"):
            auth.authenticate(sign(), method, target, body, now)
    with pytest.raises(Unauthorized, match="expired"):
        auth.authenticate(sign(method="GET", target="/v1/whoami", body=b"", ts=now - 61_000), "GET", "/v1/whoami", b"", now)
    with pytest.raises(Unauthorized, match="does not match"):
        auth.authenticate(sign(k=new_device_key(), method="GET", target="/v1/whoami", body=b""), "GET", "/v1/whoami", b"", now)
    revoke_device(store, "gha-builder", clock=clock)
    with pytest.raises(Unauthorized, match="revoked"):
        auth.authenticate(sign(method="GET", target="/v1/whoami", body=b""), "GET", "/v1/whoami", b"", now)


def test_a_signature_binds_the_device_name_and_the_hub(local):
    store, clock = local
    key = new_device_key()
    # one key approved under two names, acting as two different actors
    approve_device(store, "lane-a", "device:builder", public_key_of(key), clock=clock)
    approve_device(store, "lane-b", "device:publisher", public_key_of(key), clock=clock)
    auth = Authenticator(store, HUB)
    now = clock.now_ms()
    signed_as_a = sign_request(key, "lane-a", "GET", "/v1/whoami", b"", now, hub=HUB)
    as_b = signed_as_a.replace('name="lane-a"', 'name="lane-b"')
    with pytest.raises(Unauthorized) as err:
        auth.authenticate(as_b, "GET", "/v1/whoami", b"", now)
    assert "does not match device 'lane-b'" in err.value.reason and "another device name" in err.value.reason
    assert auth.authenticate(signed_as_a, "GET", "/v1/whoami", b"", now).actor == "device:builder"

    for_other_hub = sign_request(key, "lane-a", "GET", "/v1/whoami", b"", now, hub="https://other-hub.test")
    with pytest.raises(Unauthorized) as err:
        auth.authenticate(for_other_hub, "GET", "/v1/whoami", b"", now)
    assert err.value.reason.startswith("this request was signed for hub 'https://other-hub.test', but this hub is 'http://hub.test:8470'")
    assert "SKYHUB_PUBLIC_URL" in err.value.reason
    # lying in the header's hub= changes nothing: the hub verifies with its own URL
    lying = for_other_hub.replace('hub="https://other-hub.test"', f'hub="{HUB}"')
    with pytest.raises(Unauthorized, match="does not match"):
        auth.authenticate(lying, "GET", "/v1/whoami", b"", now)
    # the same hub written differently is the same hub
    same = sign_request(key, "lane-a", "GET", "/v1/whoami", b"", now, hub="HTTP://Hub.Test:8470/")
    assert auth.authenticate(same, "GET", "/v1/whoami", b"", now).actor == "device:builder"


@pytest.mark.parametrize("url,canonical", [
    ("http://Hub.Example.org:80/", "http://hub.example.org"),
    ("https://hub.example.org:443", "https://hub.example.org"),
    ("https://hub.example.org:8443/skyhub/", "https://hub.example.org:8443/skyhub"),
    ("http://[::1]:8470", "http://[::1]:8470"),
])
def test_hub_urls_are_compared_in_one_canonical_form(url, canonical):
    assert canonical_hub(url) == canonical


@pytest.mark.parametrize("url", ["hub.example.org", "ftp://hub", "http://", "http://h:99999", 'http://h/"x', "http://h/?q=1"])
def test_a_hub_url_that_is_not_one_is_refused(url):
    with pytest.raises(Invalid, match="not valid"):
        canonical_hub(url)


def test_the_hub_keeps_no_secret_of_a_device_or_a_token(local, tmp_path):
    store, _ = local
    token = add_user(store, "ana", clock=SYSTEM)
    key = new_device_key()
    approve_device(store, "gha-builder", "device:builder", public_key_of(key), clock=SYSTEM)
    from hub.auth import private_key_to_pem

    pem = private_key_to_pem(key)
    secret = token.split("_", 2)[2]  # skh_<id>_<secret>; the secret itself may hold "_"
    assert len(secret) >= 40
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("auth.db*") if p.is_file())
    assert secret.encode() not in raw and token.encode() not in raw
    assert pem.split("\n")[1].encode() not in raw


def test_only_admin_writes_the_auth_database(local):
    store, _ = local
    with pytest.raises(Forbidden):
        store.put(AUTH_DB, {"kind": "token", "actor": "admin"}, "token:evil", actor="user:ana")
    with pytest.raises(Invalid):
        approve_device(store, "root", "admin", public_key_of(new_device_key()), clock=SYSTEM)


# ---- over HTTP, against a real `skyhub run` ------------------------------------------------
@pytest.fixture(params=["sqlite", "postgres"])
def hub(request, remote_hubs):
    hub = remote_hubs(request.param)
    reset_database(hub.database_url)
    yield hub
    hub.close_clients()


def history_len(hub, db, doc_id):
    return len(hub.admin.history(db, doc_id))


def test_http_refusals_are_401_with_the_documented_body_and_write_nothing(hub):
    token = hub.token("ana")
    key = new_device_key()
    approve_device(hub.admin, "lane", "device:builder", public_key_of(key), clock=hub.clock)
    url = f"{hub.url}/v1/db/notes/docs/n1"
    body = b'{"v": 1}'
    target = "/v1/db/notes/docs/n1"
    now = hub.clock.now_ms()
    cases = {
        "none": {},
        "bad token": {"Authorization": "Bearer skh_0123456789ab_" + "y" * 43},
        "wrong key": {"Authorization": sign_request(new_device_key(), "lane", "PUT", target, body, now, hub=hub.url)},
        "expired": {"Authorization": sign_request(key, "lane", "PUT", target, body, now - 120_000, hub=hub.url)},
        "other hub": {"Authorization": sign_request(key, "lane", "PUT", target, body, now, hub="http://127.0.0.1:1")},
    }
    revoked = hub.token("bob")
    revoke_token(hub.admin, "bob", clock=hub.clock)
    cases["revoked"] = {"Authorization": f"Bearer {revoked}"}
    for name, headers in cases.items():
        response = httpx.put(url, content=body, headers={**headers, "Content-Type": "application/json"})
        assert response.status_code == 401, name
        assert set(response.json()) == {"error", "reason"} and response.json()["error"] == "unauthorized"
    replay = {"Authorization": sign_request(key, "lane", "GET", "/v1/whoami", b"", now, hub=hub.url)}
    assert httpx.get(f"{hub.url}/v1/whoami", headers=replay).json()["actor"] == "device:builder"
    assert httpx.get(f"{hub.url}/v1/whoami", headers=replay).status_code == 401
    assert history_len(hub, "notes", "n1") == 0
    ok = httpx.put(url, content=body, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert ok.status_code == 200 and history_len(hub, "notes", "n1") == 1
    assert token not in "".join(hub.stderr) and revoked not in "".join(hub.stderr)


def test_a_device_writing_an_edge_its_actor_may_not_gets_403_with_the_machines_reason(hub):
    person = hub.client("user:ana")
    builder = hub.client("device:builder")
    worker = hub.client("handler:on_change")
    job = person.put("jobs", {"type": "job", "status": "pending", "input": 1}, "j1", actor="user:ana")
    claim = {"type": "job", "status": "running", "input": 1, "attempts": 1, "claimId": "c1", "leaseUntil": hub.clock.now_ms() + 60_000}
    with pytest.raises(Forbidden) as err:
        builder.put("jobs", claim, "j1", actor="device:builder", if_rev=job["_rev"])
    assert err.value.reason == "device:builder may not move a job from pending to running (only handler:on_change)"
    assert history_len(hub, "jobs", "j1") == 1
    # the actor the machine names may: same endpoint, same body, other credential
    worker.put("jobs", claim, "j1", actor="handler:on_change", if_rev=job["_rev"])
    assert [c.actor for c in hub.admin.history("jobs", "j1")] == ["user:ana", "handler:on_change"]


def test_the_auth_database_is_not_reachable_through_the_api(hub):
    person = hub.client("user:ana")
    with pytest.raises(Forbidden):
        person.query(AUTH_DB, "kind", "token")
    with pytest.raises(Forbidden):
        person.put(AUTH_DB, {"kind": "token"}, "token:x", actor="user:ana")
    assert all(c.db != AUTH_DB for c in person.changes(0, 1000))


def test_health_needs_no_credential_and_everything_else_does(hub):
    health = httpx.get(f"{hub.url}/health").json()
    assert health["ok"] is True and health["store"]["ok"] is True and health["scheduler"]["running"] is True
    spec = httpx.get(f"{hub.url}/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method in ops:
            if path.startswith("/v1/") and "{" not in path:
                assert httpx.request(method.upper(), f"{hub.url}{path}").status_code == 401, (method, path)


def test_a_request_signed_for_one_hub_is_refused_by_another_and_the_host_header_is_not_trusted(remote_hubs):
    a, b = remote_hubs("sqlite"), remote_hubs("postgres")
    key = new_device_key()
    for h in (a, b):
        approve_device(h.admin, "roamer", "device:builder", public_key_of(key), clock=h.clock)
    now = a.clock.now_ms()
    header = sign_request(key, "roamer", "GET", "/v1/whoami", b"", now, hub=a.url)
    refused = httpx.get(f"{b.url}/v1/whoami", headers={"Authorization": header})
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
    assert refused.json()["reason"].startswith(f"this request was signed for hub '{a.url}', but this hub is '{b.url}'")
    # hub A checks against its own public URL, whatever Host the request names
    spoofed = httpx.get(f"{a.url}/v1/whoami", headers={"Authorization": header, "Host": "evil.test"})
    assert spoofed.status_code == 200 and spoofed.json()["actor"] == "device:builder"
    moved = sign_request(key, "roamer", "GET", "/v1/whoami", b"", now, hub="http://evil.test")
    refused = httpx.get(f"{a.url}/v1/whoami", headers={"Authorization": moved, "Host": "evil.test"})
    assert refused.status_code == 401 and "signed for hub 'http://evil.test'" in refused.json()["reason"]


def test_a_hub_behind_a_proxy_checks_signatures_against_its_public_url(tmp_path):
    import subprocess
    import sys

    from skyhub_testkit.hub import ROOT, Hub

    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False, env={"SKYHUB_PUBLIC_URL": "https://hub.example.org/"})
    try:
        key = new_device_key()
        approve_device(hub.admin, "lane", "device:builder", public_key_of(key), clock=hub.clock)
        now = hub.clock.now_ms()
        for_public = sign_request(key, "lane", "GET", "/v1/whoami", b"", now, hub="https://hub.example.org")
        assert httpx.get(f"{hub.url}/v1/whoami", headers={"Authorization": for_public}).json()["actor"] == "device:builder"
        for_bound = sign_request(key, "lane", "GET", "/v1/whoami", b"", now, hub=hub.url)
        refused = httpx.get(f"{hub.url}/v1/whoami", headers={"Authorization": for_bound})
        assert refused.status_code == 401 and "but this hub is 'https://hub.example.org'" in refused.json()["reason"]
    finally:
        hub.stop()
    bad = subprocess.run([sys.executable, "-m", "hub", "run", "--port", "0"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**hub.env, "SKYHUB_PUBLIC_URL": "hub.example.org", "PYTHONPATH": str(ROOT)})
    assert bad.returncode == 1 and "public_url (SKYHUB_PUBLIC_URL) 'hub.example.org' is not a URL" in bad.stderr
