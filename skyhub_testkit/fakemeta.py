"""A stateful stand-in for Meta's content publishing APIs (Instagram on both hosts, Threads),
built from the documented shapes: containers whose status changes over the reads, a publishing
limit over a rolling 24 hours on the given clock, recent media newest first, permalinks, and
errors injected per endpoint. Each error fixture names its code.

Serve it to a tick through ``httpx.MockTransport(meta.handle)``, or over real HTTP on
127.0.0.1 (``meta.serve()``) for the tests that run ticks in other processes.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

DAY_MS = 86_400_000


def error(code: int, message: str, *, subcode: int | None = None, status: int = 400, kind: str = "OAuthException",
          **extra: Any) -> tuple[int, dict[str, Any]]:
    """A Graph API refusal, as Meta documents it."""
    body: dict[str, Any] = {"message": message, "type": kind, "code": code, "fbtrace_id": f"Atrace{code}x{subcode or 0}"}
    if subcode is not None:
        body["error_subcode"] = subcode
    body.update(extra)
    return status, {"error": body}


# ---- error fixtures, each named by its code ---------------------------------------------------
TOKEN_EXPIRED_190 = error(190, "Error validating access token: Session has expired on Monday, 30-Nov-26.", subcode=463)
NOT_READY_9007 = error(9007, "Media ID is not available", subcode=2207027, error_user_title="Media Not Ready For Publishing",
                       error_user_msg="The media is not ready for publishing, please wait for a moment")
THREADS_NOT_READY_4279009 = error(24, "Media Not Found", subcode=4279009, kind="THApiException",
                                  error_user_msg="The media could not be found: it may still be processing")
QUOTA_9_2207042 = error(9, "Application request limit reached", subcode=2207042,
                        error_user_msg="The account has reached its maximum number of API posts in 24 hours")
RATE_LIMIT_4 = error(4, "Application request limit reached", is_transient=True)
USER_RATE_LIMIT_17 = error(17, "User request limit reached")
SPAM_4_2207051 = error(4, "Application request limit reached", subcode=2207051,
                       error_user_title="Action is blocked", error_user_msg="We restrict certain activity to protect our community")
FETCH_FAILED_2207052 = error(-1, "Media upload has failed with error code 2207052", subcode=2207052,
                             error_user_msg="The media could not be fetched from the URI")
CAROUSEL_INVALID_2207028 = error(-1, "Carousel validation failed", subcode=2207028)
SERVER_ERROR_2 = error(2, "An unexpected error has occurred. Please retry your request later.", status=500, is_transient=True)


@dataclass
class Container:
    id: str
    user: str
    created: int
    caption: str | None
    image: str | None
    alt: str | None
    carousel_item: bool
    children: list[str]
    media_type: str
    statuses: list[str] = field(default_factory=list)  # the next reads' answers; the last one stays
    status: str = "FINISHED"
    media: str | None = None
    reply_to: str | None = None  # Threads: the media this container replies to


@dataclass
class Media:
    id: str
    user: str
    container: str
    caption: str
    at: int
    permalink: str
    reply_to: str | None = None  # Threads: a reply to this media


@dataclass
class Comment:
    id: str
    media: str
    author: str
    text: str
    at: int


class FakeMeta:
    """Meta's publishing endpoints for any user id; see the module docstring.

    ``statuses``: the status answers a new container gives, read by read (``["IN_PROGRESS"] * 3 +
    ["FINISHED"]``); ``fail``: endpoint -> answers to serve first, in order: an error fixture, the
    string ``"timeout"`` (no answer; nothing happened), or for ``publish`` ``"live-timeout"`` and
    ``("live", fixture)`` (the post went live, and the answer is lost or an error; the same for
    ``comment`` and ``reply-publish``). Endpoints: ``create``, ``carousel``, ``status``, ``limit``,
    ``publish``, ``permalink``, ``recent``; first comments: ``comment`` and ``comments``
    (Instagram: ``POST`` and ``GET /{media-id}/comments``), ``reply`` (a Threads container with
    ``reply_to_id``), ``reply-publish`` (its ``threads_publish``) and ``replies``
    (``GET /{user-id}/replies``).
    """

    def __init__(self, now_ms: Callable[[], int], *, tokens: set[str] | None = None, quota_total: int = 100,
                 threads: bool = False) -> None:
        self.now_ms = now_ms
        self.tokens = tokens if tokens is not None else {"good-token"}
        self.quota_total = quota_total
        self.threads = threads
        self.statuses: list[str] = []
        self.fail: dict[str, list[Any]] = {}
        self.containers: dict[str, Container] = {}
        self.media: list[Media] = []
        self.comments: list[Comment] = []
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.hosts: Counter[str] = Counter()
        self.versions: Counter[str] = Counter()  # the API version each path started with ("" for none)
        self.usage_header: dict[str, Any] | None = None
        self.published_before: list[int] = []  # publish times outside this fake (posts made elsewhere)
        self.on_publish: Callable[[], None] | None = None  # called after a publish went live, before answering
        self.before: dict[str, Callable[[], None]] = {}  # endpoint -> called before answering
        self.after: dict[str, Callable[[], None]] = {}  # endpoint -> called once it was served, before answering
        self._n = 0
        self._lock = threading.RLock()

    # ---- state -------------------------------------------------------------------------------
    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{17_900_000_000_000_000 + self._n}"

    def live(self, user: str | None = None) -> list[Media]:
        """Published posts (replies are not posts)."""
        return [m for m in self.media if (user is None or m.user == user) and m.reply_to is None]

    def replies(self, to: str | None = None) -> list[Media]:
        """Published Threads replies (to one media, or all of them)."""
        return [m for m in self.media if m.reply_to is not None and (to is None or m.reply_to == to)]

    def used(self, user: str) -> int:
        now = self.now_ms()
        return sum(1 for m in self.media if m.user == user and m.at > now - DAY_MS) + \
            sum(1 for t in self.published_before if t > now - DAY_MS)

    # ---- HTTP --------------------------------------------------------------------------------
    def handle(self, request: httpx.Request) -> httpx.Response:
        """An ``httpx.MockTransport`` handler."""
        form = {k: v[0] for k, v in parse_qs(request.read().decode()).items()} if request.method == "POST" else {}
        params = {k: v for k, v in request.url.params.items()}
        out = self.answer(request.method, request.url.host, request.url.path, {**params, **form},
                          request.headers.get("authorization", ""))
        if out == "timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        status, body = out
        headers = {"x-app-usage": json.dumps(self.usage_header)} if self.usage_header else {}
        return httpx.Response(status, json=body, headers=headers)

    def answer(self, method: str, host: str, path: str, args: dict[str, str], auth: str) -> Any:
        parts = [p for p in path.split("/") if p]
        version = ""
        if parts and parts[0].startswith("v") and parts[0][1:2].isdigit():
            version, parts = parts[0], parts[1:]
        endpoint = self._endpoint(method, parts, args)
        hook = self.before.get(endpoint)
        if hook is not None:
            hook()
        with self._lock:
            self.calls[endpoint] += 1
            self.hosts[host] += 1
            self.versions[version] += 1
            self.requests.append((endpoint, "/".join(parts), dict(args)))
            if auth.removeprefix("Bearer ") not in self.tokens:
                return TOKEN_EXPIRED_190
            queued = self.fail.get(endpoint) or []
            injected = queued.pop(0) if queued else None
            if injected == "timeout" or (isinstance(injected, tuple) and isinstance(injected[0], int)):
                return injected
            result = self._serve(endpoint, parts, args)
        done = self.after.get(endpoint)
        if done is not None:  # the call's effect is made (a comment posted): a hook here is a crash before the answer
            done()
        if injected == "live-timeout":
            self._published_hook()
            return "timeout"
        if isinstance(injected, tuple) and injected[0] == "live":
            self._published_hook()
            return injected[1]
        if endpoint == "publish":
            self._published_hook()
        return result

    def _published_hook(self) -> None:
        if self.on_publish is not None:
            self.on_publish()

    def _endpoint(self, method: str, parts: list[str], args: dict[str, str]) -> str:
        if len(parts) == 2 and parts[1] == "comments":
            return "comment" if method == "POST" else "comments"
        if len(parts) == 2 and parts[1] == "replies":
            return "replies"
        if method == "POST" and len(parts) == 2 and parts[1] in ("media", "threads"):
            if args.get("reply_to_id"):
                return "reply"
            return "carousel" if args.get("media_type") == "CAROUSEL" else "create"
        if method == "POST" and len(parts) == 2 and parts[1] in ("media_publish", "threads_publish"):
            container = self.containers.get(args.get("creation_id", ""))
            return "reply-publish" if container is not None and container.reply_to else "publish"
        if len(parts) == 2 and parts[1] in ("content_publishing_limit", "threads_publishing_limit"):
            return "limit"
        if len(parts) == 2 and parts[1] in ("media", "threads"):
            return "recent"
        fields = args.get("fields", "")
        if len(parts) == 1 and ("status_code" in fields or fields.startswith("status")):
            return "status"
        if len(parts) == 1 and "permalink" in fields:
            return "permalink"
        return "unknown"

    def _serve(self, endpoint: str, parts: list[str], args: dict[str, str]) -> tuple[int, dict[str, Any]]:
        now = self.now_ms()
        if endpoint == "comment":
            found = [m for m in self.media if m.id == parts[0]]
            if not found:
                return error(100, "Object does not exist", subcode=33)
            comment = Comment(self._id("cm"), found[0].id, found[0].user, args.get("message", ""), now)
            self.comments.append(comment)
            return 200, {"id": comment.id}
        if endpoint == "comments":
            items = [c for c in self.comments if c.media == parts[0]]
            return 200, {"data": [{"id": c.id, "text": c.text, "from": {"id": c.author, "username": "shop"},
                                   "timestamp": _meta(c.at)} for c in items]}
        if endpoint == "replies":
            items = sorted((m for m in self.media if m.user == parts[0] and m.reply_to), key=lambda m: m.at, reverse=True)
            return 200, {"data": [{"id": m.id, "permalink": m.permalink, "text": m.caption, "timestamp": _meta(m.at)}
                                  for m in items[:25]]}
        if endpoint in ("create", "carousel", "reply"):
            user = parts[0]
            ident = self._id("c")
            children = [c for c in args.get("children", "").split(",") if c]
            for child in children:
                if child not in self.containers:
                    return CAROUSEL_INVALID_2207028
            self.containers[ident] = Container(
                ident, user, now, args.get("caption") if not self.threads else args.get("text"), args.get("image_url"),
                args.get("alt_text"), args.get("is_carousel_item") == "true", children,
                args.get("media_type", "IMAGE"), statuses=list(self.statuses), reply_to=args.get("reply_to_id"))
            if c_to := args.get("reply_to_id"):
                if not any(m.id == c_to for m in self.media):
                    del self.containers[ident]
                    return error(100, "Invalid parameter: reply_to_id does not exist", subcode=33)
            return 200, {"id": ident}
        if endpoint == "status":
            c = self.containers.get(parts[0])
            if c is None:
                return error(100, "Unsupported get request. Object does not exist", subcode=33)
            if c.statuses:  # the script, read by read; its last answer stays
                c.status = c.statuses.pop(0)
            if c.media is not None:
                c.status = "PUBLISHED"
            key = "status" if self.threads else "status_code"
            return 200, {key: c.status, "id": c.id}
        if endpoint == "limit":
            return 200, {"data": [{"quota_usage": self.used(parts[0]),
                                   "config": {"quota_total": self.quota_total, "quota_duration": 86400}}]}
        if endpoint in ("publish", "reply-publish"):
            c = self.containers.get(args.get("creation_id", ""))
            if c is None:
                return error(100, "Invalid parameter", subcode=2207006)
            if c.media is not None:
                return error(-1, "The media has already been published", subcode=2207008)  # would be a second post
            if c.status != "FINISHED":
                return NOT_READY_9007 if not self.threads else THREADS_NOT_READY_4279009
            if self.used(c.user) >= self.quota_total:
                return QUOTA_9_2207042
            media = Media(self._id("m"), c.user, c.id, c.caption or "", now,
                          f"https://www.{'threads.net/@shop/post' if self.threads else 'instagram.com/p'}/P{self._n}/",
                          reply_to=c.reply_to)
            self.media.append(media)
            c.media = media.id
            return 200, {"id": media.id}
        if endpoint == "permalink":
            found = [m for m in self.media if m.id == parts[0]]
            if not found:
                return error(100, "Object does not exist", subcode=33)
            return 200, {"permalink": found[0].permalink, "id": found[0].id}
        if endpoint == "recent":
            items = sorted((m for m in self.media if m.user == parts[0] and not m.reply_to), key=lambda m: m.at, reverse=True)
            text = "text" if self.threads else "caption"
            return 200, {"data": [{"id": m.id, "permalink": m.permalink, text: m.caption, "timestamp": _meta(m.at)}
                                  for m in items[:25]], "paging": {"cursors": {"before": "b", "after": "a"}}}
        return error(100, "Unknown path", subcode=33)

    # ---- over real HTTP ----------------------------------------------------------------------
    def serve(self) -> Server:
        """This fake on 127.0.0.1, in a thread; ``.url``, ``.stop()``."""
        return Server(self)


def _meta(ms: int) -> str:
    """Epoch ms as Meta writes times: whole seconds, ``+0000``."""
    return datetime.fromtimestamp(ms // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


class Server:
    """A ``FakeMeta`` over HTTP on a free local port."""

    def __init__(self, meta: FakeMeta) -> None:
        import http.server

        fake = meta

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _do(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                url = urlsplit(self.path)
                args = {k: v[0] for k, v in parse_qs(url.query).items()}
                args.update({k: v[0] for k, v in parse_qs(raw).items()})
                out = fake.answer(self.command, "127.0.0.1", url.path, args, self.headers.get("authorization", ""))
                if out == "timeout":
                    time.sleep(3)  # longer than the client's timeout in these tests
                    out = (500, {"error": {"message": "late", "code": 2}})
                status, body = out
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _do

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
