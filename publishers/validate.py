"""What a publish request must be before anything is written or sent: one sentence per
problem, naming the field and the limit ("an Instagram carousel needs 2 to 10 images, got 11").

The same checks run everywhere a request comes in: the CLI (exit 2), the API (422), and the
machine's start guard for raw writes (403), so a request that is in the ledger is one the
platform can take.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from platforms.richtext import graphemes  # Bluesky's count: one implementation, in the adapter

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


def _text(request: dict[str, Any]) -> str:
    value = request.get("caption", request.get("text", ""))
    return value if isinstance(value, str) else ""


def _images(request: dict[str, Any], problems: list[str]) -> list[dict[str, Any]]:
    images = request.get("images", [])
    if not isinstance(images, list) or not all(isinstance(i, dict) and isinstance(i.get("url"), str) for i in images):
        problems.append('images must be a list of {"url": ..., "alt": ...}')
        return []
    return images


def is_local(url: str) -> bool:
    """Whether an image's ``url`` is a path on this machine (anything but an http:// or https:// URL)."""
    return not url.startswith(("https://", "http://"))


def problems(request: dict[str, Any], *, now_ms: int | None = None, image_hosts: list[str] | None = None,
             local_files: bool = True) -> list[str]:
    """Every problem with ``request`` (a publish-request body), as sentences; [] when it is good.

    ``now_ms`` checks that ``at`` is in the future (queueing; the start guard leaves scheduling
    to the tick); ``image_hosts`` limits where images may come from; ``local_files`` says
    whether a Bluesky image may be a path on this machine (not over a hub)."""
    out: list[str] = []
    platform = request.get("platform")
    if platform not in PLATFORMS:
        return [f"platform must be one of {', '.join(PLATFORMS)}, got {platform!r}"]
    name = PLATFORMS[str(platform)]
    for field, pattern in (("account", ACCOUNT), ("slug", SLUG)):
        value = request.get(field)
        if not isinstance(value, str) or not pattern.match(value):
            allowed = "'.', '_' or '-'" if field == "slug" else "'.', '_', ':', '@' or '-'"
            out.append(f"{field} must be 1-{100 if field == 'slug' else 128} letters, digits, {allowed} (got {value!r})")
    if "caption" in request and "text" in request and request["caption"] != request["text"]:
        out.append("give the post's words once, as caption (or text), not both")
    text = _text(request)
    if not isinstance(request.get("caption", request.get("text", "")), str):
        out.append("caption must be a string")
    images = _images(request, out)
    for n, image in enumerate(images, start=1):
        alt = image.get("alt", "")
        if not isinstance(alt, str):
            out.append(f"image {n}'s alt text must be a string")
        elif len(alt) > ALT:
            out.append(f"image {n}'s alt text is {len(alt):,} characters; the limit is {ALT:,}")
        url = image["url"]
        if is_local(url):
            if platform != "bsky":
                out.append(f"image {n} is a local path ({url}): {name} fetches images itself, so give a public https URL to a JPEG")
            elif not local_files:
                out.append(f"image {n} is a local path ({url}): over a hub, give a URL the hub can fetch")
            continue
        parts = urlsplit(url)
        if platform != "bsky" and parts.scheme != "https":
            out.append(f"image {n} must be an https URL ({name} fetches it), got {parts.scheme}://")
        if platform != "bsky" and not parts.path.lower().endswith((".jpg", ".jpeg")):
            out.append(f"image {n} must be a JPEG ({name} takes JPEG only): its URL should end in .jpg or .jpeg")
        if image_hosts and parts.hostname not in image_hosts:
            out.append(f"image {n} is on {parts.hostname}, which is not an allowed image host ({', '.join(image_hosts)})")
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
                out.append(f"image {n} needs alt text on Bluesky (--alt)")
        if not text and not images:
            out.append("a Bluesky post needs text or an image")
        reply = request.get("replyTo")
        if reply is not None and not (isinstance(reply, str) and reply.startswith("at://") and "/app.bsky.feed.post/" in reply):
            out.append(f"replyTo must be the at:// URI of a Bluesky post, got {reply!r}")
    at = request.get("at")
    if at is not None:
        when = parse_at(at)
        if when is None:
            out.append(f"at must be a time with its time zone, like 2026-12-01T09:00:00+01:00, got {at!r}")
        elif now_ms is not None and when <= now_ms:
            out.append(f"at ({at}) is in the past: give a future time, or leave it out to publish now")
    return out


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
