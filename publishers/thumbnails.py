"""Thumbnails of posts' images for the console, made by the hub, never loaded from a third
party by the manager's browser: the console's pages show ``/console/publish/thumbnail?...``
(``publishers.pages``), and the hub gets the image the way the publish tick does
(``publishers.images.source``: a URL only through the guarded fetcher, an upload from its
chunks in ``media``, at most ``media.MAX_BYTES``), then makes a small JPEG (a PNG when it is
transparent) upright and without metadata (``publishers.imaging.thumbnail``).

**The cache** is in the hub process's memory (``Cache``): at most ``publish.thumbnail_cache_bytes``
of thumbnails (16 MiB by default: about 3,000 of the queue's 96-pixel ones), the least recently
shown going first, and at most ``MAX_ENTRIES`` entries. An image that cannot be fetched or read
is remembered as such for ``RETRY_MS`` (a queue of 50 broken links does not make 50 fetches on
every view), then tried again. The key is the image (an upload's sha256, or the URL) with the
size asked for, so two posts with one image share a thumbnail. Nothing is written to the ledger.
At most ``BUILDS`` thumbnails are made at once per process (decoding a big photo takes memory);
a request that waits longer than ``WAIT_S`` for its turn gets the fallback, not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote
from xml.sax.saxutils import escape

from .errors import ContentProblem

SIZES = (96, 192, 384)  # the square sides a thumbnail may be asked for, in pixels
MAX_ENTRIES = 4096
RETRY_MS = 60_000
BUILDS = 2
WAIT_S = 15.0  # the longest a request waits for its turn to make one (then: the fallback, not kept)


@dataclass(frozen=True)
class Thumb:
    """A thumbnail (``ok``), or the fallback image for one that cannot be made, with the sentence why."""

    data: bytes = field(repr=False)
    mime: str
    ok: bool = True
    reason: str = ""
    made_at: int = 0


def fallback(px: int, reason: str, now_ms: int) -> Thumb:
    """A plain grey square with a crossed frame: "no preview", said without words (the page's ``alt`` says what it is)."""
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{px}" height="{px}" viewBox="0 0 48 48">'
           f'<title>{escape(reason[:300])}</title><rect width="48" height="48" fill="#e6e8eb"/>'
           '<rect x="12" y="14" width="24" height="20" rx="2" fill="none" stroke="#8a9099" stroke-width="2"/>'
           '<path d="M12 34 L36 14" stroke="#8a9099" stroke-width="2"/></svg>')
    return Thumb(svg.encode(), "image/svg+xml", ok=False, reason=reason, made_at=now_ms)


class Cache:
    """Thumbnails by key, least recently used first out, within ``max_bytes`` and ``max_entries``;
    a failure is forgotten ``retry_ms`` after it was made. Safe to share between threads."""

    def __init__(self, max_bytes: int, *, max_entries: int = MAX_ENTRIES, retry_ms: int = RETRY_MS) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.retry_ms = retry_ms
        self.bytes = 0
        self._items: OrderedDict[Any, Thumb] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Any, now_ms: int) -> Thumb | None:
        """The thumbnail kept under ``key``, or None (never made, pushed out, or a failure to try again)."""
        with self._lock:
            thumb = self._items.get(key)
            if thumb is None:
                return None
            if not thumb.ok and now_ms - thumb.made_at >= self.retry_ms:
                self._drop(key)
                return None
            self._items.move_to_end(key)
            return thumb

    def put(self, key: Any, thumb: Thumb) -> None:
        """Keep ``thumb`` (one larger than the whole cache is not kept)."""
        with self._lock:
            if key in self._items:
                self._drop(key)
            if len(thumb.data) > self.max_bytes:
                return
            self._items[key] = thumb
            self.bytes += len(thumb.data)
            while self.bytes > self.max_bytes or len(self._items) > self.max_entries:
                self._drop(next(iter(self._items)))

    def _drop(self, key: Any) -> None:
        self.bytes -= len(self._items.pop(key).data)


class Thumbnails:
    """Makes and keeps the thumbnails of one hub process (see the module docstring)."""

    def __init__(self, max_bytes: int, *, retry_ms: int = RETRY_MS, builds: int = BUILDS) -> None:
        self.cache = Cache(max_bytes, retry_ms=retry_ms)
        self._builds = threading.BoundedSemaphore(builds)

    def of(self, ctx: Any, doc: dict[str, Any], n: int, px: int, *, crop: bool = True) -> Thumb | None:
        """The thumbnail of image ``n`` (from 1) of the post ``doc``, within ``px`` pixels (``crop``:
        exactly that square); None when the post has no image ``n``. ``ctx`` gives ``db``, ``fetch``
        and ``now()``; the image is fetched or read only when the cache does not have it."""
        from .images import source  # the fetcher's and the images' code loads with the first thumbnail
        from .imaging import thumbnail

        found = doc.get("images")
        image = found[n - 1] if isinstance(found, list) and 0 < n <= len(found) else None
        if not isinstance(image, dict):
            return None
        upload = image.get("upload")
        origin = ("upload", str(upload.get("sha256"))) if isinstance(upload, dict) else ("url", str(image.get("url", "")))
        key = (*origin, px, crop)
        hit = self.cache.get(key, ctx.now())
        if hit is not None:
            return hit
        if not self._builds.acquire(timeout=WAIT_S):
            return fallback(px, "the hub is busy making other thumbnails: this one is made when it is asked for again",
                            ctx.now())
        try:
            data, what = source(ctx, image, n=n)
            small, mime = thumbnail(data, what=what, px=px, crop=crop)
            thumb = Thumb(small, mime, made_at=ctx.now())
        except ContentProblem as exc:
            thumb = fallback(px, exc.reason, ctx.now())
        finally:
            self._builds.release()
        self.cache.put(key, thumb)
        return thumb


__all__ = ["SIZES", "Cache", "Thumb", "Thumbnails", "fallback"]


def thumbnail_url(doc_id: str, n: int = 1, px: int = SIZES[0], fit: str = "cover") -> str:
    """The console's address of the thumbnail of image ``n`` of post ``doc_id`` (``pages.publish_thumbnail``
    serves it)."""
    return f"/console/publish/thumbnail?id={quote(doc_id, safe='')}&n={n}&px={px}" + ("" if fit == "cover" else f"&fit={fit}")
