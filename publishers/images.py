"""Images for a Bluesky post: the bytes (fetched from a URL through the guarded fetcher, or
reassembled from an upload in the ledger), at most ``media.MAX_BYTES``, made fit to publish by
``publishers.imaging`` (upright, without EXIF or any other metadata, under Bluesky's blob
limit, quality stepped down before size), with the size in pixels of what is uploaded (the
post's ``aspectRatio``). ``sniff`` reads a file's type and size from its header in pure Python
(JPEG SOF, PNG IHDR, GIF, WebP VP8/VP8L/VP8X), so a command can refuse what is no image without
loading Pillow.

The hub never opens a path a document names: a file travels as an upload (``publishers.media``),
and a URL is fetched only through ``ctx.fetch`` (``platforms.fetcher``: public https addresses,
every redirect checked, size and time capped).

Every failure is a ``ContentProblem`` with one sentence naming the image; ``permanent`` tells a
content problem (too large, not an image, a 404, a URL the hub will not fetch) from one worth
trying again (a timeout, a 5xx).
"""

from __future__ import annotations

import struct
from typing import Any
from urllib.parse import urlsplit

from platforms.errors import FetchRefused, PlatformError

from . import media
from .errors import ContentProblem
from .imaging import Picture, prepare
from .media import MAX_BYTES
from .validate import BSKY_IMAGE_BYTES, short

MIME = {"jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp"}


def source(ctx: Any, image: dict[str, Any], *, n: int, limit: int = MAX_BYTES) -> tuple[bytes, str]:
    """The bytes of image ``n`` of a post (``{"url"}`` or ``{"upload"}``), at most ``limit``, and
    the words that name it in a sentence ("image 1 (beach.jpg)"); ``ctx`` gives ``db`` and ``fetch``."""
    if isinstance(image.get("upload"), dict):
        upload = image["upload"]
        data = media.read(ctx.db, upload, n=n)
        source = str(upload.get("name") or "an upload")
    else:
        source = str(image.get("url", ""))
        data = _fetch(ctx.fetch, source, n, limit)
    what = f"image {n} ({short(source)})"
    if sniff(data)[0] is None:
        raise ContentProblem(f"{what} is not a JPEG, PNG, GIF or WebP image", permanent=True)
    return data, what


def load(ctx: Any, image: dict[str, Any], *, n: int, limit: int = BSKY_IMAGE_BYTES) -> Picture:
    """Image ``n`` of a post as it is uploaded: upright, without metadata, at most ``limit`` bytes
    (see ``publishers.imaging``); ``ctx`` is the tick's context."""
    data, what = source(ctx, image, n=n)
    return prepare(data, what=what, limit=limit)


def _fetch(fetcher: Any, url: str, n: int, limit: int) -> bytes:
    what = f"image {n} ({short(url)})"
    try:
        got = fetcher.get(url, what=what, max_bytes=limit, accept="image/*")
    except FetchRefused as exc:
        raise ContentProblem(exc.reason, permanent=True) from None
    except PlatformError as exc:  # the network, a timeout, a name that does not resolve: try again later
        raise ContentProblem(f"{exc.reason.removesuffix('.')}; it is tried again later" if "again later" not in exc.reason
                             else exc.reason, permanent=False) from None
    if got.status >= 400:
        permanent = got.status < 500 and got.status not in (408, 429)
        host = urlsplit(got.url).hostname or "the host"
        raise ContentProblem(f"{what} could not be fetched: {host} answered HTTP {got.status}", permanent=permanent)
    content: bytes = got.content
    return content


def sniff(data: bytes) -> tuple[str | None, int | None, int | None]:
    """(``"jpeg"``/``"png"``/``"gif"``/``"webp"`` or None, width, height) from an image's header."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return "png", width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return "gif", width, height
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ("webp", *_webp_size(data))
    if data.startswith(b"\xff\xd8"):
        return ("jpeg", *_jpeg_size(data))
    return None, None, None


def _webp_size(data: bytes) -> tuple[int | None, int | None]:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None, None


# Start-of-frame markers carry the size; C4 (Huffman tables), C8 (reserved) and CC (arithmetic
# coding conditioning) share the range but are not frames.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int | None, int | None]:
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None, None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2:i + 4])
        if marker in _SOF and i + 9 <= len(data):
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + length
    return None, None
