"""Sealing: AES-GCM with a fresh data key per version, wrapped by the master key. The
associated data binds a ciphertext to its credential id and version, so a ciphertext moved
to another row (or another version) does not open."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # cryptography loads when a secret is sealed or opened, not with the vault
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import WrongMasterKey
from .keys import MasterKey


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode())


def _aad(cred_id: str, version: int) -> bytes:
    return f"skyhub-vault-v1\0{cred_id}\0{version}".encode()


def _aesgcm() -> type[AESGCM]:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM


def seal(key: MasterKey, cred_id: str, version: int, secret: dict[str, Any]) -> dict[str, Any]:
    """``secret`` sealed as version ``version`` of ``cred_id`` (a credential's ``sealed`` field): AES-256-GCM
    under a fresh data key, which ``key`` wraps."""
    aad = _aad(cred_id, version)
    AESGCM = _aesgcm()  # noqa: N806 - the class, by its own name
    data_key = AESGCM.generate_key(bit_length=256)
    nonce, key_nonce = secrets.token_bytes(12), secrets.token_bytes(12)
    plaintext = json.dumps(secret, separators=(",", ":")).encode()
    return {
        "alg": "AES-256-GCM",
        "keyId": key.key_id,
        "nonce": _b64(nonce),
        "ciphertext": _b64(AESGCM(data_key).encrypt(nonce, plaintext, aad)),
        "keyNonce": _b64(key_nonce),
        "wrappedKey": _b64(AESGCM(key.raw).encrypt(key_nonce, data_key, aad)),
    }


def unseal(key: MasterKey, cred_id: str, version: int, sealed: dict[str, Any]) -> dict[str, Any]:
    """The secret ``sealed`` holds, opened with ``key``; WrongMasterKey when it was sealed with another key,
    altered, or moved from another credential or version."""
    from cryptography.exceptions import InvalidTag

    AESGCM = _aesgcm()  # noqa: N806 - the class, by its own name
    aad = _aad(cred_id, version)
    try:
        data_key = AESGCM(key.raw).decrypt(_unb64(sealed["keyNonce"]), _unb64(sealed["wrappedKey"]), aad)
        plaintext = AESGCM(data_key).decrypt(_unb64(sealed["nonce"]), _unb64(sealed["ciphertext"]), aad)
    except (InvalidTag, KeyError, ValueError, TypeError):
        if sealed.get("keyId") != key.key_id:
            raise WrongMasterKey(
                f"credential {cred_id} was sealed with vault key {sealed.get('keyId')}, but the configured key is "
                f"{key.key_id} ({key.source}): configure the key it was sealed with, or paste the credential again"
            ) from None
        raise WrongMasterKey(f"credential {cred_id} (version {version}) does not open: it was altered or moved from another credential") from None
    return json.loads(plaintext)  # type: ignore[no-any-return]


def fingerprint(key: MasterKey, secret: dict[str, Any]) -> str:
    """A short keyed hash: tells versions apart without revealing anything of the secret."""
    fp_key = hashlib.sha256(b"skyhub-vault-fingerprint\0" + key.raw).digest()
    mac = hmac.new(fp_key, json.dumps(secret, sort_keys=True, separators=(",", ":")).encode(), hashlib.sha256)
    return mac.hexdigest()[:16]
