"""The master key: looked up in SKYHUB_VAULT_KEY, then a key file (SKYHUB_VAULT_KEY_FILE or
``vault.key_file``), then the OS keyring (service ``skyhub``). Never a plaintext fallback."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .errors import NoMasterKey, VaultError

KEYRING_SERVICE = "skyhub"
KEYRING_USER = "vault-master-key"
ALTERNATIVES = (
    "set SKYHUB_VAULT_KEY to a key (make one with `skyhub vault init --print`), or create a key file "
    "with `skyhub vault init --key-file PATH` and set SKYHUB_VAULT_KEY_FILE=PATH (or vault.key_file)"
)


@dataclass(frozen=True)
class MasterKey:
    """32 bytes; ``key_id`` names it without revealing it."""

    raw: bytes
    source: str

    @property
    def key_id(self) -> str:
        """12 hex digits of a hash of the key: names it (in ``sealed.keyId``, in messages) without revealing it."""
        return hashlib.sha256(b"skyhub-vault-key-id\0" + self.raw).hexdigest()[:12]

    def __repr__(self) -> str:
        return f"MasterKey(id={self.key_id}, source={self.source!r})"


def new_key_text() -> str:
    """A new random master key: 32 bytes as url-safe base64, the form SKYHUB_VAULT_KEY and key files hold."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()


def parse_key(text: str, source: str) -> MasterKey:
    """The master key ``text`` holds (32 bytes as url-safe base64); ``source`` says where it came from, for
    messages. VaultError when it is not such a key."""
    try:
        raw = base64.urlsafe_b64decode(text.strip().encode())
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != 32:
        raise VaultError(f"the vault key from {source} is not valid: expected 32 bytes of url-safe base64 (from `skyhub vault init`)")
    return MasterKey(raw, source)


def load_master_key(key_file: str | None = None) -> MasterKey:
    """The master key from SKYHUB_VAULT_KEY, else a key file (SKYHUB_VAULT_KEY_FILE, else ``key_file``), else
    the OS keyring. VaultError when the key is malformed or the key file unreadable or readable by others;
    NoMasterKey when there is none."""
    env = os.environ.get("SKYHUB_VAULT_KEY")
    if env:
        return parse_key(env, "SKYHUB_VAULT_KEY")
    path = os.environ.get("SKYHUB_VAULT_KEY_FILE") or key_file
    if path:
        file = Path(path)
        try:
            mode = file.stat().st_mode & 0o777
            text = file.read_text()
        except OSError as exc:
            raise VaultError(f"cannot read the vault key file {path}: {exc.strerror}") from None
        if mode & 0o077:
            raise VaultError(f"the vault key file {path} is readable by others (mode {mode:o}): chmod 600 {path}")
        return parse_key(text, f"key file {path}")
    import keyring
    from keyring.errors import KeyringError, NoKeyringError

    try:
        stored = keyring.get_password(KEYRING_SERVICE, KEYRING_USER)
    except NoKeyringError:
        raise NoMasterKey(f"no vault key: this machine has no OS keyring; {ALTERNATIVES}") from None
    except KeyringError as exc:
        raise NoMasterKey(f"no vault key: the OS keyring failed ({type(exc).__name__}); {ALTERNATIVES}") from None
    if not stored:
        raise NoMasterKey(f"no vault key: run `skyhub vault init` to put one in the OS keyring, or {ALTERNATIVES}")
    return parse_key(stored, "the OS keyring")


def init_key(key_file: str | None = None) -> str:
    """Make a new master key in ``key_file`` (mode 0600) or the OS keyring; says where."""
    text = new_key_text()
    if key_file:
        try:
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise VaultError(f"{key_file} exists: refusing to replace a vault key (every sealed secret depends on it)") from None
        with os.fdopen(fd, "w") as fh:
            fh.write(text + "\n")
        return f"key file {key_file} (mode 0600); set SKYHUB_VAULT_KEY_FILE={key_file}"
    import keyring
    from keyring.errors import KeyringError, NoKeyringError

    try:
        if keyring.get_password(KEYRING_SERVICE, KEYRING_USER):
            raise VaultError("the OS keyring already holds a vault key: refusing to replace it")
        keyring.set_password(KEYRING_SERVICE, KEYRING_USER, text)
    except NoKeyringError:
        raise NoMasterKey(f"this machine has no OS keyring; {ALTERNATIVES}") from None
    except KeyringError as exc:
        raise NoMasterKey(f"the OS keyring failed ({type(exc).__name__}); {ALTERNATIVES}") from None
    return f"the OS keyring (service {KEYRING_SERVICE!r})"


# Run in a child process by ``keyring_absent``: says whether the OS keyring exists, never what it holds.
_PROBE = """
import keyring
from keyring.errors import KeyringError, NoKeyringError
try:
    keyring.get_password(SERVICE, USER)
except NoKeyringError:
    print("absent")
except KeyringError:
    print("failed")
else:
    print("present")
""".replace("SERVICE", repr(KEYRING_SERVICE)).replace("USER", repr(KEYRING_USER))


def keyring_absent() -> bool:
    """Whether this machine has no OS keyring at all, asked in a short-lived child process.

    Finding out in this process would load ``keyring`` and every installed backend (through the
    packages' entry points: SecretStorage, jeepney, ...), about 10 MB that stay for the life of
    a hub which, without a key, has nothing to decrypt. False when the child cannot tell (then
    the caller asks the keyring itself)."""
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == "absent"


class KeyLoader:
    """Loads the master key on first use, so a hub without one still runs its engine; the
    vault tick and vault writes then fail with the reason and the remedy. ``key_file`` is
    ``vault.key_file``, which SKYHUB_VAULT_KEY and SKYHUB_VAULT_KEY_FILE override."""

    def __init__(self, key_file: str = "") -> None:
        self.key_file = key_file
        self._key: MasterKey | None = None
        self._no_keyring: str | None = None  # the reason, once a probe found that this machine has no OS keyring

    def __call__(self) -> MasterKey:
        """The master key, loaded on the first call and kept (a failed load raises, and is tried again next call)."""
        if self._key is None:
            self._key = load_master_key(self.key_file or None)
        return self._key

    def available(self) -> str | None:
        """None when a key can be loaded, else the reason it cannot (for health reports and the notice at
        start). When only the OS keyring could hold the key, whether this machine has one at all is asked
        once in a child process (``keyring_absent``): a machine without one does not grow one while the hub
        runs, and this process need not load ``keyring`` to say so."""
        if self._key is None and not (os.environ.get("SKYHUB_VAULT_KEY") or os.environ.get("SKYHUB_VAULT_KEY_FILE")
                                      or self.key_file):
            # a process that has loaded keyring already asks it (in-process settings too: keyring.set_keyring)
            if self._no_keyring is None and "keyring" not in sys.modules and keyring_absent():
                self._no_keyring = f"no vault key: this machine has no OS keyring; {ALTERNATIVES}"
            if self._no_keyring is not None:
                return self._no_keyring
        try:
            self()
        except VaultError as exc:
            return exc.reason
        return None
