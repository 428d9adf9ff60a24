"""The vault's exceptions.

    VaultError              root (a LedgerError, so the CLI and API map it like the rest)
    ├── NoMasterKey         no key configured: names the three ways to give one
    ├── WrongMasterKey      a sealed secret does not open with the configured key
    ├── NotRevealable       a person or device asked for a secret (only backend actors may)
    └── NeedsReauth         the credential is dead until a person pastes a new one

Messages never contain a secret.
"""

from __future__ import annotations

from ledger import LedgerError


class VaultError(LedgerError):
    """Root of the vault's errors."""

    code = "vault"


class NoMasterKey(VaultError):
    """No master key is configured, and there is no OS keyring to hold one."""

    code = "no_master_key"


class WrongMasterKey(VaultError):
    """The configured master key does not open this credential."""

    code = "wrong_master_key"


class NotRevealable(VaultError):
    """Only backend actors (ticks, handlers) may decrypt a secret."""

    code = "forbidden"


class NeedsReauth(VaultError):
    """The credential needs a person to paste a fresh secret."""

    code = "needs_reauth"
