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
    list_tokens,
    new_device_key,
    public_key_of,
    revoke_device,
    revoke_token,
    sign_request,
)
from ledger import FakeClock, Forbidden, Invalid, open_store
from tests.conftest import reset_database


@pytest.fixture
def local(tmp_path):
    clock = FakeClock()
    store = open_store(f"sqlite:///{tmp_path}/auth.db", build_rules(), clock)
    yield store, clock
    store.close()


def test_a_token_authenticates_as_its_person_until_revoked(local):
    store, clock = local
    token = add_user(store, "ana")
    auth = Authenticator(store)
    assert auth.authenticate(f"Bearer {token}", "GET", "/v1/whoami", b"", clock.now_ms()).actor == "user:ana"
    (meta,) = list_tokens(store)
    assert meta["name"] == "ana" and "hash" not in meta and token not in str(meta)
    revoke_token(store, "ana")
    with pytest.raises(Unauthorized) as err:
        auth.authenticate(f"Bearer {token}", "GET", "/v1/whoami", b"", clock.now_ms())
    assert "revoked" in err.value.reason


@pytest.mark.parametrize("header,reason", [
    (None, "no credential"),
    ("Bearer nope", "malformed"),
    ("Bearer skh_0123456789ab_" + "x" * 43, "unknown token"),
    ("Basic dXNlcjpwYXNz", "unknown authorization scheme"),
    ('SkyhubDevice name="ghost",ts="1",nonce="n",sig="AAAA"', "unknown device"),
    ('SkyhubDevice name="x"', "malformed"),
])
def test_bad_credentials_are_refused_with_a_reason(local, header, reason):
    store, clock = local
    with pytest.raises(Unauthorized) as err:
        Authenticator(store).authenticate(header, "GET", "/v1/whoami", b"", clock.now_ms())
    assert reason in err.value.reason


def test_device_signatures_bind_method_path_time_body_and_are_used_once(local):
    store, clock = local
    key = new_device_key()
    approve_device(store, "gha-builder", "device:builder", public_key_of(key))
    auth = Authenticator(store)
    now = clock.now_ms()
    header = sign_request(key, "gha-builder", "PUT", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":1}', now)
    assert auth.authenticate(header, "PUT", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":1}', now).actor == "device:builder"
    with pytest.raises(Unauthorized, match="replay"):
        auth.authenticate(header, "PUT", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":1}', now)
    for method, target, body in [("POST", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":1}'),
                                 ("PUT", "/v1/db/jobs/docs/j2?if_rev=1-a", b'{"a":1}'),
                                 ("PUT", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":2}')]:
        fresh = sign_request(key, "gha-builder", "PUT", "/v1/db/jobs/docs/j1?if_rev=1-a", b'{"a":1}', now)
        with pytest.raises(Unauthorized, match="does not match"):
            auth.authenticate(fresh, method, target, body, now)
    old = sign_request(key, "gha-builder", "GET", "/v1/whoami", b"", now - 61_000)
    with pytest.raises(Unauthorized, match="expired"):
        auth.authenticate(old, "GET", "/v1/whoami", b"", now)
    other = new_device_key()
    with pytest.raises(Unauthorized, match="does not match"):
        auth.authenticate(sign_request(other, "gha-builder", "GET", "/v1/whoami", b"", now), "GET", "/v1/whoami", b"", now)
    revoke_device(store, "gha-builder")
    with pytest.raises(Unauthorized, match="revoked"):
        auth.authenticate(sign_request(key, "gha-builder", "GET", "/v1/whoami", b"", now), "GET", "/v1/whoami", b"", now)


def test_the_hub_keeps_no_secret_of_a_device_or_a_token(local, tmp_path):
    store, _ = local
    token = add_user(store, "ana")
    key = new_device_key()
    approve_device(store, "gha-builder", "device:builder", public_key_of(key))
    from hub.auth import private_key_to_pem

    pem = private_key_to_pem(key)
    secret = token.rsplit("_", 1)[1]
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("auth.db*"))
    assert secret.encode() not in raw and token.encode() not in raw
    assert pem.split("\n")[1].encode() not in raw


def test_only_admin_writes_the_auth_database(local):
    store, _ = local
    with pytest.raises(Forbidden):
        store.put(AUTH_DB, {"kind": "token", "actor": "admin"}, "token:evil", actor="user:ana")
    with pytest.raises(Invalid):
        approve_device(store, "root", "admin", public_key_of(new_device_key()))


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
    approve_device(hub.admin, "lane", "device:builder", public_key_of(key))
    url = f"{hub.url}/v1/db/notes/docs/n1"
    body = b'{"v": 1}'
    target = "/v1/db/notes/docs/n1"
    now = hub.admin.clock.now_ms()
    cases = {
        "none": {},
        "bad token": {"Authorization": "Bearer skh_0123456789ab_" + "y" * 43},
        "wrong key": {"Authorization": sign_request(new_device_key(), "lane", "PUT", target, body, now)},
        "expired": {"Authorization": sign_request(key, "lane", "PUT", target, body, now - 120_000)},
    }
    revoked = hub.token("bob")
    revoke_token(hub.admin, "bob")
    cases["revoked"] = {"Authorization": f"Bearer {revoked}"}
    for name, headers in cases.items():
        response = httpx.put(url, content=body, headers={**headers, "Content-Type": "application/json"})
        assert response.status_code == 401, name
        assert set(response.json()) == {"error", "reason"} and response.json()["error"] == "unauthorized"
    replay = {"Authorization": sign_request(key, "lane", "GET", "/v1/whoami", b"", now)}
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
    claim = {"type": "job", "status": "running", "input": 1, "attempts": 1, "claimId": "c1", "leaseUntil": hub.admin.clock.now_ms() + 60_000}
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
