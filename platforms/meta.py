"""The Meta Graph API clients: Instagram (Instagram Login or Facebook Login), Threads, Facebook.

    Instagram     verify, refresh (Instagram Login), containers, publish, permalink, recent media,
                  a comment on a media and its comments
    Threads       verify, refresh, containers (a reply: ``reply_to_id``), publish, permalink, recent
                  threads, the account's replies
    Facebook      verify, and the long-lived token exchange (``fb_exchange_token``)

Each is a ``platforms.graph.MetaGraph`` (the shared transport: token in a header, never a URL;
refusals classified once; reads retried, **calls that create something never**). Construct one
per credential, with the process's client (``ctx.http``)::

    ig = Instagram(ctx.http, secret["accessToken"])                              # graph.instagram.com
    ig = Instagram(ctx.http, token, base_url=FACEBOOK_LOGIN, version="v21.0")    # Facebook Login
    th = Threads(ctx.http, token, version="v1.0")
    fb = Facebook(ctx.http, token, version="v21.0")

``version`` is the path prefix ("v21.0"; "" for none, which Instagram Login and Threads accept
too). Every method's docstring names the endpoint it calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote

from .errors import Answer, Failed
from .graph import FACEBOOK_LOGIN, INSTAGRAM_LOGIN, THREADS, MetaGraph, RetryPolicy, json_object, json_str

__all__ = [
    "FACEBOOK_LOGIN", "INSTAGRAM_LOGIN", "THREADS", "Comment", "CommentPage", "ContainerStatus", "Facebook", "Instagram",
    "Media", "MediaPage",
    "MetaGraph", "Profile", "PublishingLimit", "RetryPolicy", "Threads", "Token",
]


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


@dataclass(frozen=True)
class Comment:
    """One comment on an Instagram media (``GET /{media-id}/comments``); ``author`` is its writer's IG user id."""

    id: str
    text: str | None
    timestamp: str | None  # as Meta writes it ("2024-05-01T12:00:00+0000")
    author: str | None


@dataclass(frozen=True)
class CommentPage:
    """A page of comments; pass ``after`` back for the next page."""

    items: list[Comment]
    after: str | None


def _segment(value: str) -> str:
    """An id as one URL path segment (ids are digits; anything else cannot escape the path)."""
    return quote(str(value), safe="")


class _Client(MetaGraph):
    """What the Meta clients share: reading a profile, a token, a status, a limit, a listing."""

    def _profile(self, fields: str | None) -> Profile:
        body = self.get("me", {"fields": fields} if fields else None, what="verify the token (/me)")
        ident = json_str(body.get("user_id")) or json_str(body.get("id")) or ""
        return Profile(id=ident, username=json_str(body.get("username")) or json_str(body.get("name")), raw=body)

    def _token_answer(self, body: Mapping[str, Any], what: str) -> Token:
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise Failed(f"{self.name} {what}: the answer has no access_token; {Failed.advice}", Answer(self.platform))
        expires = body.get("expires_in")
        return Token(access_token=token, expires_in=int(expires) if isinstance(expires, (int, float)) else None,
                     token_type=json_str(body.get("token_type")))

    def _status(self, container_id: str, status_field: str, detail_field: str) -> ContainerStatus:
        body = self.get(_segment(container_id), {"fields": f"{status_field},{detail_field}"},
                        what=f"read the status of container {container_id}")
        status = json_str(body.get(status_field)) or ""
        return ContainerStatus(id=json_str(body.get("id")) or container_id, status=status, detail=json_str(body.get(detail_field)))

    def _limit(self, path: str) -> PublishingLimit:
        body = self.get(path, {"fields": "quota_usage,config"}, what="read the publishing limit")
        data = body.get("data")
        first = json_object(data[0]) if isinstance(data, list) and data else {}
        config = json_object(first.get("config"))
        usage, total, duration = first.get("quota_usage"), config.get("quota_total"), config.get("quota_duration")
        return PublishingLimit(quota_usage=usage if isinstance(usage, int) else 0,
                               quota_total=total if isinstance(total, int) else None,
                               quota_duration=duration if isinstance(duration, int) else None)

    def permalink(self, media_id: str) -> str | None:
        """The public URL of a published media object (``GET /{media-id}?fields=permalink``)."""
        body = self.get(_segment(media_id), {"fields": "permalink"}, what=f"read the permalink of {media_id}")
        return json_str(body.get("permalink"))

    def _recent(self, path: str, fields: str, text_field: str, limit: int, after: str | None) -> MediaPage:
        params = {"fields": fields, "limit": str(limit)}
        if after:
            params["after"] = after
        body = self.get(path, params, what="list recent media")
        items = [Media(id=json_str(m.get("id")) or "", permalink=json_str(m.get("permalink")), timestamp=json_str(m.get("timestamp")),
                       text=json_str(m.get(text_field)))
                 for m in body.get("data") or [] if isinstance(m, dict)]
        paging = json_object(body.get("paging"))
        cursors = json_object(paging.get("cursors"))
        # paging.next is a full URL carrying the access token: follow the cursor instead
        after_cursor = json_str(cursors.get("after")) if paging.get("next") else None
        return MediaPage(items=items, after=after_cursor)

    def _id(self, body: Mapping[str, Any], what: str) -> str:
        ident = json_str(body.get("id"))
        if not ident:
            raise Failed(f"{self.name} {what}: the answer has no id; {Failed.advice}", Answer(self.platform))
        return ident


class Instagram(_Client):
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

    def comment(self, media_id: str, message: str) -> str:
        """Comment on a published media as the account; the comment's id. ``POST /{ig-media-id}/comments``
        with ``message``. Creates something remote: never retried (resolve a failure with :meth:`comments`)."""
        body = self.post(f"{_segment(media_id)}/comments", {"message": message}, what="comment on the post", creates=True)
        return self._id(body, "comment on the post")

    def comments(self, media_id: str, *, limit: int = 50, after: str | None = None) -> CommentPage:
        """``GET /{ig-media-id}/comments?fields=id,text,timestamp,from``: the media's comments."""
        params = {"fields": "id,text,timestamp,from", "limit": str(limit)}
        if after:
            params["after"] = after
        body = self.get(f"{_segment(media_id)}/comments", params, what="read the post's comments")
        items = [Comment(id=json_str(c.get("id")) or "", text=json_str(c.get("text")), timestamp=json_str(c.get("timestamp")),
                         author=json_str(json_object(c.get("from")).get("id")))
                 for c in body.get("data") or [] if isinstance(c, dict)]
        paging = json_object(body.get("paging"))
        after_cursor = json_str(json_object(paging.get("cursors")).get("after")) if paging.get("next") else None
        return CommentPage(items=items, after=after_cursor)


class Threads(_Client):
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

    def replies(self, user_id: str, *, limit: int = 25, after: str | None = None) -> MediaPage:
        """``GET /{threads-user-id}/replies?fields=id,permalink,timestamp,text``: the account's own replies, newest first."""
        return self._recent(f"{_segment(user_id)}/replies", "id,permalink,timestamp,text", "text", limit, after)


class Facebook(_Client):
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
