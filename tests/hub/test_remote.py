"""The remote backend's seams: retries, error translation, signing, key storage."""

from __future__ import annotations

import httpx
import keyring
import pytest
from keyring.backend import KeyringBackend

from hub.app import build_rules
from hub.auth import (
    KEYRING_SERVICE,
    Authenticator,
    Unauthorized,
    approve_device,
    load_key,
    new_device_key,
    public_key_of,
    save_key,
)
from hub.gate import RequestTimeout
from hub.remote import DeviceAuth, RemoteStore, TokenAuth
from ledger import SYSTEM, BackendError, Conflict, Forbidden, Invalid, LedgerError, NotFound, TooLarge, open_store


def store_with(handler, attempts=3):
    return RemoteStore("http://hub.test", TokenAuth("skh_0123456789ab_" + "s" * 43), transport=httpx.MockTransport(handler), attempts=attempts)


def test_transport_errors_and_5xx_are_retried_then_succeed():
    calls = []

    def handler(request):
        calls.append(request.url.path)
        if len(calls) == 1:
            raise httpx.ConnectError("refused")
        if len(calls) == 2:
            return httpx.Response(503, json={"error": "backend", "reason": "database restarting"})
        return httpx.Response(200, json={"_id": "n", "_rev": "1-a", "v": 1})

    assert store_with(handler).get("notes", "n")["v"] == 1
    assert len(calls) == 3


def test_retries_are_bounded_and_end_in_a_clear_error():
    def handler(request):
        raise httpx.ConnectTimeout("slow")

    with pytest.raises(BackendError) as err:
        store_with(handler, attempts=2).get("notes", "n")
    assert "cannot reach the hub at http://hub.test" in err.value.reason


@pytest.mark.parametrize("status,code,cls", [
    (400, "invalid", Invalid), (401, "unauthorized", Unauthorized), (403, "forbidden", Forbidden), (404, "not_found", NotFound),
    (408, "timeout", RequestTimeout), (409, "conflict", Conflict), (413, "too_large", TooLarge), (422, "unprocessable", Invalid),
    (418, "teapot", LedgerError),
])
def test_4xx_is_tried_exactly_once_and_keeps_its_meaning(status, code, cls):
    calls = []

    def handler(request):
        calls.append(request.method)
        return httpx.Response(status, json={"error": code, "reason": "the hub's words"})

    with pytest.raises(cls) as err:
        store_with(handler, attempts=4).put("notes", {"v": 1}, "n", if_rev="1-a")
    assert err.value.reason == "the hub's words" and err.value.code == code and calls == ["PUT"]
    calls.clear()
    with pytest.raises(cls):
        store_with(handler, attempts=4).query("notes", "status", "open")
    assert calls == ["GET"]


def test_5xx_is_retried_up_to_the_attempts_then_raised():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(503, json={"error": "backend", "reason": "database restarting"})

    with pytest.raises(BackendError, match="database restarting"):
        store_with(handler, attempts=3).get("notes", "n")
    assert len(calls) == 3


def test_a_response_without_an_error_body_is_still_one_clear_error():
    with pytest.raises(BackendError, match="without an error body"):
        store_with(lambda r: httpx.Response(502, text="<html>bad gateway</html>"), attempts=1).get("notes", "n")


def test_device_auth_signs_the_exact_request_for_its_hub_and_hides_the_key(tmp_path):
    key = new_device_key()
    store = open_store(f"sqlite:///{tmp_path}/hub.db", build_rules(), SYSTEM)
    approve_device(store, "lane", "device:builder", public_key_of(key), clock=SYSTEM)
    seen = {}

    def handler(request):
        seen["auth"] = request.headers["Authorization"]
        seen["target"] = request.url.raw_path.decode()
        seen["body"] = request.content
        return httpx.Response(200, json={"id": "n", "rev": "1-a"})

    auth = DeviceAuth("lane", key, SYSTEM)
    remote = RemoteStore("http://Hub.Test:80/", auth, transport=httpx.MockTransport(handler))
    remote.put("notes", {"v": 1}, "a/b", if_rev="1-x")
    assert seen["auth"].startswith('SkyhubDevice v="2",hub="http://hub.test",name="lane",ts="')
    assert seen["target"] == "/v1/db/notes/docs/a%2Fb?if_rev=1-x"
    # what the CLI signs is what a hub whose public URL is the --hub URL accepts
    now = int(seen["auth"].split('ts="')[1].split('"')[0])
    hub = Authenticator(store, "http://hub.test")
    assert hub.authenticate(seen["auth"], "PUT", seen["target"], seen["body"], now).actor == "device:builder"
    with pytest.raises(Unauthorized, match="signed for hub"):
        Authenticator(store, "http://other.test").check(seen["auth"], "PUT", seen["target"], now)
    assert "key=***" in repr(auth) and "skh_" not in repr(TokenAuth("skh_secret"))
    with pytest.raises(Invalid, match="signs for one hub"):
        httpx.Client(auth=auth, transport=httpx.MockTransport(handler)).get("http://hub.test/v1/whoami")
    store.close()


class MemoryKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self):
        super().__init__()
        self.items = {}

    def set_password(self, service, username, password):
        self.items[(service, username)] = password

    def get_password(self, service, username):
        return self.items.get((service, username))

    def delete_password(self, service, username):
        self.items.pop((service, username), None)


@pytest.fixture
def memory_keyring():
    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


def test_register_keeps_the_key_in_the_keyring_and_loads_it_back(memory_keyring):
    key = new_device_key()
    where = save_key(key, name="gha-builder", hub="https://hub.test/", key_file=None)
    assert "OS keyring" in where
    assert list(memory_keyring.items) == [(KEYRING_SERVICE, "device:gha-builder@https://hub.test")]
    loaded = load_key(name="gha-builder", hub="https://hub.test")
    assert public_key_of(loaded) == public_key_of(key)


def test_without_a_keyring_the_error_names_the_alternative(tmp_path):
    from keyring.backends.fail import Keyring as FailKeyring

    previous = keyring.get_keyring()
    keyring.set_keyring(FailKeyring())
    try:
        with pytest.raises(Invalid, match="--key-file"):
            save_key(new_device_key(), name="lane", hub="https://hub.test", key_file=None)
        with pytest.raises(Invalid, match="skyhub device register"):
            load_key(name="lane", hub="https://hub.test")
    finally:
        keyring.set_keyring(previous)


def test_a_key_file_is_private_and_never_overwritten(tmp_path):
    path = tmp_path / "builder.pem"
    key = new_device_key()
    save_key(key, name="lane", hub="https://hub.test", key_file=str(path))
    assert path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(Invalid, match="refusing to overwrite"):
        save_key(new_device_key(), name="lane", hub="https://hub.test", key_file=str(path))
    assert public_key_of(load_key(name="lane", hub="x", key_file=str(path))) == public_key_of(key)
    assert public_key_of(load_key(name="lane", hub="x", key_env=path.read_text())) == public_key_of(key)
    with pytest.raises(Invalid, match="PEM"):
        load_key(name="lane", hub="x", key_env="not a key")
