"""The Meta Graph API: Instagram (Instagram Login or Facebook Login), Threads and Facebook.

    MetaGraph     the transport every client shares: one ``httpx.Client``, the token in the
                  ``Authorization`` header (or a form body), never in a URL; Meta's refusals
                  classified once (``platforms.metacodes``); reads retried with tenacity
    Instagram     verify, refresh (Instagram Login), containers, publish, permalink, recent media
    Threads       verify, refresh, containers, publish, permalink, recent threads
    Facebook      verify, and the long-lived token exchange (``fb_exchange_token``)

Construct one per credential, with the process's client (``ctx.http``)::

    ig = Instagram(ctx.http, secret["accessToken"])                              # graph.instagram.com
    ig = Instagram(ctx.http, token, base_url=FACEBOOK_LOGIN, version="v21.0")    # Facebook Login
    th = Threads(ctx.http, token, version="v1.0")
    fb = Facebook(ctx.http, token, version="v21.0")

``version`` is the path prefix ("v21.0"; "" for none, which Instagram Login and Threads accept
too). Calls that read are retried on ``Transient`` errors (not on ``RateLimited``), with
exponential waits, within ``RetryPolicy.attempts``. **Calls that create something remote are
never retried** (container creation, ``media_publish``, ``threads_publish``): any failure is
raised as is, and a caller must treat a ``Transient`` one as ambiguous (read back, never call
again blindly). ``usage`` holds the rate-limit usage headers of the last answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal
from urllib.parse import quote

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from . import metacodes
from .errors import PLATFORM_NAMES, Answer, Failed, PlatformError, RateLimited, Transient
from .transport import transport_error
from .usage import Usage

log = logging.getLogger(__name__)

INSTAGRAM_LOGIN = "https://graph.instagram.com"
FACEBOOK_LOGIN = "https://graph.facebook.com"
THREADS = "https://graph.threads.net"
MAX_MESSAGE = 300  # characters of Meta's message kept in a reason


@dataclass(frozen=True)
class RetryPolicy:
    """How reads are retried on transient errors. ``sleep`` is injectable so tests never sleep."""

    attempts: int = 3  # in all, the first call included
    wait: float = 0.5  # seconds before the first retry, doubled each time
    max_wait: float = 30.0
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True)
class Profile:
    """Who a token belongs to (``GET /me``)."""

    id: str
    username: str | None
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Token:
    """A refreshed or exchanged access token."""

    access_token: str = field(repr=False)
    expires_in: int | None  # seconds
    token_type: str | None = None


ContainerState = Literal["EXPIRED", "ERROR", "FINISHED", "IN_PROGRESS", "PUBLISHED"]


@dataclass(frozen=True)
class ContainerStatus:
    """A container's publishing status: EXPIRED, ERROR, FINISHED, IN_PROGRESS or PUBLISHED.

    ``detail`` is Instagram's ``status`` (the error subcode text when ERROR) or Threads'
    ``error_message`` (e.g. FAILED_DOWNLOADING_VIDEO)."""

    id: str
    status: str
    detail: str | None = None

    @property
    def ready(self) -> bool:
        """FINISHED: the container can be published."""
        return self.status == "FINISHED"

    @property
    def published(self) -> bool:
        """PUBLISHED: its media object is live."""
        return self.status == "PUBLISHED"

    @property
    def dead(self) -> bool:
        """ERROR or EXPIRED: it will never publish; create a new one."""
        return self.status in ("ERROR", "EXPIRED")


@dataclass(frozen=True)
class PublishingLimit:
    """How many posts the account published through the API in the last ``quota_duration`` s."""

    quota_usage: int
    quota_total: int | None = None
    quota_duration: int | None = None  # seconds (86400)

    @property
    def remaining(self) -> int | None:
        """Posts left in the window, when the total is known."""
        return None if self.quota_total is None else max(self.quota_total - self.quota_usage, 0)


@dataclass(frozen=True)
class Media:
    """One published media object or thread, as recent-media listings return it."""

    id: str
    permalink: str | None
    timestamp: str | None  # ISO 8601, as Meta writes it ("2024-05-01T12:00:00+0000")
    text: str | None  # Instagram's caption, Threads' text


@dataclass(frozen=True)
class MediaPage:
    """A page of recent media, newest first; pass ``after`` back for the next page."""

    items: list[Media]
    after: str | None


def _segment(value: str) -> str:
    """An id as one URL path segment (ids are digits; anything else cannot escape the path)."""
    return quote(str(value), safe="")


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else (str(value) if isinstance(value, int) and not isinstance(value, bool) else None)


class MetaGraph:
    """The Graph API transport for one token on one host (see the module docstring)."""

    platform: ClassVar[str] = "facebook"
    default_base_url: ClassVar[str] = FACEBOOK_LOGIN

    def __init__(self, http: httpx.Client, token: str, *, base_url: str | None = None, version: str = "",
                 retry: RetryPolicy | None = None, clock: Callable[[], float] = time.time,
                 timeout: float | None = None) -> None:
        self._http = http
        self._token = token
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.version = version.strip("/")
        self.retry = retry or RetryPolicy()
        self._clock = clock  # seconds since the epoch: for a rate limit's reset time
        self._timeout = timeout
        self.usage = Usage()  # the last answer's usage headers

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.base_url}{'/' + self.version if self.version else ''}>"

    @property
    def name(self) -> str:
        """The platform's name for people ("Instagram")."""
        return PLATFORM_NAMES[self.platform]

    def _url(self, path: str) -> str:
        return f"{self.base_url}/{self.version + '/' if self.version else ''}{path.lstrip('/')}"

    # ---- the one seam ---------------------------------------------------------------------
    def get(self, path: str, params: Mapping[str, str] | None = None, *, what: str) -> dict[str, Any]:
        """``GET`` a path (retried on transient errors); the answer's JSON object."""
        return self._call("GET", path, what, params=dict(params or {}), creates=False)

    def post(self, path: str, form: Mapping[str, str] | None = None, *, what: str, creates: bool,
             auth: bool = True, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        """``POST`` a form. ``creates=True`` (the call makes something remote): never retried.
        ``auth=False``: no ``Authorization`` header (the form carries the credentials, listed in
        ``secrets`` so that no reason shows them)."""
        return self._call("POST", path, what, data=dict(form or {}), creates=creates, auth=auth, secrets=secrets)

    def _call(self, method: str, path: str, what: str, *, creates: bool, auth: bool = True,
              params: dict[str, str] | None = None, data: dict[str, str] | None = None,
              secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        what = f"{self.name} {what}"
        retrying = Retrying(
            retry=retry_if_exception(lambda e: isinstance(e, Transient) and not isinstance(e, RateLimited)),
            stop=stop_after_attempt(1 if creates else max(self.retry.attempts, 1)),
            wait=wait_exponential(multiplier=self.retry.wait, max=self.retry.max_wait),
            sleep=self.retry.sleep, reraise=True,
        )
        for attempt in retrying:
            with attempt:
                return self._once(method, path, what, auth=auth, params=params, data=data, secrets=(self._token, *secrets))
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, method: str, path: str, what: str, *, auth: bool, params: dict[str, str] | None,
              data: dict[str, str] | None, secrets: tuple[str, ...]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._token}"} if auth else {}
        extra: dict[str, Any] = {} if self._timeout is None else {"timeout": self._timeout}
        try:
            response = self._http.request(method, self._url(path), params=params or None, data=data or None,
                                          headers=headers, **extra)
        except httpx.TransportError as exc:
            raise transport_error(exc, what, self.platform) from exc
        self.usage = Usage.from_headers(response.headers)
        log.debug("%s %s %s -> %s", self.platform, method, path, response.status_code,
                  extra={"platform": self.platform, "status": response.status_code})
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code < 400 and isinstance(body, dict) and "error" not in body:
            return body
        raise self._refusal(response, body, what, secrets)

    def _refusal(self, response: httpx.Response, body: Any, what: str, secrets: tuple[str, ...]) -> PlatformError:
        """The platform error for a refusal (or an answer that is not a JSON object)."""
        status = response.status_code
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            if status < 400:
                return Failed(f"{what}: {self.name} answered HTTP {status} with something that is not a JSON object; "
                              f"{Failed.advice}", Answer(self.platform, http_status=status))
            error = {}
        code, subcode = metacodes.codes(error)
        message = str(error.get("message") or "")
        user_msg = error.get("error_user_msg")
        if isinstance(user_msg, str) and user_msg and user_msg not in message:
            message = f"{message} ({user_msg})" if message else user_msg
        answer = Answer(self.platform, http_status=status, error_code=code, error_subcode=subcode,
                        fbtrace_id=_str(error.get("fbtrace_id")), message=message[:MAX_MESSAGE])
        found = metacodes.meaning(status, error)
        reason = found.kind.describe(what, answer)
        if found.kind is RateLimited:
            minutes = self.usage.regain_access_minutes
            reset_at = int((self._clock() + minutes * 60) * 1000) if minutes is not None else None
            return RateLimited(reason, answer, reset_at=reset_at, blocked=found.blocked or self.usage.blocked,
                               secrets=secrets)
        return found.kind(reason, answer, secrets=secrets)

    # ---- shared reads ---------------------------------------------------------------------
    def _profile(self, fields: str | None) -> Profile:
        body = self.get("me", {"fields": fields} if fields else None, what="verify the token (/me)")
        ident = _str(body.get("user_id")) or _str(body.get("id")) or ""
        return Profile(id=ident, username=_str(body.get("username")) or _str(body.get("name")), raw=body)

    def _token_answer(self, body: Mapping[str, Any], what: str) -> Token:
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise Failed(f"{self.name} {what}: the answer has no access_token; {Failed.advice}", Answer(self.platform))
        expires = body.get("expires_in")
        return Token(access_token=token, expires_in=int(expires) if isinstance(expires, (int, float)) else None,
                     token_type=_str(body.get("token_type")))

    def _status(self, container_id: str, status_field: str, detail_field: str) -> ContainerStatus:
        body = self.get(_segment(container_id), {"fields": f"{status_field},{detail_field}"},
                        what=f"read the status of container {container_id}")
        status = _str(body.get(status_field)) or ""
        return ContainerStatus(id=_str(body.get("id")) or container_id, status=status, detail=_str(body.get(detail_field)))

    def _limit(self, path: str) -> PublishingLimit:
        body = self.get(path, {"fields": "quota_usage,config"}, what="read the publishing limit")
        data = body.get("data")
        first = _obj(data[0]) if isinstance(data, list) and data else {}
        config = _obj(first.get("config"))
        usage, total, duration = first.get("quota_usage"), config.get("quota_total"), config.get("quota_duration")
        return PublishingLimit(quota_usage=usage if isinstance(usage, int) else 0,
                               quota_total=total if isinstance(total, int) else None,
                               quota_duration=duration if isinstance(duration, int) else None)

    def permalink(self, media_id: str) -> str | None:
        """The public URL of a published media object (``GET /{media-id}?fields=permalink``)."""
        body = self.get(_segment(media_id), {"fields": "permalink"}, what=f"read the permalink of {media_id}")
        return _str(body.get("permalink"))

    def _recent(self, path: str, fields: str, text_field: str, limit: int, after: str | None) -> MediaPage:
        params = {"fields": fields, "limit": str(limit)}
        if after:
            params["after"] = after
        body = self.get(path, params, what="list recent media")
        items = [Media(id=_str(m.get("id")) or "", permalink=_str(m.get("permalink")), timestamp=_str(m.get("timestamp")),
                       text=_str(m.get(text_field)))
                 for m in body.get("data") or [] if isinstance(m, dict)]
        paging = _obj(body.get("paging"))
        cursors = _obj(paging.get("cursors"))
        # paging.next is a full URL carrying the access token: follow the cursor instead
        after_cursor = _str(cursors.get("after")) if paging.get("next") else None
        return MediaPage(items=items, after=after_cursor)

    def _id(self, body: Mapping[str, Any], what: str) -> str:
        ident = _str(body.get("id"))
        if not ident:
            raise Failed(f"{self.name} {what}: the answer has no id; {Failed.advice}", Answer(self.platform))
        return ident


class Instagram(MetaGraph):
    """Instagram through Instagram Login (``graph.instagram.com``, the default) or Facebook Login
    (``base_url=FACEBOOK_LOGIN``); the IG user id is a parameter of each publishing call."""

    platform = "instagram"
    default_base_url = INSTAGRAM_LOGIN

    def verify(self) -> Profile:
        """Check the token: ``GET /me?fields=user_id,username`` (Instagram Login)."""
        return self._profile("user_id,username")

    def refresh(self) -> Token:
        """A new long-lived token (Instagram Login only): ``GET /refresh_access_token?grant_type=ig_refresh_token``.
        With Facebook Login, exchange the token with :meth:`Facebook.exchange_token` instead."""
        body = self.get("refresh_access_token", {"grant_type": "ig_refresh_token"}, what="refresh the token")
        return self._token_answer(body, "refresh the token")

    def create_image(self, user_id: str, image_url: str, *, caption: str | None = None, alt_text: str | None = None,
                     carousel_item: bool = False) -> str:
        """Create an image container; its id. ``POST /{ig-user-id}/media`` with ``image_url``,
        ``is_carousel_item`` (a carousel's child: no caption) or ``caption`` (a single image),
        ``alt_text``. Creates something remote: never retried."""
        form = {"image_url": image_url}
        if carousel_item:
            form["is_carousel_item"] = "true"
        elif caption is not None:
            form["caption"] = caption
        if alt_text:
            form["alt_text"] = alt_text
        body = self.post(f"{_segment(user_id)}/media", form, what="create an image container", creates=True)
        return self._id(body, "create an image container")

    def create_carousel(self, user_id: str, children: Sequence[str], *, caption: str | None = None) -> str:
        """Create a carousel container from child container ids; its id. ``POST /{ig-user-id}/media``
        with ``media_type=CAROUSEL``, ``children`` (comma-separated), ``caption``. Never retried."""
        form = {"media_type": "CAROUSEL", "children": ",".join(children)}
        if caption is not None:
            form["caption"] = caption
        body = self.post(f"{_segment(user_id)}/media", form, what="create a carousel container", creates=True)
        return self._id(body, "create a carousel container")

    def container_status(self, container_id: str) -> ContainerStatus:
        """``GET /{container-id}?fields=status_code,status``."""
        return self._status(container_id, "status_code", "status")

    def publishing_limit(self, user_id: str) -> PublishingLimit:
        """``GET /{ig-user-id}/content_publishing_limit?fields=quota_usage,config``."""
        return self._limit(f"{_segment(user_id)}/content_publishing_limit")

    def publish(self, user_id: str, creation_id: str) -> str:
        """Publish a finished container; the new media id. ``POST /{ig-user-id}/media_publish``
        with ``creation_id``. Never retried: on any failure, resolve by reading
        (:meth:`container_status`, :meth:`recent_media`)."""
        body = self.post(f"{_segment(user_id)}/media_publish", {"creation_id": creation_id}, what="publish (media_publish)",
                         creates=True)
        return self._id(body, "publish (media_publish)")

    def recent_media(self, user_id: str, *, limit: int = 25, after: str | None = None) -> MediaPage:
        """``GET /{ig-user-id}/media?fields=id,permalink,timestamp,caption``, newest first."""
        return self._recent(f"{_segment(user_id)}/media", "id,permalink,timestamp,caption", "caption", limit, after)


class Threads(MetaGraph):
    """Threads (``graph.threads.net``); the Threads user id is a parameter of each publishing call."""

    platform = "threads"
    default_base_url = THREADS

    def verify(self) -> Profile:
        """Check the token: ``GET /me?fields=id,username``."""
        return self._profile("id,username")

    def refresh(self) -> Token:
        """A new long-lived token: ``GET /refresh_access_token?grant_type=th_refresh_token``."""
        body = self.get("refresh_access_token", {"grant_type": "th_refresh_token"}, what="refresh the token")
        return self._token_answer(body, "refresh the token")

    def create_container(self, user_id: str, media_type: Literal["TEXT", "IMAGE", "CAROUSEL"], *, text: str | None = None,
                         image_url: str | None = None, carousel_item: bool = False, children: Sequence[str] = (),
                         alt_text: str | None = None, reply_to_id: str | None = None) -> str:
        """Create a Threads container; its id. ``POST /{threads-user-id}/threads`` with
        ``media_type`` (TEXT, IMAGE or CAROUSEL), ``text``, ``image_url``, ``is_carousel_item``,
        ``children`` (comma-separated), ``alt_text``, ``reply_to_id``. Never retried."""
        form: dict[str, str] = {"media_type": media_type}
        optional = {"text": text, "image_url": image_url, "alt_text": alt_text, "reply_to_id": reply_to_id,
                    "children": ",".join(children) if children else None,
                    "is_carousel_item": "true" if carousel_item else None}
        form.update({k: v for k, v in optional.items() if v})
        body = self.post(f"{_segment(user_id)}/threads", form, what=f"create a {media_type} container", creates=True)
        return self._id(body, f"create a {media_type} container")

    def create_image(self, user_id: str, image_url: str, *, caption: str | None = None, alt_text: str | None = None,
                     carousel_item: bool = False) -> str:
        """An IMAGE container (``caption`` is the post's text): :meth:`create_container`."""
        return self.create_container(user_id, "IMAGE", image_url=image_url, text=None if carousel_item else caption,
                                     alt_text=alt_text, carousel_item=carousel_item)

    def create_carousel(self, user_id: str, children: Sequence[str], *, caption: str | None = None) -> str:
        """A CAROUSEL container of child containers (``caption`` is the post's text)."""
        return self.create_container(user_id, "CAROUSEL", children=children, text=caption)

    def container_status(self, container_id: str) -> ContainerStatus:
        """``GET /{threads-container-id}?fields=status,error_message``."""
        return self._status(container_id, "status", "error_message")

    def publishing_limit(self, user_id: str) -> PublishingLimit:
        """``GET /{threads-user-id}/threads_publishing_limit?fields=quota_usage,config``."""
        return self._limit(f"{_segment(user_id)}/threads_publishing_limit")

    def publish(self, user_id: str, creation_id: str) -> str:
        """Publish a finished container; the new thread's id. ``POST /{threads-user-id}/threads_publish``
        with ``creation_id``. Never retried: resolve a failure by reading."""
        body = self.post(f"{_segment(user_id)}/threads_publish", {"creation_id": creation_id},
                         what="publish (threads_publish)", creates=True)
        return self._id(body, "publish (threads_publish)")

    def recent_media(self, user_id: str, *, limit: int = 25, after: str | None = None) -> MediaPage:
        """``GET /{threads-user-id}/threads?fields=id,permalink,timestamp,text``, newest first."""
        return self._recent(f"{_segment(user_id)}/threads", "id,permalink,timestamp,text", "text", limit, after)

    recent_threads = recent_media


class Facebook(MetaGraph):
    """Facebook Login tokens (``graph.facebook.com``): verify, and exchange for a long-lived one."""

    platform = "facebook"
    default_base_url = FACEBOOK_LOGIN

    def verify(self) -> Profile:
        """Check the token: ``GET /me``."""
        return self._profile(None)

    def exchange_token(self, app_id: str, app_secret: str) -> Token:
        """A long-lived token for this one: ``POST /oauth/access_token`` with
        ``grant_type=fb_exchange_token``, ``client_id``, ``client_secret`` and ``fb_exchange_token``
        in the form body (the app secret never reaches a URL, a reason or a log)."""
        form = {"grant_type": "fb_exchange_token", "client_id": app_id, "client_secret": app_secret,
                "fb_exchange_token": self._token}
        body = self.post("oauth/access_token", form, what="exchange the token", creates=False, auth=False,
                         secrets=(app_secret,))
        return self._token_answer(body, "exchange the token")
