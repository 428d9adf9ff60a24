"""The Bluesky adapter: XRPC over ``httpx``, the few calls skyhub makes.

    Bluesky(http, pds, session=None)
        sessions      create_session(identifier, password), refresh_session(refresh_jwt)
        reads         notifications, walk_notifications, get_posts, get_record, resolve_handle
        writes        update_seen, upload_blob, create_record / post / reply under a fixed key

**Transport seam**: every request goes through the ``httpx.Client`` given (``ctx.http``), and
closing the adapter never closes it. A test passes ``httpx.Client(transport=httpx.MockTransport(handler))``
or mocks it with respx. The calls are made here, as the lexicons describe them (a query is a GET
with its parameters, a procedure a POST with a JSON body), and their answers are kept as the
JSON they are: the atproto SDK is not used (importing any of it loads every lexicon model: 430
modules, about 30 MB, and validating each answer was a third of the ingest tick).

**Sessions**: the session comes from the vault, which is the only writer of a rotated session
(a refresh token is single-use: two writers would log each other out). So the adapter never
refreshes on its own; ``create_session``/``refresh_session`` only *return* a new session for
the vault to store, and never change the adapter's own.

**Fixed record keys**: ``create_record`` (and ``post``, ``reply``) write under a record key
the caller fixed on its document before the call. If the record already exists (a retry after
a crash, or a call whose answer was lost), that record is the result: reading it back is how
an unfinished write is resolved, never writing again under a new key.

**Errors** are translated here, once: 429 -> ``RateLimited`` (``reset_at`` from
``ratelimit-reset``); ExpiredToken, InvalidToken, AuthenticationRequired, AccountTakedown,
AccountDeactivated or 401 -> ``AuthFailure``; 5xx and timeouts -> ``Transient``; a host that
cannot be reached -> ``NetworkError`` (naming it); 413 -> ``Rejected``; anything else (an answer
that is not the JSON its lexicon says, too) -> ``Failed``. Passwords and tokens never reach a
reason or a repr.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from secrets import randbelow
from typing import Any, NoReturn, TypedDict, TypeVar
from urllib.parse import urlsplit

import httpx

from . import richtext
from .errors import Answer, AuthFailure, Failed, PlatformError, RateLimited, Rejected, Transient
from .transport import transport_error

log = logging.getLogger(__name__)
T = TypeVar("T")

PLATFORM = "bluesky"
POST = "app.bsky.feed.post"
AUTH_ERRORS = frozenset({"ExpiredToken", "InvalidToken", "AuthenticationRequired", "AccountTakedown", "AccountDeactivated"})
MAX_IMAGES = 4  # app.bsky.embed.images
MAX_MESSAGE = 300


class StrongRef(TypedDict):
    """A record's ``{"uri", "cid"}`` (``com.atproto.repo.strongRef``)."""

    uri: str
    cid: str


class RecordView(TypedDict):
    """A record as ``com.atproto.repo.getRecord`` returns it."""

    uri: str
    cid: str
    value: dict[str, Any]


@dataclass(frozen=True)
class BlueskySession:
    """A session as the vault keeps it; ``expires_at`` is the access token's expiry (epoch ms)."""

    did: str
    handle: str
    access_jwt: str = field(repr=False)
    refresh_jwt: str = field(repr=False)
    expires_at: int | None = None
    pds: str | None = None  # the PDS the account's DID document names (absent: the host logged in at)

    def as_dict(self) -> dict[str, str]:
        """``{"accessJwt", "refreshJwt", "did", "handle"[, "pds"]}``: what ``Bluesky(..., session=)`` takes."""
        out = {"accessJwt": self.access_jwt, "refreshJwt": self.refresh_jwt, "did": self.did, "handle": self.handle}
        if self.pds:
            out["pds"] = self.pds
        return out


@dataclass(frozen=True)
class Image:
    """One image of a post: the blob ``upload_blob`` returned, its alt text and its size in pixels
    (``aspectRatio`` lets clients lay it out before it loads; omitted when unknown)."""

    blob: dict[str, Any]
    alt: str = ""
    width: int | None = None
    height: int | None = None

    def embed(self) -> dict[str, Any]:
        """This image as an item of ``app.bsky.embed.images``."""
        item: dict[str, Any] = {"alt": self.alt, "image": self.blob}
        if self.width and self.height:
            item["aspectRatio"] = {"width": self.width, "height": self.height}
        return item


