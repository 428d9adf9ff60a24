"""The write-only vault: sealed credentials, their rotation, and egress probes.

Imports the ledger, nothing else of skyhub."""

from .credentials import CREDENTIALS, DB, PLATFORMS, Vault, credential_id, public
from .errors import NeedsReauth, NoMasterKey, NotRevealable, VaultError, WrongMasterKey
from .hold import hold, release
from .keys import MasterKey, init_key, load_master_key, new_key_text, parse_key
from .platforms import AuthFailure, Endpoints, Failed, Platforms, Transient
from .probe import Prober, default_lanes
from .rotation import Maintainer, Policy

__all__ = [
    "CREDENTIALS", "DB", "PLATFORMS", "AuthFailure", "Endpoints", "Failed", "Maintainer", "MasterKey", "NeedsReauth",
    "NoMasterKey", "NotRevealable", "Platforms", "Policy", "Prober", "Transient", "Vault", "VaultError",
    "WrongMasterKey", "credential_id", "default_lanes", "hold", "init_key", "load_master_key", "new_key_text",
    "parse_key", "public", "release",
]
