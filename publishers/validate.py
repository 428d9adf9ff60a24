"""What a publish request must be before anything is written or sent: one sentence per
problem, naming the field and the limit ("an Instagram carousel needs 2 to 10 images, got 11").

The same checks run everywhere a request comes in, with the hub's own settings (``Admission``):
the machine's start guard runs them in the write's transaction, so a raw ``db put``, the API,
the console and the CLI meet exactly the same rules (the CLI and the API run them first too, to
name every problem at once: exit 2, 422); the publish tick runs them again before it fetches or
sends anything. A request that is in the ledger is one the platform can take, and no request
can make the hub open one of its files or reach an address of its own network.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from platforms.richtext import graphemes  # Bluesky's count: one implementation, in the adapter

from .admission import Admission
from .media import CHUNK_BYTES, MAX_BYTES

PLATFORMS = {"ig": "Instagram", "threads": "Threads", "bsky": "Bluesky"}
CREDENTIAL_PLATFORM = {"ig": "instagram", "threads": "threads", "bsky": "bluesky"}

IG_CAPTION = 2200
IG_HASHTAGS = 30
IG_MENTIONS = 20
IG_CAROUSEL = (2, 10)
THREADS_TEXT = 500
THREADS_IMAGES = 20
BSKY_GRAPHEMES = 300
BSKY_BYTES = 3000
BSKY_IMAGES = 4
BSKY_IMAGE_BYTES = 1_000_000
ALT = 1000
SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
_HASHTAG = re.compile(r"(?:^|\s)#\w", re.UNICODE)
_MENTION = re.compile(r"(?:^|\s)@[\w.]", re.UNICODE)


# What a new post may carry: its content, and the bookkeeping the queue writes. Anything else
# (intent, containers, carouselId, mediaId, rkey, held, ...) is the tick's to write: a client
# that could set them could make the tick record another post's media, or skip a step.
NEW_FIELDS = frozenset({"kind", "status", "platform", "account", "slug", "caption", "text", "images", "at", "notBefore",
                        "replyTo", "attempts", "createdAt", "updatedAt", "post", "firstComment", "day", "review"})
COMMENT_LIMITS = {"ig": 2200, "threads": THREADS_TEXT, "bsky": BSKY_GRAPHEMES}  # a first comment: a comment, a reply, a reply
IMAGE_FIELDS = frozenset({"url", "upload", "alt"})
UPLOAD_FIELDS = frozenset({"sha256", "size", "type", "chunks", "name"})
UPLOAD_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
REPLY_TO = re.compile(r"^at://did:[a-z0-9]+:[A-Za-z0-9._:%-]{1,240}/app\.bsky\.feed\.post/[A-Za-z0-9._:~-]{1,512}$")
_HEX = re.compile(r"^[0-9a-f]{64}$")


def _text(request: dict[str, Any]) -> str:
    value = request.get("caption", request.get("text", ""))
    return value if isinstance(value, str) else ""


def _images(request: dict[str, Any], problems: list[str]) -> list[dict[str, Any]]:
    images = request.get("images", [])
    if not isinstance(images, list) or not all(isinstance(i, dict) for i in images):
        problems.append('images must be a list of {"url": ..., "alt": ...}')
        return []
    return images


def short(url: str) -> str:
    """A URL or name cut to 80 characters for a sentence."""
    return url if len(url) <= 80 else url[:77] + "..."


def is_local(url: str) -> bool:
    """Whether an image given on the command line is a file on this machine (anything but an http:// or https:// URL)."""
    return not url.lower().startswith(("https://", "http://"))


def _upload_problem(n: int, upload: Any) -> str | None:
    if not isinstance(upload, dict) or set(upload) - UPLOAD_FIELDS:
        return f"image {n}'s upload must be {{sha256, size, type, chunks, name}}, as the hub writes it when a file is uploaded"
    size, chunks = upload.get("size"), upload.get("chunks")
    if not isinstance(upload.get("sha256"), str) or not _HEX.match(upload["sha256"]):
        return f"image {n}'s upload needs the sha256 of its bytes (64 hex digits)"
    if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= MAX_BYTES:
        return f"image {n} is {size!r} bytes; an uploaded image is 1 to {MAX_BYTES:,} bytes (Bluesky's copy is scaled to fit)"
    if not isinstance(chunks, list) or not all(isinstance(c, str) and _HEX.match(c) for c in chunks) \
            or len(chunks) != -(-size // CHUNK_BYTES):
        return f"image {n}'s upload must list the sha256 of each {CHUNK_BYTES // 1024} KiB part of its bytes"
    if upload.get("type") not in UPLOAD_TYPES:
        return f"image {n} must be a JPEG, PNG, GIF or WebP image, not {upload.get('type')!r}"
    name = upload.get("name", "")
    if not isinstance(name, str) or len(name) > 200 or "/" in name or "\\" in name:
        return f"image {n}'s upload name is a file name of at most 200 characters, without folders"
    return None


def problems(request: dict[str, Any], *, now_ms: int | None = None, admission: Admission | None = None) -> list[str]:
    """Every problem with ``request`` (a publish-request body), as sentences; [] when it is good.

    ``now_ms`` checks that ``at`` is in the future (queueing; the start guard leaves scheduling
    to the tick); ``admission`` holds the hub's settings (image hosts, what may be fetched).
    No sentence reveals anything of the hub: a URL is judged by its form, never by fetching it."""
    rules = admission or Admission()
    out: list[str] = []
    platform = request.get("platform")
    if platform not in PLATFORMS:
        return [f"platform must be one of {', '.join(PLATFORMS)}, got {str(platform)[:40]!r}"]
    name = PLATFORMS[str(platform)]
    for field, pattern in (("account", ACCOUNT), ("slug", SLUG)):
        value = request.get(field)
        if not isinstance(value, str) or not pattern.match(value):
            allowed = "'.', '_' or '-'" if field == "slug" else "'.', '_', ':', '@' or '-'"
            out.append(f"{field} must be 1-{100 if field == 'slug' else 128} letters, digits, {allowed} "
                       f"(got {str(value)[:60]!r})")
    if "caption" in request and "text" in request and request["caption"] != request["text"]:
        out.append("give the post's words once, as caption (or text), not both")
    text = _text(request)
    if not isinstance(request.get("caption", request.get("text", "")), str):
        out.append("caption must be a string")
    images = _images(request, out)
    for n, image in enumerate(images, start=1):
        extra = sorted(set(image) - IMAGE_FIELDS)
        if extra:
            out.append(f"image {n} has {extra[0]!r}: an image is {{url or upload, alt}}")
            continue
        alt = image.get("alt", "")
        if not isinstance(alt, str):
            out.append(f"image {n}'s alt text must be a string")
        elif len(alt) > ALT:
            out.append(f"image {n}'s alt text is {len(alt):,} characters; the limit is {ALT:,}")
        if ("url" in image) == ("upload" in image):
            out.append(f"image {n} needs a url, or an uploaded file (not both)")
            continue
        if "upload" in image:
            if platform != "bsky":
                out.append(f"image {n} is an uploaded file: {name} fetches images itself, so give a public https URL to a JPEG")
            else:
                problem = _upload_problem(n, image["upload"])
                if problem:
                    out.append(problem)
            continue
        url = image["url"]
        if not isinstance(url, str):
            out.append(f"image {n}'s url must be a string")
            continue
        if is_local(url):
            hint = "; to post a file from your machine, upload it first" if platform == "bsky" else ""
            out.append(f"image {n} must be a public https URL, not a path or another kind of address{hint}")
            continue
        if platform != "bsky" and not url.lower().startswith("https://"):
            out.append(f"image {n} must be an https URL ({name} fetches it), got {url.partition(':')[0]}://")
        else:
            refused = rules.web.url_problem(url)
            if refused:
                out.append(f"image {n} ({short(url)}) cannot be used: {refused}")
                continue
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises for a port that is not one
        except ValueError:
            out.append(f"image {n} ({short(url)}) cannot be used: the URL cannot be read (a malformed host or port)")
            continue
        if platform != "bsky" and not parts.path.lower().endswith((".jpg", ".jpeg")):
            out.append(f"image {n} must be a JPEG ({name} takes JPEG only): its URL should end in .jpg or .jpeg")
        host = (parts.hostname or "").lower().rstrip(".")
        if rules.image_hosts and host not in rules.image_hosts:
            out.append(f"image {n} is on {host}, which is not an allowed image host ({', '.join(rules.image_hosts)})")
    if platform == "ig":
        if len(images) > IG_CAROUSEL[1]:
            out.append(f"an Instagram carousel needs {IG_CAROUSEL[0]} to {IG_CAROUSEL[1]} images, got {len(images)}")
        elif not images:
            out.append(f"an Instagram post needs an image (or {IG_CAROUSEL[0]} to {IG_CAROUSEL[1]} for a carousel), got none")
        if len(text) > IG_CAPTION:
            out.append(f"an Instagram caption is at most {IG_CAPTION:,} characters, got {len(text):,}")
        tags = len(_HASHTAG.findall(text))
        if tags > IG_HASHTAGS:
            out.append(f"an Instagram caption has at most {IG_HASHTAGS} hashtags, got {tags}")
        mentions = len(_MENTION.findall(text))
        if mentions > IG_MENTIONS:
            out.append(f"an Instagram caption has at most {IG_MENTIONS} @mentions, got {mentions}")
    elif platform == "threads":
        if len(text) > THREADS_TEXT:
            out.append(f"a Threads post is at most {THREADS_TEXT} characters, got {len(text):,}")
        if len(images) > THREADS_IMAGES:
            out.append(f"a Threads post has at most {THREADS_IMAGES} images, got {len(images)}")
        if not text and not images:
            out.append("a Threads post needs text or an image")
    else:
        count = graphemes(text)
        if count > BSKY_GRAPHEMES:
            out.append(f"a Bluesky post is at most {BSKY_GRAPHEMES} characters, got {count}")
        if len(text.encode()) > BSKY_BYTES:
            out.append(f"a Bluesky post is at most {BSKY_BYTES:,} bytes, got {len(text.encode()):,}")
        if len(images) > BSKY_IMAGES:
            out.append(f"a Bluesky post has at most {BSKY_IMAGES} images, got {len(images)}")
        for n, image in enumerate(images, start=1):
            if not (image.get("alt") or "").strip():
                out.append(f"image {n} needs alt text on Bluesky")
        if not text and not images:
            out.append("a Bluesky post needs text or an image")
    reply = request.get("replyTo")
    if reply is not None:
        if platform != "bsky":
            out.append("replyTo is for Bluesky posts")
        elif not (isinstance(reply, str) and REPLY_TO.match(reply)):
            out.append(f"replyTo must be the at:// URI of a Bluesky post (at://did:.../app.bsky.feed.post/...), got {str(reply)[:80]!r}")
    out += _first_comment_problems(request, str(platform))
    post = request.get("post")
    if post is not None and post != request.get("slug"):
        out.append(f"post names the post this one is a variant of: it must be the slug ({str(request.get('slug'))[:60]!r})")
    at = request.get("at")
    if at is not None:
        when = parse_at(at)
        if when is None:
            out.append(f"at must be a time with its time zone, like 2026-12-01T09:00:00+01:00, got {str(at)[:60]!r}")
        elif now_ms is not None and when <= now_ms:
            out.append(f"at ({at}) is in the past: give a future time, or leave it out to publish now")
    if "day" in request and request["day"] != day_of(request):
        out.append("day is the UTC date (YYYY-MM-DD) of the post's time: of at, else of createdAt")
    return out


def warnings(request: dict[str, Any]) -> list[str]:
    """What a post may be queued with but should not be, as sentences (the CLI prints each as
    one ``skyhub:`` line, the API answers ``warnings``, the console shows them): today, images
    without alt text on Instagram and Threads, which take them (Bluesky refuses them: a problem)."""
    platform = request.get("platform")
    if platform not in ("ig", "threads"):
        return []
    images = request.get("images")
    bare = [n for n, i in enumerate(images if isinstance(images, list) else [], start=1)
            if isinstance(i, dict) and not str(i.get("alt") or "").strip()]
    if not bare:
        return []
    one = len(bare) == 1
    which = f"image {bare[0]} has" if one else f"images {', '.join(map(str, bare[:-1]))} and {bare[-1]} have"
    return [f"{which} no alt text: {PLATFORMS[str(platform)]} publishes {'it' if one else 'them'} without, but people who "
            f"use a screen reader will not know what {'it shows' if one else 'they show'}; add alt text"]


def _first_comment_problems(request: dict[str, Any], platform: str) -> list[str]:
    """A first comment: text, within what the network takes for a comment (Instagram) or a reply (Threads, Bluesky)."""
    comment = request.get("firstComment")
    if comment is None:
        return []
    name = PLATFORMS[platform]
    if not isinstance(comment, str) or not comment.strip():
        return ["the first comment must be text (leave it out for none)"]
    limit = COMMENT_LIMITS[platform]
    size = graphemes(comment) if platform == "bsky" else len(comment)
    if size > limit:
        return [f"a first comment on {name} is at most {limit:,} characters, got {size:,}"]
    if platform == "bsky" and len(comment.encode()) > BSKY_BYTES:
        return [f"a first comment on Bluesky is at most {BSKY_BYTES:,} bytes, got {len(comment.encode()):,}"]
    return []


def day_of(request: dict[str, Any]) -> str | None:
    """The UTC date (``YYYY-MM-DD``) a post is planned for: of its ``at``, else of its ``createdAt``; what the
    calendar and time-sorted listings query by (the ``day`` index)."""
    when = parse_at(request.get("at")) if request.get("at") is not None else None
    if when is None:
        when = parse_at(request.get("createdAt"))
    if when is None:
        return None
    from datetime import UTC

    return datetime.fromtimestamp(when / 1000, tz=UTC).strftime("%Y-%m-%d")


def new_problems(request: dict[str, Any], admission: Admission) -> list[str]:
    """``problems`` plus what only a new post is held to: no field but its content (the tick's fields are the tick's)."""
    extra = sorted(set(request) - NEW_FIELDS)
    found = [f"a new post cannot carry {extra[0]!r}: only {', '.join(sorted(NEW_FIELDS - {'kind', 'status'}))}"] if extra else []
    at = request.get("at")
    if "notBefore" in request and (at is None or request["notBefore"] != parse_at(at)):
        found.append("notBefore is written from at: give at (a time with its zone) instead")
    attempts = request.get("attempts", 0)
    if attempts != 0 or isinstance(attempts, bool):
        found.append("a new post starts with no attempts")
    return found + problems(request, admission=admission)


def parse_at(value: Any) -> int | None:
    """An ISO 8601 time *with* its offset as epoch ms; None for anything else (a naive time too)."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None or when.utcoffset() is None:
        return None
    return int(when.timestamp() * 1000)
