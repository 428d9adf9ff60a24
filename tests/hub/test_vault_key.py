"""A hub without a vault master key says so: in /health, once at start, and to a remote
`vault put`, instead of looking healthy while the vault tick fails every minute."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx

from hub.app import build_rules
from ledger import SYSTEM, open_store
from skyhub_testkit.hub import ROOT, Hub

NO_KEY = {"SKYHUB_VAULT_KEY": "", "SKYHUB_VAULT_KEY_FILE": "", "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


def test_a_hub_without_a_vault_key_says_so_everywhere(tmp_path):
    url = f"sqlite:///{tmp_path}/hub.db"
    hub = Hub(url, tmp_path, jobs=False, env=NO_KEY)
    try:
        said = [line for line in hub.stderr if "the vault has no key yet; everything runs, but credentials" in line]
        assert len(said) == 1 and "SKYHUB_VAULT_KEY" in said[0]  # once, at start, with the remedy
        health = httpx.get(f"{hub.url}/health").json()
        assert health["vault"]["key"] is False and "skyhub vault init" in health["vault"]["reason"]
        assert health["ok"] is True  # no credential needs the key yet

        env = {**os.environ, **NO_KEY, "PYTHONPATH": str(ROOT), "SKYHUB_HUB_URL": hub.url, "SKYHUB_TOKEN": hub.token("ana")}
        put = subprocess.run([sys.executable, "-m", "hub", "vault", "put", "instagram", "1"], input="TOKEN-abc123",
                             capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
        assert put.returncode == 1 and put.stderr.startswith("skyhub: no_master_key: the hub has no vault master key"), put.stderr

        # a credential that the hub can never open: the vault tick fails every run, and health says so
        store = open_store(url, build_rules(), SYSTEM)
        try:
            store.put("vault", {"kind": "credential", "platform": "instagram", "account": "1", "status": "unverified", "version": 1},
                      "instagram:1", actor="admin")
        finally:
            store.close()
        response = httpx.get(f"{hub.url}/health")
        assert response.status_code == 503 and response.json()["ok"] is False and response.json()["vault"]["key"] is False
    finally:
        hub.stop()
