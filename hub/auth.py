"""Credentials for the hub's API.

- **Operator tokens** for people: ``skh_<id>_<secret>``. The hub keeps only a SHA-256 of the
  secret (in the ``auth`` database, with the person's actor), so a leaked hub database lets
  no one in. Tokens are listed as metadata and revoked by id or name.
- **Device credentials** for lanes (a GitHub Actions runner): an Ed25519 key pair made on
  the device. The hub records only the public key and the actor the device acts as. Every
  request is signed over the hub it is meant for (its public URL), the device's name, the
  method, the path (with query), the time, a nonce and a hash of the body; the hub refuses
  signatures made for another hub or another name, expired ones (older than
  ``SIGNATURE_WINDOW_MS``) and replays (a nonce is accepted once, by any hub process).

  The signed text (``skyhub-device-v2``), one field per line::

      skyhub-device-v2
      <hub URL, canonical: scheme://host[:port][/path], lowercase, no default port, no trailing />
      <device name>
      <METHOD>
      <raw path with query, as sent>
      <time, epoch ms>
      <nonce>
      <SHA-256 of the body, hex>

  and the header: ``Authorization: SkyhubDevice v="2",hub="URL",name="NAME",ts="MS",nonce="N",sig="BASE64"``.
  The hub verifies against its own public URL (``public_url``, ``SKYHUB_PUBLIC_URL``), never
  against the one the header names; that one only makes the refusal say what went wrong.

Checking a request is two steps, so that nothing of a body is read before the headers have
been accepted: ``check`` (header only: a token, or a device's name, key, revocation and time
window) and, for a device, ``verify`` with the body.

**Roles.** Each person holds one role: ``editor`` (writes drafts and submits them),
``approver`` (approves, rejects, queues directly) or ``admin`` (everything a person may do). It
is kept in the person's document, ``person:<name>`` in ``auth`` (``kind: "person"``); a person
without one (every token made before roles existed, or ``skyhub user add NAME`` without
``--role``) holds ``admin``: the powers every person had before. The machines read the role in
the write's transaction (``role_source``, given to the rules by ``protect``), never from a
cache, so a role changed on one hub process holds for the next write on every other.

The ``auth`` database is written only by ``admin`` (the CLI on the hub) and is not reachable
through the API.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ledger import ADMIN, Clock, Conflict, Invalid, LedgerError, NotFound, Rules, Store
from ledger.actor import parse_actor
from ledger.errors import EXIT_FORBIDDEN

if TYPE_CHECKING:  # cryptography loads with the first device key made, read or checked
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

AUTH_DB = "auth"
SIGNATURE_WINDOW_MS = 60_000
SCHEME = "SkyhubDevice"
SIGNATURE_VERSION = "skyhub-device-v2"
KEYRING_SERVICE = "skyhub"
_TOKEN = re.compile(r"^skh_([0-9a-f]{12})_([A-Za-z0-9_-]{20,})$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")


class Unauthorized(LedgerError):
    """The request carries no valid credential (missing, revoked, wrong key, expired, replayed)."""

    code = "unauthorized"
    status = 401
    exit_code = EXIT_FORBIDDEN


ROLES = ("editor", "approver", "admin")
DEFAULT_ROLE = "admin"  # a person without a role keeps the powers every person had before roles


def protect(rules: Rules) -> None:
    """Only admin writes the auth database; tokens and devices are listed by kind; people's roles
    come from their documents in it (``role_source``)."""
    rules.allow(AUTH_DB, free=[ADMIN], blind=[ADMIN])
    rules.index(AUTH_DB, "kind")
    rules.roles_from(role_source)


def role_source(actor: str, read: Callable[[str, str], dict[str, Any] | None]) -> str | None:
    """The role of ``actor`` (people only; None for devices, ticks and handlers), read with ``read`` in the
    transaction of the write being judged: the person's ``role``, else ``DEFAULT_ROLE``."""
    kind, _, name = actor.partition(":")
    if kind != "user":
        return None
    found = read(AUTH_DB, f"person:{name}") if _NAME.match(name) else None
    role = (found or {}).get("role")
    return role if role in ROLES else DEFAULT_ROLE


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise Invalid(f"role {role!r} is not one: use {', '.join(ROLES)}")
    return role


