"""Sealing and the master key."""

from __future__ import annotations

import os

import keyring
import pytest
from keyring.backends.fail import Keyring as NoKeyring

from tests.hub.test_remote import MemoryKeyring
from vault import NoMasterKey, VaultError, WrongMasterKey, init_key, load_master_key, new_key_text, parse_key
from vault.seal import fingerprint, seal, unseal


def test_a_sealed_secret_opens_only_for_its_credential_and_version(key):
    sealed = seal(key, "instagram:1", 3, {"accessToken": "tok"})
    assert unseal(key, "instagram:1", 3, sealed) == {"accessToken": "tok"}
    assert "tok" not in str(sealed)
    for cred, version in [("instagram:2", 3), ("instagram:1", 4)]:
        with pytest.raises(WrongMasterKey, match="altered or moved"):
            unseal(key, cred, version, sealed)


def test_a_wrong_master_key_is_a_clear_error_not_garbage(key):
    sealed = seal(key, "threads:1", 1, {"accessToken": "tok"})
    other = parse_key(new_key_text(), "SKYHUB_VAULT_KEY")
    with pytest.raises(WrongMasterKey) as err:
        unseal(other, "threads:1", 1, sealed)
    assert key.key_id in err.value.reason and other.key_id in err.value.reason and "SKYHUB_VAULT_KEY" in err.value.reason


def test_fingerprints_tell_versions_apart_and_depend_on_the_key(key):
    a, b = fingerprint(key, {"accessToken": "one"}), fingerprint(key, {"accessToken": "two"})
    assert a != b and a == fingerprint(key, {"accessToken": "one"})
    assert fingerprint(parse_key(new_key_text(), "x"), {"accessToken": "one"}) != a
    assert "one" not in repr(key) and key.key_id in repr(key)


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("SKYHUB_VAULT_KEY", raising=False)
    monkeypatch.delenv("SKYHUB_VAULT_KEY_FILE", raising=False)
    previous = keyring.get_keyring()
    yield monkeypatch
    keyring.set_keyring(previous)


def test_without_a_keyring_or_a_key_the_vault_refuses_and_names_both_alternatives(clean_env):
    keyring.set_keyring(NoKeyring())
    with pytest.raises(NoMasterKey) as err:
        load_master_key()
    assert "SKYHUB_VAULT_KEY" in err.value.reason and "--key-file" in err.value.reason and "no OS keyring" in err.value.reason


def test_lookup_order_env_then_file_then_keyring(clean_env, tmp_path):
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    assert "OS keyring" in init_key()
    from_ring = load_master_key()
    assert from_ring.source == "the OS keyring"
    with pytest.raises(VaultError, match="refusing to replace"):
        init_key()
    path = tmp_path / "vault.key"
    init_key(str(path))
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_master_key(str(path)).source.startswith("key file")
    clean_env.setenv("SKYHUB_VAULT_KEY_FILE", str(path))
    assert load_master_key().raw == load_master_key(str(path)).raw != from_ring.raw
    clean_env.setenv("SKYHUB_VAULT_KEY", new_key_text())
    assert load_master_key().source == "SKYHUB_VAULT_KEY"


def test_a_key_file_others_can_read_is_refused(clean_env, tmp_path):
    path = tmp_path / "vault.key"
    path.write_text(new_key_text())
    os.chmod(path, 0o644)
    with pytest.raises(VaultError, match="chmod 600"):
        load_master_key(str(path))
    with pytest.raises(VaultError, match="not valid"):
        parse_key("short", "SKYHUB_VAULT_KEY")
