"""The remote backend: the store interface over the hub's HTTP API (httpx + tenacity).

Every ``skyhub db ...`` command works unchanged with ``--hub URL``. A person authenticates with
a token; a device signs every request with its Ed25519 key. Transport errors and 5xx answers
are retried with backoff; 4xx answers (conflict, forbidden, ...) never are, and come back as
the same ledger errors a local store raises, so exit codes are the same.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any
from urllib.parse import quote

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from ledger import BackendError, Change, Clock, Conflict, Forbidden, Invalid, LedgerError, NotFound, Page, SearchPage, TooLarge
from ledger.actor import parse_actor
from ledger.document import check_db, check_id
from ledger.errors import error_class
from ledger.store import Write, Written, put_each

from .auth import Unauthorized, canonical_hub, sign_request
from .gate import RequestTimeout

log = logging.getLogger(__name__)

# When the hub answers with a code this process has not loaded (a product it does not run),
# the error is the closest class by HTTP status, keeping the hub's code and reason.
BY_STATUS: dict[int, type[LedgerError]] = {
    400: Invalid, 401: Unauthorized, 403: Forbidden, 404: NotFound, 408: RequestTimeout, 409: Conflict, 413: TooLarge,
    422: Invalid,
}


class _Retry(Exception):
    def __init__(self, error: LedgerError) -> None:
        self.error = error


class TokenAuth(httpx.Auth):
    """Authenticates every request with a person's token (``Authorization: Bearer``)."""

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the token to the request."""
        request.headers["Authorization"] = self._header
        yield request

    def __repr__(self) -> str:
        return "TokenAuth(***)"


class DeviceAuth(httpx.Auth):
    """Signs every request as device ``name`` for ``hub`` (the URL the device talks to; a
    ``RemoteStore`` binds its own URL when none is given), with the time ``clock`` says."""

    requires_request_body = True

    def __init__(self, name: str, key: Ed25519PrivateKey, clock: Clock, *, hub: str | None = None) -> None:
        self.name = name
        self.hub = canonical_hub(hub) if hub is not None else None
        self._key = key
        self._clock = clock

    def for_hub(self, hub: str) -> DeviceAuth:
        """This device's credential bound to ``hub`` (itself if it is bound already)."""
        return self if self.hub is not None else DeviceAuth(self.name, self._key, self._clock, hub=hub)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Sign the request (its method, path, body and the time) for this device's hub; Invalid when the
        credential is bound to no hub."""
        if self.hub is None:
            raise Invalid("a device signs for one hub: give DeviceAuth(..., hub=URL) or use it through RemoteStore(URL, ...)")
        target = request.url.raw_path.decode("latin-1")
        request.headers["Authorization"] = sign_request(
            self._key, self.name, request.method, target, request.content, self._clock.now_ms(), hub=self.hub
        )
        yield request

    def __repr__(self) -> str:
        return f"DeviceAuth({self.name!r}, hub={self.hub!r}, key=***)"


class RemoteStore:
    """A store whose every operation is a request to a hub.

    ``auth`` is a ``TokenAuth`` or a ``DeviceAuth``; ``timeout`` (seconds) bounds each request;
    ``attempts`` is how often a request is tried when the hub cannot be reached or answers 5xx;
    ``transport`` replaces the network (a test's ``httpx.MockTransport``).
    """

    def __init__(self, url: str, auth: httpx.Auth, *, timeout: float = 30.0, attempts: int = 4, transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        if isinstance(auth, DeviceAuth):
            auth = auth.for_hub(self.url)  # a device's signature names the hub it is meant for
        self._client = httpx.Client(base_url=self.url, auth=auth, timeout=timeout, transport=transport)
        self._attempts = attempts
        self._actor: str | None = None
        self._lock = threading.Lock()

    # ---- plumbing ------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call of the hub's API (a product's own routes: ``vault.remote``, ``publishers.remote``), with the
        retries, the credential and the error mapping of every other; the answer's JSON."""
        return self._request(method, path, **kwargs)

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        def once() -> Any:
            try:
                response = self._client.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                raise _Retry(BackendError(f"cannot reach the hub at {self.url}: {type(exc).__name__}: {exc}")) from None
            if response.status_code >= 500:
                raise _Retry(self._error(response))
            if response.status_code >= 400:
                raise self._error(response)
            return response.json()

        try:
            for attempt in Retrying(
                retry=retry_if_exception(lambda e: isinstance(e, _Retry)),
                stop=stop_after_attempt(self._attempts),
                wait=wait_exponential(multiplier=0.2, max=5),
                reraise=True,
            ):
                with attempt:
                    return once()
        except _Retry as exc:
            raise exc.error from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, response: httpx.Response) -> LedgerError:
        try:
            body = response.json()
            code, reason = body["error"], body["reason"]
        except (ValueError, KeyError, TypeError):
            return BackendError(f"the hub answered {response.status_code} without an error body")
        status = response.status_code
        cls = error_class(code) or BY_STATUS.get(status, LedgerError if status < 500 else BackendError)
        error = cls.__new__(cls)
        LedgerError.__init__(error, reason)  # every class of the tree carries at least its reason
        if cls.code != code:
            error.code = code  # type: ignore[misc]  # a code from a product this process does not load
        return error

    @staticmethod
    def _path(db: str, kind: str, doc_id: str | None = None) -> str:
        check_db(db)
        if doc_id is not None:
            check_id(doc_id)
        base = f"/v1/db/{quote(db, safe='')}/{kind}"
        return base if doc_id is None else f"{base}/{quote(doc_id, safe='')}"

    @property
    def actor(self) -> str:
        """Who the hub says this credential acts as."""
        with self._lock:
            if self._actor is None:
                self._actor = self._request("GET", "/v1/whoami")["actor"]
            return self._actor

    def _as(self, actor: str | None) -> None:
        if actor is not None and actor != self.actor:
            parse_actor(actor)
            raise Invalid(f"this hub credential acts as {self.actor}, not {actor}")

    # ---- documents -----------------------------------------------------------------------
    def get(self, db: str, id: str) -> dict[str, Any]:
        """The document ``db``/``id`` from the hub; NotFound when there is none."""
        return self._request("GET", self._path(db, "docs", id))  # type: ignore[no-any-return]

    def put_many(self, db: str, writes: Sequence[Write], *, actor: str | None = None) -> list[Written]:
        """A batch of writes through the hub: one request per write (the API has no batch endpoint), so each
        is its own transaction; the outcomes as a local store's ``put_many`` gives them."""
        self._as(actor)
        return put_each(self, db, writes, actor or self.actor)

    def put(self, db: str, doc: dict[str, Any], id: str | None = None, *, actor: str | None = None,
            if_rev: str | None = None, create_only: bool = False) -> dict[str, Any]:
        """Write a document through the hub, as the credential's actor (``actor``, if given, must be that one);
        ``if_rev`` and ``create_only`` as for a local store. Returns the document with its new ``_id`` and ``_rev``."""
        self._as(actor)
        if not isinstance(doc, dict):
            raise Invalid(f"a document must be a JSON object, not {type(doc).__name__ if doc is not None else 'null'}")
        params: dict[str, Any] = {}
        if if_rev is not None:
            params["if_rev"] = if_rev
        if create_only:
            params["create_only"] = "true"
        if id is None and isinstance(doc.get("_id"), str):
            id = doc["_id"]
        body = json.dumps(doc, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"}
        if id is None:
            out = self._request("POST", self._path(db, "docs"), params=params, content=body, headers=headers)
        else:
            out = self._request("PUT", self._path(db, "docs", id), params=params, content=body, headers=headers)
        result = {k: v for k, v in doc.items() if k not in ("_id", "_rev")}
        return {"_id": out["id"], "_rev": out["rev"], **result}

    def delete(self, db: str, id: str, *, actor: str | None = None, if_rev: str | None = None) -> dict[str, Any]:
        """Delete a document through the hub, as the credential's actor; ``if_rev`` as for a local store."""
        self._as(actor)
        params = {"if_rev": if_rev} if if_rev is not None else {}
        out = self._request("DELETE", self._path(db, "docs", id), params=params)
        return {"_id": out["id"], "_rev": out["rev"], "_deleted": True}

    def query(self, db: str, field: str, key: Any, limit: int = 100, after: str | None = None) -> Page:
        """One page of documents whose ``field`` equals ``key``; ``after`` is the previous page's ``next``."""
        params: dict[str, Any] = {"field": field, "key_json": json.dumps(key), "limit": limit}
        if after is not None:
            params["after"] = after
        out = self._request("GET", self._path(db, "query"), params=params)
        return Page(out["docs"], out["next"])

    def by_time(self, db: str, status: str, limit: int = 100, after: str | None = None, *, newest: bool = True,
                skip: int = 0) -> Page:
        """One page of ``status`` by when its documents were last written (``Documents.by_time``)."""
        params: dict[str, Any] = {"status": status, "order": "newest" if newest else "oldest", "limit": limit, "skip": skip}
        if after is not None:
            params["after"] = after
        out = self._request("GET", self._path(db, "by-time"), params=params)
        return Page(out["docs"], out["next"], written=tuple(out["written"]))

    def search(self, db: str, text: str, limit: int = 50, after: str | None = None) -> SearchPage:
        """One page of a search (``ledger/search.py``); ``after`` is the previous page's ``next``."""
        params: dict[str, Any] = {"q": text, "limit": limit}
        if after is not None:
            params["after"] = after
        out = self._request("GET", self._path(db, "search"), params=params)
        return SearchPage(out["docs"], out["total"], out["next"], out["capped"])

    def history(self, db: str, id: str) -> list[Change]:
        """Every revision of a document, oldest first."""
        return [_change(c) for c in self._request("GET", self._path(db, "history", id))]

    def changes(self, since: int = 0, limit: int = 100, dbs: Sequence[str] | None = None) -> list[Change]:
        """Up to ``limit`` changes after ``since``, of the databases in ``dbs`` (all when empty). The hub leaves
        out the ``auth`` database, so a page can hold fewer than ``limit``."""
        if not isinstance(since, int) or since < 0:
            raise Invalid("since must be a sequence number >= 0")
        params: dict[str, Any] = {"since": since, "limit": limit}
        if dbs:
            params["db"] = list(dbs)
        return [_change(c) for c in self._request("GET", "/v1/changes", params=params)["changes"]]

    def head_seq(self) -> int:
        """The change log's last sequence number."""
        return int(self._request("GET", "/v1/head")["seq"])

    def follow(self, since: int, stop: threading.Event | None = None) -> Iterator[Change]:
        """Changes after ``since`` as they commit, over server-sent events. Reconnects from the
        last change seen when the connection breaks or the hub drops a stream that fell behind."""
        last = since
        while stop is None or not stop.is_set():
            try:
                with self._client.stream("GET", "/v1/changes/stream", params={"since": last}, timeout=None) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise self._error(response)
                    event, data = "message", []
                    for line in response.iter_lines():
                        if line.startswith("event: "):
                            event = line[7:]
                        elif line.startswith("data: "):
                            data.append(line[6:])
                        elif line == "" and data:
                            body = json.loads("\n".join(data))
                            if event == "error":
                                log.warning("change stream: the hub ended it (%s); reconnecting", body.get("reason"))
                                break
                            if event == "change":
                                change = _change(body)
                                last = change.seq
                                yield change
                            event, data = "message", []
            except httpx.TransportError as exc:
                log.warning("change stream interrupted (%s); reconnecting", type(exc).__name__)
            if stop is not None and stop.wait(1.0):
                return
            if stop is None:
                time.sleep(1.0)

    def subscribe(self, listener: Callable[[Change | None], None]) -> Callable[[], None]:
        """Not over HTTP: raises LedgerError (use ``follow``)."""
        raise LedgerError("subscribing runs inside the hub; over the network use follow()")

    def use_once(self, key: str, expires_at: int) -> bool:
        """Not over HTTP: raises LedgerError (once-keys live inside the hub)."""
        raise LedgerError("once-keys live inside the hub")

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def __repr__(self) -> str:
        return f"RemoteStore({self.url!r})"


def _change(c: dict[str, Any]) -> Change:
    return Change(int(c["seq"]), c["db"], c["id"], c["rev"], c["doc"], bool(c["deleted"]), c["actor"], int(c["at"]))