def _check_name(name: str, what: str) -> str:
    if not _NAME.match(name or ""):
        raise Invalid(f"{what} name {name!r} is not valid: use 1-64 lowercase letters, digits, '.', '_' or '-'")
    return name


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# ---- operator tokens ---------------------------------------------------------------------
def add_user(store: Store, name: str, role: str | None = None, *, clock: Clock) -> str:
    """Create a token for person ``name`` (actor ``user:<name>``), made at ``clock``'s time; returns the
    token, once. With ``role``, the person holds it from now on (``set_role``); without, their role stays
    as it was (``DEFAULT_ROLE`` for a new person)."""
    _check_name(name, "user")
    if role is not None:
        set_role(store, name, role, clock=clock)
    token_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    store.put(
        AUTH_DB,
        {"kind": "token", "name": name, "actor": f"user:{name}", "hash": _hash(secret),
         "createdAt": clock.now_ms(), "revokedAt": None},
        f"token:{token_id}", actor="admin", create_only=True,
    )
    return f"skh_{token_id}_{secret}"


def set_role(store: Store, name: str, role: str, *, clock: Clock) -> dict[str, Any]:
    """Make person ``name`` hold ``role`` (one of ``ROLES``); their next write is judged by it, on every hub process."""
    _check_name(name, "user")
    _check_role(role)
    return _set_person(store, name, {"role": role}, clock=clock)


def _set_person(store: Store, name: str, fields: dict[str, Any], *, clock: Clock) -> dict[str, Any]:
    """Write ``fields`` on person ``name``'s document (``person:NAME``), keeping the others (role, zone)."""
    for _ in range(5):
        try:
            head = store.get(AUTH_DB, f"person:{name}")
        except NotFound:
            head = None
        kept = {k: v for k, v in (head or {}).items() if not k.startswith("_")}
        doc = {**kept, "kind": "person", "name": name, "actor": f"user:{name}", **fields, "updatedAt": clock.now_ms()}
        try:
            if head is None:
                return store.put(AUTH_DB, doc, f"person:{name}", actor="admin", create_only=True)
            return store.put(AUTH_DB, doc, f"person:{name}", actor="admin", if_rev=head["_rev"])
        except Conflict:
            continue  # another process changed the person in between: read again, keep theirs
    raise Conflict(f"person {name!r} kept changing while being written: try again")


def check_zone(zone: str) -> str:
    """``zone`` if it is an IANA time zone this machine knows (``Europe/Berlin``, ``UTC``); ``Invalid`` otherwise."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    text = (zone or "").strip()
    if not text or len(text) > 64 or text.startswith(("/", ".")) or ".." in text or "\\" in text:
        raise Invalid(f"time zone {text[:64]!r} is not one: give an IANA name such as Europe/Berlin or America/New_York")
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise Invalid(f"time zone {text[:64]!r} is not one: give an IANA name such as Europe/Berlin or America/New_York") from None
    return text


def set_zone(store: Store, name: str, zone: str | None, *, clock: Clock) -> dict[str, Any]:
    """Make person ``name``'s time zone ``zone`` (an IANA name, checked; None: the browser's again).
    The console shows their times and computes their calendar in it."""
    _check_name(name, "user")
    return _set_person(store, name, {"zone": check_zone(zone) if zone is not None else None}, clock=clock)


def zone_of(store: Store, name: str) -> str | None:
    """Person ``name``'s time zone, or None when they chose none (the console then uses the browser's)."""
    try:
        zone = store.get(AUTH_DB, f"person:{name}").get("zone")
    except NotFound:
        return None
    try:
        return check_zone(zone) if isinstance(zone, str) else None
    except Invalid:
        return None


def role_of(store: Store, name: str) -> str:
    """The role person ``name`` holds (``DEFAULT_ROLE`` when none was given)."""
    try:
        role = store.get(AUTH_DB, f"person:{name}").get("role")
    except NotFound:
        return DEFAULT_ROLE
    return role if role in ROLES else DEFAULT_ROLE


def list_tokens(store: Store) -> list[dict[str, Any]]:
    """Every token as metadata (id, name, actor, role, createdAt, revokedAt), revoked ones included; never its hash.
    ``role`` is the person's (one role per person, whichever token they use)."""
    roles = {d.get("name"): d.get("role") for d in _all(store, "person")}
    return [
        {"id": d["_id"].split(":", 1)[1], "name": d["name"], "actor": d["actor"],
         "role": roles.get(d["name"]) if roles.get(d["name"]) in ROLES else DEFAULT_ROLE,
         "createdAt": d["createdAt"], "revokedAt": d.get("revokedAt")}
        for d in _all(store, "token")
    ]


