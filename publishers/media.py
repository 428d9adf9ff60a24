"""Images uploaded with a post: the bytes travel, never a path.

A Bluesky image given as a file is read on the person's own machine when the post is queued
(``skyhub publish bsky --image ./box.png``, or sent to ``POST /v1/media``), at most
``MAX_BYTES``; ``take`` turns it upright and drops its EXIF (GPS position included) and every
other metadata block *before* it is stored (``publishers.imaging``), so the person's position
never reaches the hub's database, its history or its backups; and stores it in database ``media``,
as content-addressed chunks: document ``c-<sha256 of the chunk>`` holds ``data`` (base64, at
most 512 KiB of bytes, so a chunk stays under the 1 MiB document limit). The post's image then
says what to assemble and how to check it::

    {"upload": {"sha256": "<of the whole file>", "size": 48213, "type": "image/png",
                "chunks": ["<sha256 of chunk 1>", ...], "name": "box.png"}, "alt": "The box"}

The chunk machine's guard checks, in the write's transaction, that a chunk's id is the hash of
its bytes, so no one can place other bytes under an id; the publish tick reassembles the chunks
and checks the whole hash and size before uploading, and makes the image fit for Bluesky (its
blob limit) from those bytes. Stripping happens again there: chunks written by a client of its
own (``skyhub db put``) may carry anything, and the upload is the last door. Writing a chunk is
idempotent (the same bytes are the same document), and the hub never opens a file a document
names.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import TYPE_CHECKING, Any

from ledger import Conflict, Guard, GuardContext, Ledger, Machine, NotFound

from .admission import creator_problem
from .errors import ContentProblem

if TYPE_CHECKING:
    from .imaging import Picture

DB = "media"
KIND = "media-chunk"
CHUNK_BYTES = 512 * 1024
MAX_BYTES = 20_000_000  # an image the hub takes in (a phone's 48 MP JPEG is ~15 MB); Bluesky's copy is scaled to its limit


def chunk_id(digest: str) -> str:
    """The document id of the chunk whose bytes hash to ``digest``."""
    return f"c-{digest}"


def _chunk(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    refused = creator_problem(ctx, "upload an image")
    if refused:
        return refused
    extra = sorted(set(new) - {"kind", "status", "data", "size"})
    if extra:
        return f"an image chunk holds only kind, status, data and size, not {extra[0]}"
    data = new.get("data")
    if not isinstance(data, str) or len(data) > 4 * ((CHUNK_BYTES + 2) // 3):
        return f"an image chunk's data is base64 of at most {CHUNK_BYTES:,} bytes"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return "an image chunk's data is not base64"
    if new.get("size") != len(raw):
        return f"an image chunk's size must be the length of its bytes ({len(raw):,})"
    if ctx.doc_id != chunk_id(hashlib.sha256(raw).hexdigest()):
        return "an image chunk's id is c-<the sha256 of its bytes>"
    return None


valid_chunk = Guard("chunk", _chunk)

# A chunk is written once and never changes: one state, no way out (an admin may delete it).
CHUNKS = Machine(DB, kind=KIND, start={"stored": valid_chunk}, edges=[])


def store(db: Ledger, data: bytes, *, name: str, mime: str) -> dict[str, Any]:
    """Write ``data`` as chunks (those already stored are left as they are) and return the
    ``upload`` descriptor a post's image carries."""
    chunks: list[str] = []
    for start in range(0, max(1, len(data)), CHUNK_BYTES):
        piece = data[start:start + CHUNK_BYTES]
        digest = hashlib.sha256(piece).hexdigest()
        chunks.append(digest)
        body = {"kind": KIND, "status": "stored", "size": len(piece), "data": base64.b64encode(piece).decode("ascii")}
        try:
            db.put(DB, body, chunk_id(digest), create_only=True)
        except Conflict:
            pass  # the same bytes are already there: a chunk's id is its hash
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "type": mime, "chunks": chunks,
            "name": name[-200:]}


def clean(data: bytes, *, name: str) -> Picture:
    """An image a person uploads, upright and without its metadata, ready to store (its ``notes``
    say what was done that they would want to know). ``ContentProblem`` (one sentence) for bytes
    that are no image, too many pixels or too many bytes."""
    from .imaging import prepare  # Pillow loads with the first image

    what = f"image {name or '(uploaded)'}"
    if len(data) > MAX_BYTES:
        raise ContentProblem(f"{what} is {len(data):,} bytes; the most the hub takes is {MAX_BYTES:,}", permanent=True)
    picture = prepare(data, what=what)
    if len(picture.data) > MAX_BYTES:
        raise ContentProblem(f"{what} is over {MAX_BYTES:,} bytes once its metadata is removed: give a smaller image",
                             permanent=True)
    return picture


def take(db: Ledger, data: bytes, *, name: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``clean`` then ``store``: (the ``upload`` descriptor, the notes); nothing is written for bytes ``clean`` refuses."""
    picture = clean(data, name=name)
    return store(db, picture.data, name=name, mime=picture.mime), picture.notes


def read(db: Ledger, upload: dict[str, Any], *, n: int) -> bytes:
    """The bytes of image ``n`` from its ``upload`` descriptor, checked against its size and hash."""
    parts: list[bytes] = []
    for digest in upload.get("chunks") or []:
        try:
            doc = db.get(DB, chunk_id(str(digest)))
        except NotFound:
            raise ContentProblem(f"image {n} ({upload.get('name') or 'an upload'}) is missing part of its bytes in the hub's "
                                 "database: queue the post again", permanent=True) from None
        try:
            parts.append(base64.b64decode(str(doc.get("data", "")), validate=True))
        except (binascii.Error, ValueError):
            parts.append(b"")
    data = b"".join(parts)
    if len(data) != upload.get("size") or hashlib.sha256(data).hexdigest() != upload.get("sha256"):
        raise ContentProblem(f"image {n} ({upload.get('name') or 'an upload'})'s stored bytes do not match their hash: "
                             "queue the post again", permanent=True)
    return data