def pds_of(did_doc: Any) -> str | None:
    """The ``#atproto_pds`` service endpoint a DID document names, if any."""
    if not isinstance(did_doc, Mapping):
        return None
    for service in did_doc.get("service") or []:
        if isinstance(service, Mapping) and str(service.get("id", "")).endswith("#atproto_pds"):
            endpoint = service.get("serviceEndpoint")
            if isinstance(endpoint, str) and endpoint.startswith(("https://", "http://")):
                return endpoint.rstrip("/")
    return None


def jwt_exp_ms(token: str) -> int | None:
    """The ``exp`` of a JWT in epoch ms, read without verifying it (only to schedule a refresh)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return int(claims["exp"]) * 1000
    except (IndexError, ValueError, KeyError, TypeError):
        return None


_B32_SORTABLE = "234567abcdefghijklmnopqrstuvwxyz"


def new_rkey(now_ms: int) -> str:
    """A fresh record key in TID form (13 characters of sortable base32: 53 bits of microseconds,
    the sub-millisecond part random, and 10 random bits of clock id), to fix on a document before
    the call that creates the record."""
    value = ((now_ms * 1000 + randbelow(1000)) << 10) | randbelow(1024)
    return "".join(_B32_SORTABLE[(value >> shift) & 31] for shift in range(60, -1, -5))


def iso_now() -> str:
    """Now as Bluesky writes timestamps (UTC, milliseconds, "Z")."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Refused(Exception):
    """An XRPC answer outside 2xx: its status, headers and the ``error``/``message`` of its body."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.status = response.status_code
        self.headers = response.headers
        self.error: str | None = None
        self.message = ""
        try:
            body = json.loads(response.content) if response.content else None
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), str):  # an XRPC error body
            self.error = body["error"] or None
            self.message = str(body.get("message") or "")

    def header_int(self, name: str) -> int | None:
        try:
            return int(self.headers[name])
        except (KeyError, ValueError):
            return None


class _Malformed(Exception):
    """A 2xx answer that is not the JSON object its lexicon says."""


def _object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError as exc:
        raise _Malformed(f"an answer that is not JSON ({response.headers.get('content-type') or 'no content type'})") from exc
    if not isinstance(body, dict):
        raise _Malformed(f"a JSON {type(body).__name__} where an object was expected")
    return body


def _field(body: Mapping[str, Any], name: str, kind: type[T]) -> T:
    value = body.get(name)
    if not isinstance(value, kind):
        raise _Malformed(f"an answer without {name!r} (a {kind.__name__})")
    return value


class Bluesky:
    """One Bluesky account on one PDS, through the given HTTP client (see the module docstring).

    ``session``: ``accessJwt``, ``refreshJwt``, ``did`` and ``handle`` as the vault keeps them
    (``BlueskySession.as_dict()``); without one, only ``create_session``, ``refresh_session``,
    ``resolve_handle`` and reads of public records work. ``app.bsky.*`` reads go to the PDS,
    which proxies them to its AppView.
    """

    def __init__(self, http: httpx.Client, pds: str, session: Mapping[str, Any] | None = None) -> None:
        self._http = http
        self.pds = pds.rstrip("/")
        self._host = urlsplit(self.pds).hostname or self.pds
        self.did: str = ""
        self.handle: str = ""
        self._access = ""
        self._secrets: tuple[str, ...] = ()
        if session is not None:
            self.did, self.handle = str(session["did"]), str(session.get("handle") or "")
            access, refresh = str(session["accessJwt"]), str(session["refreshJwt"])
            self._access = access
            self._secrets = (access, refresh)

    def __repr__(self) -> str:
        return f"<Bluesky {self.handle or self.did or 'no session'} on {self.pds}>"

    # ---- the one seam ---------------------------------------------------------------------
    def _xrpc(self, nsid: str, shape: Callable[[dict[str, Any]], T], *, params: Mapping[str, Any] | None = None,
              body: Any = None, content: bytes | None = None, headers: Mapping[str, str] | None = None,
              token: str | None = None, secrets: Sequence[str] = (), answers: bool = True) -> T:
        """One XRPC call: a query (GET with ``params``) unless a ``body`` (JSON) or ``content`` (raw) makes it a
        procedure (POST; without either: ``refreshSession``); ``shape`` takes what it needs from the answer's JSON
        object (``answers=False``: the answer has no body to read, and ``shape`` is given ``{}``). ``token``: the
        bearer token, this adapter's access token by default. Whatever fails is translated here (see the module
        docstring), named by the method (``Bluesky getPosts``)."""
        def call() -> T:
            response = self._send(nsid, params, body, content, headers, token)
            return shape(_object(response) if answers else {})

        return self._call(nsid.rpartition(".")[2], call, secrets)

    def _send(self, nsid: str, params: Mapping[str, Any] | None, body: Any, content: bytes | None,
              headers: Mapping[str, str] | None, token: str | None) -> httpx.Response:
        sent = {"User-Agent": "skyhub", **(headers or {})}
        bearer = self._access if token is None else token
        if bearer:
            sent["Authorization"] = f"Bearer {bearer}"
        url = f"{self.pds}/xrpc/{nsid}"
        if params is not None:
            response = self._http.get(url, params=dict(params), headers=sent)
        elif content is not None:
            response = self._http.post(url, content=content, headers=sent)
        elif body is not None:
            response = self._http.post(url, json=body, headers=sent)
        else:
            response = self._http.post(url, headers=sent)
        if not 200 <= response.status_code <= 299:
            raise _Refused(response)
        return response

    def _call(self, what: str, fn: Callable[[], T], secrets: Sequence[str] = ()) -> T:
        """Run one call; translate whatever it raises into the platform errors."""
        what = f"Bluesky {what}"
        secrets = (*self._secrets, *secrets)
        try:
            return fn()
        except _Refused as exc:
            answer = Answer(PLATFORM, http_status=exc.status, error_code=exc.error, message=exc.message[:MAX_MESSAGE])
            status, name = exc.status, exc.error
            if status == 429:
                stamp = exc.header_int("ratelimit-reset")
                reset = datetime.fromtimestamp(stamp, tz=UTC) if stamp is not None else None
                raise RateLimited(RateLimited.describe(what, answer) + (f" (resets at {reset.isoformat()})" if reset else ""),
                                  answer, reset_at=stamp * 1000 if stamp is not None else None,
                                  blocked=exc.headers.get("ratelimit-policy"), secrets=secrets) from None
            kind: type[PlatformError]
            if name in AUTH_ERRORS or status == 401:
                kind = AuthFailure
            elif status >= 500:
                kind = Transient
            elif status == 413:
                kind = Rejected
            else:
                kind = Failed
            raise kind(kind.describe(what, answer), answer, secrets=secrets) from None
        except httpx.TransportError as exc:
            self._transport(exc, what, exc)
        except _Malformed as exc:
            raise Failed(f"{what}: Bluesky answered {exc}; {Failed.advice}", Answer(PLATFORM), secrets=secrets) from None

    def _transport(self, cause: BaseException | None, what: str, exc: Exception) -> NoReturn:
        if isinstance(cause, httpx.TransportError):
            raise transport_error(cause, what, PLATFORM, host=self._host) from exc
        raise Transient(f"{what}: the connection to {self._host} failed ({type(exc).__name__}); {Transient.advice}",
                        Answer(PLATFORM)) from exc

    def _require_session(self, what: str) -> None:
        if not self.did:
            raise AuthFailure(f"Bluesky {what}: there is no session yet; {AuthFailure.advice}", Answer(PLATFORM))

    # ---- sessions (for the vault) ---------------------------------------------------------------
    def create_session(self, identifier: str, password: str) -> BlueskySession:
        """A new session from a handle (or email) and an app password (``com.atproto.server.createSession``).
        Bluesky allows 30 per 5 minutes and 300 per day per account: prefer ``refresh_session``."""
        return self._xrpc("com.atproto.server.createSession", self._session,  # sends no token: this adapter's is not used
                          body={"identifier": identifier, "password": password}, token="", secrets=(password,))

    def refresh_session(self, refresh_jwt: str) -> BlueskySession:
        """The next session from a refresh token (``com.atproto.server.refreshSession``). The old
        refresh token stops working: store the new session before anything else uses it."""
        return self._xrpc("com.atproto.server.refreshSession", self._session, token=refresh_jwt, secrets=(refresh_jwt,))

    def _session(self, out: dict[str, Any]) -> BlueskySession:
        access, refresh = out.get("accessJwt"), out.get("refreshJwt")
        if not isinstance(access, str) or not isinstance(refresh, str) or not access or not refresh:
            raise Failed(f"Bluesky answered without a session; {Failed.advice}", Answer(PLATFORM))
        return BlueskySession(did=_field(out, "did", str), handle=str(out.get("handle") or ""), access_jwt=access,
                              refresh_jwt=refresh, expires_at=jwt_exp_ms(access), pds=pds_of(out.get("didDoc")))

    # ---- reads ------------------------------------------------------------------------------
    def notifications(self, *, reasons: tuple[str, ...] = ("mention",), limit: int = 50,
                      cursor: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of notifications, newest first, and the cursor of the next
        (``app.bsky.notification.listNotifications``)."""
        self._require_session("listNotifications")
        params: dict[str, Any] = {"limit": limit, "reasons": list(reasons)}
        if cursor:
            params["cursor"] = cursor

        def page(out: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
            found = _field(out, "notifications", list)
            if not all(isinstance(n, dict) for n in found):
                raise _Malformed("notifications that are not objects")
            after = out.get("cursor")
            return found, after if isinstance(after, str) else None

        return self._xrpc("app.bsky.notification.listNotifications", page, params=params)

    def walk_notifications(self, *, reasons: tuple[str, ...] = ("mention",), limit: int = 50,
                           max_pages: int = 20) -> Iterator[dict[str, Any]]:
        """Newest first, following the cursor (pages can come back short, even empty: keep following)."""
        cursor = None
        for _ in range(max_pages):
            page, cursor = self.notifications(reasons=reasons, limit=limit, cursor=cursor)
            yield from page
            if not cursor:
                return

    def update_seen(self, seen_at: datetime) -> None:
        """Mark notifications up to ``seen_at`` as seen (``app.bsky.notification.updateSeen``)."""
        self._require_session("updateSeen")
        stamp = seen_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
        self._xrpc("app.bsky.notification.updateSeen", lambda _: None, body={"seenAt": stamp}, answers=False)

    def get_posts(self, uris: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Post views by at-uri (``app.bsky.feed.getPosts``, 25 at a time); missing posts are absent."""
        found: dict[str, dict[str, Any]] = {}

        def posts(out: dict[str, Any]) -> list[dict[str, Any]]:
            views = _field(out, "posts", list)
            if not all(isinstance(p, dict) and isinstance(p.get("uri"), str) for p in views):
                raise _Malformed("posts without their 'uri'")
            return views

        for i in range(0, len(uris), 25):
            for post in self._xrpc("app.bsky.feed.getPosts", posts, params={"uris": list(uris[i:i + 25])}):
                found[post["uri"]] = post
        return found

    def get_record(self, collection: str, rkey: str, repo: str | None = None) -> RecordView | None:
        """The record ``collection/rkey`` of ``repo`` (this account by default), or ``None`` if
        there is none (``com.atproto.repo.getRecord``)."""
        repo = repo or self.did
        if not repo:
            self._require_session("getRecord")

        def view(out: dict[str, Any]) -> RecordView:
            return {"uri": _field(out, "uri", str), "cid": str(out.get("cid") or ""), "value": _field(out, "value", dict)}

        try:
            return self._xrpc("com.atproto.repo.getRecord", view, params={"repo": repo, "collection": collection, "rkey": rkey})
        except Failed as exc:
            if exc.error_code == "RecordNotFound" or exc.http_status == 404:
                return None
            raise

    def resolve_handle(self, handle: str) -> str | None:
        """The DID of a handle, or ``None`` if it does not resolve (``com.atproto.identity.resolveHandle``)."""
        try:
            return self._xrpc("com.atproto.identity.resolveHandle", lambda out: _field(out, "did", str), params={"handle": handle})
        except Failed:
            return None

    # ---- writes -----------------------------------------------------------------------------
    def upload_blob(self, data: bytes, mime: str) -> dict[str, Any]:
        """Upload an image (or any blob); its blob reference, as a record embeds it
        (``{"$type": "blob", "ref": {"$link": cid}, "mimeType", "size"}``). An unreferenced blob
        is dropped by the PDS after a while, so uploading again is harmless."""
        self._require_session("uploadBlob")
        return self._xrpc("com.atproto.repo.uploadBlob", lambda out: _field(out, "blob", dict), content=data,
                          headers={"Content-Type": mime})

    def create_record(self, collection: str, rkey: str, record: Mapping[str, Any]) -> StrongRef:
        """Write ``record`` under the fixed key ``rkey`` of this account, once.

        If a record is already there, it is the result (nothing is written). If the write
        fails with anything but an auth failure or a rate limit, the key is read back: a record
        found there (a lost answer, a racing retry: "already exists") is success too."""
        self._require_session("createRecord")
        existing = self.get_record(collection, rkey)
        if existing is not None:
            return {"uri": existing["uri"], "cid": existing["cid"]}
        data = {"repo": self.did, "collection": collection, "rkey": rkey, "record": dict(record)}
        try:
            out = self._xrpc("com.atproto.repo.createRecord",
                             lambda out: StrongRef(uri=_field(out, "uri", str), cid=_field(out, "cid", str)), body=data)
        except (AuthFailure, RateLimited):
            raise
        except PlatformError as exc:
            try:
                again = self.get_record(collection, rkey)
            except PlatformError:
                raise exc from None
            if again is None:
                raise
            log.info("bluesky: %s/%s already exists; taking it as the result", collection, rkey,
                     extra={"platform": PLATFORM, "rkey": rkey})
            return {"uri": again["uri"], "cid": again["cid"]}
        return out

    def post(self, rkey: str, text: str, *, facets: Sequence[Mapping[str, Any]] | None = None,
             images: Sequence[Image] = (), reply: Mapping[str, Mapping[str, str]] | None = None,
             langs: Sequence[str] | None = None, created_at: str | None = None) -> StrongRef:
        """An ``app.bsky.feed.post`` under the fixed key ``rkey`` (see :meth:`create_record`).

        ``facets`` from :func:`platforms.richtext.facets`; ``images`` (at most 4) become an
        ``app.bsky.embed.images`` with their alt texts and aspect ratios; ``reply`` is
        ``{"root": strongRef, "parent": strongRef}``. Text over 300 graphemes or more than 4
        images raise ``Rejected`` without a call."""
        count = richtext.graphemes(text)
        if count > richtext.MAX_GRAPHEMES:
            raise Rejected(f"Bluesky post: the text is {count} graphemes long and Bluesky allows "
                           f"{richtext.MAX_GRAPHEMES}; {Rejected.advice}", Answer(PLATFORM))
        if len(images) > MAX_IMAGES:
            raise Rejected(f"Bluesky post: {len(images)} images, and Bluesky allows {MAX_IMAGES}; {Rejected.advice}",
                           Answer(PLATFORM))
        record: dict[str, Any] = {"$type": POST, "text": text, "createdAt": created_at or iso_now()}
        if facets:
            record["facets"] = [dict(f) for f in facets]
        if images:
            record["embed"] = {"$type": "app.bsky.embed.images", "images": [image.embed() for image in images]}
        if reply:
            record["reply"] = {"root": dict(reply["root"]), "parent": dict(reply["parent"])}
        if langs:
            record["langs"] = list(langs)
        return self.create_record(POST, rkey, record)

    def reply(self, rkey: str, text: str, facets: Sequence[Mapping[str, Any]], root: Mapping[str, str],
              parent: Mapping[str, str], created_at: str) -> StrongRef:
        """A reply in ``root``'s thread to ``parent``, under the fixed key ``rkey``, once (:meth:`post`)."""
        return self.post(rkey, text, facets=facets, reply={"root": root, "parent": parent}, created_at=created_at)

    def close(self) -> None:
        """Nothing to release: the HTTP client is the caller's (kept for the adapter's users)."""