def revoke_token(store: Store, which: str, *, clock: Clock) -> list[str]:
    """Revoke a token by id, or every token of a person by name. Returns the ids revoked."""
    revoked = []
    for d in _all(store, "token"):
        token_id = d["_id"].split(":", 1)[1]
        if (which in (token_id, d["name"])) and not d.get("revokedAt"):
            store.put(AUTH_DB, {**d, "revokedAt": clock.now_ms()}, actor="admin")
            revoked.append(token_id)
    if not revoked:
        raise NotFound(f"no active token with id or name {which!r}")
    return revoked


# ---- devices -----------------------------------------------------------------------------
def approve_device(store: Store, name: str, actor: str, public_key: str, *, clock: Clock) -> dict[str, Any]:
    """Record a device's public key and the actor it acts as (replaces an earlier key)."""
    _check_name(name, "device")
    kind, _ = parse_actor(actor)
    if kind == "admin":
        raise Invalid("a device cannot act as admin")
    raw = decode_public_key(public_key)
    doc = {
        "kind": "device", "name": name, "actor": actor, "publicKey": encode_public_key(raw),
        "fingerprint": fingerprint(raw), "approvedAt": clock.now_ms(), "revokedAt": None,
    }
    try:
        head = store.get(AUTH_DB, f"device:{name}")
        return store.put(AUTH_DB, doc, f"device:{name}", actor="admin", if_rev=head["_rev"])
    except NotFound:
        return store.put(AUTH_DB, doc, f"device:{name}", actor="admin", create_only=True)


def list_devices(store: Store) -> list[dict[str, Any]]:
    """Every device as metadata (name, actor, fingerprint, approvedAt, revokedAt), revoked ones included."""
    return [
        {k: d.get(k) for k in ("name", "actor", "fingerprint", "approvedAt", "revokedAt")}
        for d in _all(store, "device")
    ]


def revoke_device(store: Store, name: str, *, clock: Clock) -> None:
    """Revoke device ``name``: its record stays, with ``revokedAt``. NotFound when there is none."""
    doc = store.get(AUTH_DB, f"device:{name}")
    store.put(AUTH_DB, {**doc, "revokedAt": clock.now_ms()}, actor="admin", if_rev=doc["_rev"])


def new_device_key() -> Ed25519PrivateKey:
    """A new Ed25519 private key for a device."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


def encode_public_key(raw: bytes) -> str:
    """A raw 32-byte public key as the hub writes it: ``ed25519:<base64>``."""
    return "ed25519:" + base64.b64encode(raw).decode()


def public_key_of(key: Ed25519PrivateKey) -> str:
    """The public half of a device key, as the hub writes it (``ed25519:<base64>``)."""
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return encode_public_key(raw)


def decode_public_key(text: str) -> bytes:
    """The 32 raw bytes of a public key written ``ed25519:<base64>`` (the prefix may be left out); Invalid otherwise."""
    body = text.strip().removeprefix("ed25519:")
    try:
        raw = base64.b64decode(body, validate=True)
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != 32:
        raise Invalid("public key is not valid: expected 'ed25519:' and 32 bytes of base64, as printed by `skyhub device register`")
    return raw


def fingerprint(raw: bytes) -> str:
    """A short name for a raw public key: ``SHA256:`` and 16 base64 characters of its hash."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(raw).digest()).decode().rstrip("=")[:16]


def private_key_to_pem(key: Ed25519PrivateKey) -> str:
    """The private key as unencrypted PKCS#8 PEM, for a key file or the keyring (never for a log)."""
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def private_key_from_pem(text: str) -> Ed25519PrivateKey:
    """The Ed25519 private key in PEM ``text``; Invalid when it is not one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(text.strip().encode() + b"\n", password=None)
    except (ValueError, TypeError):
        raise Invalid("the device key is not a PEM Ed25519 private key (as written by `skyhub device register`)") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise Invalid("the device key is not an Ed25519 key")
    return key


# ---- key storage on the device -----------------------------------------------------------
def keyring_username(name: str, hub: str) -> str:
    """The OS keyring's user name for the key of device ``name`` on ``hub`` (service ``skyhub``),
    with the hub's URL in its canonical form, so ``HTTPS://Hub.example.org/`` finds what
    ``https://hub.example.org`` stored."""
    try:
        hub = canonical_hub(hub)
    except Invalid:
        hub = hub.rstrip("/")
    return f"device:{name}@{hub}"


