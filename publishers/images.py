"""Images for a Bluesky post: the bytes (from a URL through ``ctx.http``, or a file on this
machine), their type and their size in pixels, read from the file's header in pure Python
(JPEG SOF, PNG IHDR, GIF, WebP VP8/VP8L/VP8X), so that ``aspectRatio`` needs no imaging library.

Every failure is a ``ContentProblem`` with one sentence naming the image; ``permanent`` tells a
content problem (too large, not an image, a 404) from one worth trying again (a timeout, a 5xx).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from .errors import ContentProblem
from .validate import BSKY_IMAGE_BYTES, is_local

MIME = {"jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp"}


@dataclass(frozen=True)
class ImageData:
    """An image's bytes, MIME type and size in pixels (``None`` when the header does not say)."""

    data: bytes = field(repr=False)
    mime: str
    width: int | None
    height: int | None


def load(http: httpx.Client, source: str, *, n: int, limit: int = BSKY_IMAGE_BYTES, timeout: float | None = None) -> ImageData:
    """Image ``n`` of a post from ``source`` (a URL or a path), at most ``limit`` bytes."""
    data = _read_file(source, n, limit) if is_local(source) else _fetch(http, source, n, limit, timeout)
    kind, width, height = sniff(data)
    if kind is None:
        raise ContentProblem(f"image {n} ({_short(source)}) is not a JPEG, PNG, GIF or WebP image", permanent=True)
    return ImageData(data, MIME[kind], width, height)


def _short(source: str) -> str:
    return source if len(source) <= 80 else source[:77] + "..."


def _read_file(path: str, n: int, limit: int) -> bytes:
    file = Path(path).expanduser()
    try:
        size = file.stat().st_size
        if size > limit:
            raise ContentProblem(f"image {n} ({path}) is {size:,} bytes; a Bluesky image is at most {limit:,} bytes", permanent=True)
        return file.read_bytes()
    except FileNotFoundError:
        raise ContentProblem(f"image {n} ({path}) is not a file on the machine that publishes (the hub)", permanent=True) from None
    except OSError as exc:
        raise ContentProblem(f"image {n} ({path}) cannot be read: {exc.strerror}", permanent=True) from None


def _fetch(http: httpx.Client, url: str, n: int, limit: int, timeout: float | None) -> bytes:
    host = urlsplit(url).hostname or url
    try:
        with http.stream("GET", url, follow_redirects=True, timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT) as response:
            if response.status_code >= 400:
                permanent = response.status_code < 500 and response.status_code not in (408, 429)
                raise ContentProblem(f"image {n} ({_short(url)}) could not be fetched: {host} answered HTTP {response.status_code}",
                                   permanent=permanent)
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > limit:
                raise ContentProblem(f"image {n} ({_short(url)}) is {int(declared):,} bytes; a Bluesky image is at most {limit:,} bytes",
                                   permanent=True)
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:  # a server that does not say, or says wrong: stop reading at the limit
                    raise ContentProblem(f"image {n} ({_short(url)}) is over {limit:,} bytes, the most a Bluesky image may be",
                                       permanent=True)
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.TransportError as exc:
        raise ContentProblem(f"image {n} ({_short(url)}) could not be fetched: {host} did not answer ({type(exc).__name__}); "
                           "it is tried again later", permanent=False) from exc


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
