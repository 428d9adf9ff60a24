"""The Bluesky adapter: the only module that imports ``atproto``.

The session comes from the vault (the vault tick is the only writer of a rotated session:
a refresh token is single-use), so this adapter never refreshes or creates sessions itself.
SDK errors are translated here, once: 429 -> RateLimited (with its reset time),
ExpiredToken/InvalidToken -> SessionInvalid, anything else -> BotError.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

from atproto import Client
from atproto_client import models
from atproto_client.client.session import Session
from atproto_client.exceptions import AtProtocolError, RateLimitExceededError, RequestErrorBase

from .errors import BotError, RateLimited, SessionInvalid

log = logging.getLogger(__name__)
T = TypeVar("T")
POST = "app.bsky.feed.post"


class _VaultClient(Client):  # type: ignore[misc]
    """An SDK client that never refreshes the session on its own (the vault does)."""

    def _should_refresh_session(self) -> bool:
        return False


def _plain(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class Bluesky:
    def __init__(self, pds: str, session: dict[str, Any]) -> None:
        """``session``: accessJwt, refreshJwt, did (and handle) as the vault keeps them.
        ``app.bsky.*`` reads go through the PDS, which proxies them to its AppView."""
        self.did = session["did"]
        self.handle = session.get("handle", "")
        self._client = _VaultClient(base_url=pds)
        encoded = Session(self.handle or self.did, self.did, session["accessJwt"], session["refreshJwt"], pds).encode()
        self._call(lambda: self._client.login(session_string=encoded, fetch_bsky_profile=False))

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except RateLimitExceededError as exc:
            reset = exc.reset_at
            reset_ms = int(reset.timestamp() * 1000) if reset else None
            raise RateLimited(f"Bluesky rate limit reached (429); resets at {reset.isoformat() if reset else 'an unknown time'}", reset_ms) from None
        except RequestErrorBase as exc:
            content = exc.response.content if exc.response is not None else None
            name = getattr(content, "error", None)
            message = getattr(content, "message", None) or ""
            status = exc.response.status_code if exc.response is not None else None
            if name in ("ExpiredToken", "InvalidToken"):
                raise SessionInvalid(f"Bluesky refused the session: {name}: {message}".rstrip(": ")) from None
            if status is None:
                raise BotError(f"cannot reach Bluesky: {type(exc).__name__}") from None
            raise BotError(f"Bluesky answered {status}: {name or ''} {message}".strip()) from None
        except AtProtocolError as exc:
            raise BotError(f"Bluesky client error: {type(exc).__name__}: {exc}") from None

    # ---- reads -------------------------------------------------------------------------------
    def notifications(self, *, reasons: tuple[str, ...] = ("mention",), limit: int = 50, cursor: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        params = {"limit": limit, "reasons": list(reasons)}
        if cursor:
            params["cursor"] = cursor
        out = self._call(lambda: self._client.app.bsky.notification.list_notifications(params))
        return [_plain(n) for n in out.notifications], out.cursor

    def walk_notifications(self, *, reasons: tuple[str, ...] = ("mention",), limit: int = 50, max_pages: int = 20) -> Iterator[dict[str, Any]]:
        """Newest first, following the cursor (pages can come back short: keep following)."""
        cursor = None
        for _ in range(max_pages):
            page, cursor = self.notifications(reasons=reasons, limit=limit, cursor=cursor)
            yield from page
            if not cursor:
                return

    def update_seen(self, seen_at: datetime) -> None:
        stamp = seen_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
        self._call(lambda: self._client.app.bsky.notification.update_seen({"seen_at": stamp}))

    def get_posts(self, uris: list[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for i in range(0, len(uris), 25):
            chunk = uris[i:i + 25]
            out = self._call(lambda chunk=chunk: self._client.app.bsky.feed.get_posts({"uris": chunk}))  # type: ignore[misc]
            for post in out.posts:
                found[post.uri] = _plain(post)
        return found

    def get_reply(self, rkey: str) -> dict[str, Any] | None:
        """The bot's own post with this record key, if it exists."""
        try:
            out = self._call(lambda: self._client.com.atproto.repo.get_record({"repo": self.did, "collection": POST, "rkey": rkey}))
        except BotError as exc:
            if "RecordNotFound" in exc.reason or "400" in exc.reason or "404" in exc.reason:
                return None
            raise
        return {"uri": out.uri, "cid": out.cid}

    # ---- writes ------------------------------------------------------------------------------
    def reply(self, rkey: str, text: str, facets: list[dict[str, Any]], root: dict[str, str], parent: dict[str, str], created_at: str) -> dict[str, Any]:
        """Post a reply under a fixed record key; if it already exists, return that one."""
        existing = self.get_reply(rkey)
        if existing:
            return existing
        record = {"$type": POST, "text": text, "facets": facets, "createdAt": created_at,
                  "reply": {"root": root, "parent": parent}}
        data = models.ComAtprotoRepoCreateRecord.Data(repo=self.did, collection=POST, rkey=rkey, record=record)
        try:
            out = self._call(lambda: self._client.com.atproto.repo.create_record(data))
        except BotError as exc:
            again = self.get_reply(rkey)  # "already exists" from a retry that raced us: success
            if again:
                return again
            raise exc from None
        return {"uri": out.uri, "cid": out.cid}

    def close(self) -> None:
        try:
            self._client.request._client.close()  # type: ignore[attr-defined]
        except AttributeError:
            pass