def save_key(key: Ed25519PrivateKey, *, name: str, hub: str, key_file: str | None) -> str:
    """Store the private key in ``key_file`` (mode 0600) or the OS keyring; says where."""
    pem = private_key_to_pem(key)
    if key_file:
        path = Path(key_file)
        if path.exists():
            raise Invalid(f"{key_file} exists: refusing to overwrite a key; remove it first")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(pem)
        return f"file {key_file} (mode 0600)"
    import keyring
    from keyring.errors import KeyringError, NoKeyringError

    try:
        keyring.set_password(KEYRING_SERVICE, keyring_username(name, hub), pem)
    except NoKeyringError:
        raise Invalid(
            "this machine has no OS keyring: pass --key-file PATH to keep the device key in a file instead"
        ) from None
    except KeyringError as exc:
        raise Invalid(f"the OS keyring refused the key ({type(exc).__name__}): pass --key-file PATH instead") from None
    return f"the OS keyring (service {KEYRING_SERVICE!r}, user {keyring_username(name, hub)!r})"


def load_key(*, name: str, hub: str, key_file: str | None = None, key_env: str | None = None) -> Ed25519PrivateKey:
    """The device key from SKYHUB_DEVICE_KEY (the PEM itself), a key file, or the keyring."""
    if key_env:
        return private_key_from_pem(key_env)
    if key_file:
        try:
            return private_key_from_pem(Path(key_file).read_text())
        except OSError as exc:
            raise Invalid(f"cannot read the device key file {key_file!r}: {exc.strerror}") from None
    import keyring
    from keyring.errors import KeyringError

    try:
        pem = keyring.get_password(KEYRING_SERVICE, keyring_username(name, hub))
        if not pem:  # registered before the URL was written canonically
            pem = keyring.get_password(KEYRING_SERVICE, f"device:{name}@{hub.rstrip('/')}")
    except KeyringError:
        pem = None
    if not pem:
        raise Invalid(
            f"no key for device {name!r} and hub {hub}: run `skyhub device register --name {name} --hub {hub}`, "
            "or give --key-file / SKYHUB_DEVICE_KEY"
        )
    return private_key_from_pem(pem)


