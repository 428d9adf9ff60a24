"""The write-only vault: sealed credentials, their rotation, and egress probes.

Imports the ledger and the platforms, nothing else of skyhub. What calls out to the
platforms (``Maintainer``, ``Checks``, ``Prober``) is loaded on first use, so importing the
vault to read or write credentials does not load an HTTP stack."""

from __future__ import annotations

import importlib
from typing import Any

from .credentials import CREDENTIALS, DB, PLATFORMS, Vault, credential_id, public
from .errors import NeedsReauth, NoMasterKey, NotRevealable, VaultError, WrongMasterKey
from .hold import fix_for, held_for, hold, paste_url, release
from .keys import KeyLoader, MasterKey, init_key, load_master_key, new_key_text, parse_key

_LAZY = {
    "Checks": "vault.checks", "Prober": "vault.probe", "default_lanes": "vault.probe",
    "Maintainer": "vault.rotation", "Policy": "vault.rotation",
}

__all__ = [
    "CREDENTIALS", "DB", "PLATFORMS", "Checks", "KeyLoader", "Maintainer", "MasterKey",
    "NeedsReauth", "NoMasterKey", "NotRevealable", "Policy", "Prober", "Vault", "VaultError",
    "WrongMasterKey", "credential_id", "default_lanes", "fix_for", "held_for", "hold", "init_key", "load_master_key",
    "new_key_text", "parse_key", "paste_url", "public", "release",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vault' has no attribute {name!r}")
