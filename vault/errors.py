"""The vault's exceptions.

    VaultError              root (a LedgerError, so the CLI and API map it like the rest)  400, exit 1
    ├── NoMasterKey         no key configured: names the three ways to give one            503, exit 1
    ├── WrongMasterKey      a sealed secret does not open with the configured key          503, exit 1
    ├── NotRevealable       a person or device asked for a secret (also a Forbidden)       403, exit 4
    └── NeedsReauth         the credential is dead until a person pastes a new one         409, exit 1

Messages never contain a secret.
"""

from __future__ import annotations

from ledger import Forbidden, LedgerError


class VaultError(LedgerError):
    """Root of the vault's errors."""

    code = "vault"
    status = 400


class NoMasterKey(VaultError):
    """No master key is configured (no SKYHUB_VAULT_KEY, no key file, nothing in the OS keyring)."""

    code = "no_master_key"
    status = 503


class WrongMasterKey(VaultError):
    """The configured master key does not open this credential."""

    code = "wrong_master_key"
    status = 503


class NotRevealable(VaultError, Forbidden):
    """Only backend actors (ticks, handlers) may decrypt a secret."""

    code = "not_revealable"
    status = Forbidden.status
    exit_code = Forbidden.exit_code


class NeedsReauth(VaultError):
    """The credential needs a person to paste a fresh secret."""

    code = "needs_reauth"
    status = 409

    def __init__(self, reason: str, problem: str | None = None) -> None:
        super().__init__(reason)
        self.problem = problem or reason  # the reason without the command that fixes it, for pages