# ---- signing and verifying ---------------------------------------------------------------
def canonical_hub(url: str) -> str:
    """The form of a hub URL that signatures bind: ``scheme://host[:port][/path]``, scheme and
    host in lowercase, no default port, no trailing slash, no query."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or '"' in url or parts.query:
        raise Invalid(f"hub URL {url[:100]!r} is not valid: use http(s)://HOST[:PORT][/PATH]")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, {"http": 80, "https": 443}[parts.scheme]) else f"{host}:{port}"
    return f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"


def _canonical(hub: str, name: str, method: str, target: str, ts: int, nonce: str, body: bytes) -> bytes:
    return "\n".join(
        [SIGNATURE_VERSION, hub, name, method.upper(), target, str(ts), nonce, hashlib.sha256(body).hexdigest()]
    ).encode()


def sign_request(key: Ed25519PrivateKey, name: str, method: str, target: str, body: bytes, now_ms: int, *, hub: str) -> str:
    """The Authorization header for one request to ``hub`` (the URL the device talks to);
    ``target`` is the raw path with its query."""
    hub = canonical_hub(hub)
    nonce = secrets.token_hex(12)
    sig = key.sign(_canonical(hub, name, method, target, now_ms, nonce, body))
    return f'{SCHEME} v="2",hub="{hub}",name="{name}",ts="{now_ms}",nonce="{nonce}",sig="{base64.b64encode(sig).decode()}"'


_PARAM = re.compile(r'(\w+)="([^"]*)"')
_NONCE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
_TS = re.compile(r"^[0-9]{1,16}$")


@dataclass(frozen=True)
class Principal:
    """Who a request acts as, and the credential that proved it."""

    actor: str
    credential: str  # "token:<id>" or "device:<name>" (never the secret)


@dataclass(frozen=True)
class DeviceClaim:
    """A device request whose header passed every check that needs no body."""

    name: str
    actor: str
    public_key: bytes
    ts: int
    nonce: str
    sig: bytes
    method: str
    target: str


class Authenticator:
    """Checks credentials; ``hub_url`` is this hub's public URL (or a function giving it, for
    a hub that learns its port when it binds); ``window_ms`` is how far a device signature's time
    may be from now."""

    def __init__(self, store: Store, hub_url: str | Callable[[], str], window_ms: int = SIGNATURE_WINDOW_MS) -> None:
        self.store = store
        self._hub_url = hub_url
        self.window_ms = window_ms

    @property
    def hub_url(self) -> str:
        """This hub's public URL, canonical: what device signatures must be made for."""
        return canonical_hub(self._hub_url() if callable(self._hub_url) else self._hub_url)

    def authenticate(self, authorization: str | None, method: str, target: str, body: bytes, now_ms: int) -> Principal:
        """Both steps at once, for a request whose body is already at hand."""
        first = self.check(authorization, method, target, now_ms)
        return first if isinstance(first, Principal) else self.verify(first, body)

    def check(self, authorization: str | None, method: str, target: str, now_ms: int) -> Principal | DeviceClaim:
        """Everything that needs no body: a token completely; a device up to its signature."""
        if not authorization:
            raise Unauthorized("no credential: send 'Authorization: Bearer <token>' or a signed device request")
        scheme, _, rest = authorization.partition(" ")
        if scheme == "Bearer":
            return self._token(rest.strip())
        if scheme == SCHEME:
            return self._device(rest, method, target, now_ms)
        raise Unauthorized(f"unknown authorization scheme {scheme[:20]!r}: use Bearer or {SCHEME}")

    def verify(self, claim: DeviceClaim, body: bytes) -> Principal:
        """The signature over the body, then the nonce (once, by any hub process)."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        hub = self.hub_url
        public = Ed25519PublicKey.from_public_bytes(claim.public_key)
        try:
            public.verify(claim.sig, _canonical(hub, claim.name, claim.method, claim.target, claim.ts, claim.nonce, body))
        except InvalidSignature:
            raise Unauthorized(
                f"the signature does not match device {claim.name!r}'s key for this hub ({hub}): "
                "was it signed with another key, or for another device name?"
            ) from None
        if not self.store.use_once(f"nonce:{claim.name}:{claim.nonce}", claim.ts + self.window_ms):
            raise Unauthorized("this signed request was already used (replay)")
        return Principal(claim.actor, f"device:{claim.name}")

    def _token(self, token: str) -> Principal:
        match = _TOKEN.match(token)
        if not match:
            raise Unauthorized("the token is malformed: tokens look like skh_<id>_<secret>")
        token_id, secret = match.groups()
        try:
            doc = self.store.get(AUTH_DB, f"token:{token_id}")
        except NotFound:
            raise Unauthorized("unknown token") from None
        if not hmac.compare_digest(doc.get("hash", ""), _hash(secret)):
            raise Unauthorized("unknown token")
        if doc.get("revokedAt"):
            raise Unauthorized("this token was revoked: ask an operator for a new one (skyhub user add)")
        return Principal(doc["actor"], f"token:{token_id}")

    def _device(self, params: str, method: str, target: str, now_ms: int) -> DeviceClaim:
        fields = dict(_PARAM.findall(params[:2048]))
        if "v" not in fields and "sig" in fields:
            raise Unauthorized(
                "this device signature is in the old format (skyhub-device-v1), which binds neither the device name "
                "nor the hub: update skyhub on the device"
            )
        if fields.get("v") != "2":
            raise Unauthorized(f"the device signature is malformed: expected v=\"2\" ({SIGNATURE_VERSION})")
        try:
            name, claimed, ts_text, nonce = fields["name"], fields["hub"], fields["ts"], fields["nonce"]
            sig = base64.b64decode(fields["sig"], validate=True)
        except (KeyError, ValueError):
            raise Unauthorized("the device signature is malformed") from None
        if not _NAME.match(name) or not _TS.match(ts_text) or not _NONCE.match(nonce) or len(sig) != 64:
            raise Unauthorized("the device signature is malformed")
        ts = int(ts_text)
        try:
            doc = self.store.get(AUTH_DB, f"device:{name}")
        except (NotFound, Invalid):
            raise Unauthorized(f"unknown device {name!r}: approve it on the hub with `skyhub device approve`") from None
        if doc.get("revokedAt"):
            raise Unauthorized(f"device {name!r} was revoked")
        if abs(now_ms - ts) > self.window_ms:
            raise Unauthorized("the signature has expired (or the device clock is off by more than a minute)")
        hub = self.hub_url
        try:
            for_hub = canonical_hub(claimed)
        except Invalid:
            for_hub = claimed[:100]
        if for_hub != hub:
            raise Unauthorized(
                f"this request was signed for hub {for_hub!r}, but this hub is {hub!r}: the device must use this hub's "
                "public URL as --hub, or the hub must set SKYHUB_PUBLIC_URL to the URL devices use"
            )
        return DeviceClaim(name, doc["actor"], decode_public_key(doc["publicKey"]), ts, nonce, sig, method, target)


def _all(store: Store, kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        page = store.query(AUTH_DB, "kind", kind, 1000, after)
        out += page.docs
        if page.next is None:
            return out
        after = page.next

