"""The publish tick's images on Bluesky (publishers/images.py, against a fake PDS): a photo over
the blob limit is uploaded under it, upright and without EXIF, with the aspect ratio of what
was uploaded and a note saying so; chunks written past ``skyhub publish`` are stripped at the
upload too; junk and bombs end the post in one sentence with nothing uploaded."""

from __future__ import annotations

import io
import zlib

import httpx
import pytest
from PIL import Image

from publishers import media
from skyhub_testkit.fakepds import HANDLE, POST
from tests.publishers.photos import has_metadata, photo
from tests.publishers.test_bluesky import bsky  # noqa: F401 - the fixture: a Bluesky account with a session

URL = "https://cdn.example.org/beach.jpg"


def record(env, doc_id):
    return env.pds.records[(POST, env.doc(doc_id)["rkey"])]["value"]


def test_a_6_mb_gps_photo_from_a_url_is_uploaded_under_the_limit_upright_and_without_exif(bsky):  # noqa: F811
    src = photo(2800, 1900, orientation=6)  # a phone held upright: stored sideways, with the tag that says so
    assert len(src) > 5_500_000 and "a GPS IFD" in has_metadata(src)
    bsky.files[URL] = httpx.Response(200, content=src, headers={"content-type": "image/jpeg"})
    doc_id = bsky.queue("bsky", "beach", caption="At the beach", account=HANDLE, images=[{"url": URL, "alt": "The beach"}])
    assert bsky.tick() == {"done": 1}
    ((mime, blob),) = bsky.pds.blobs
    assert mime == "image/jpeg" and len(blob) <= 1_000_000 and has_metadata(blob) == []
    im = Image.open(io.BytesIO(blob))
    width, height = im.size
    assert height > width and abs(width / height - 1900 / 2800) < 1 / height  # upright (portrait), the ratio kept
    (shown,) = record(bsky, doc_id)["embed"]["images"]
    assert (shown["aspectRatio"]["width"], shown["aspectRatio"]["height"]) == (width, height) and shown["alt"] == "The beach"
    assert bsky.doc(doc_id)["imageNotes"] == [
        f"image 1 ({URL}) was scaled from 1,900 x 2,800 to {width:,} x {height:,} pixels to fit in 1,000,000 bytes"]


def test_chunks_written_past_the_cli_are_stripped_at_the_upload(bsky):  # noqa: F811
    raw = photo(400, 300)  # stored as is, as a client writing chunks itself (skyhub db put) could
    upload = media.store(bsky.maya, raw, name="home.jpg", mime="image/jpeg")
    assert "a GPS IFD" in has_metadata(media.read(bsky.maya, upload, n=1))
    doc_id = bsky.queue("bsky", "home", caption="Home", account=HANDLE, images=[{"upload": upload, "alt": "Home"}])
    assert bsky.tick() == {"done": 1}
    ((_, blob),) = bsky.pds.blobs
    assert has_metadata(blob) == [] and Image.open(io.BytesIO(blob)).size == (400, 300)
    assert "imageNotes" not in bsky.doc(doc_id)  # nothing to say: the same size, the same quality


def _bomb() -> bytes:
    import struct

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    side = 7200
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * ((side + 1) * side), 9)) + chunk(b"IEND", b""))


BAD = {
    "bomb": (_bomb(), "has more than 50,000,000 pixels (50 megapixels), the most the hub reads: give a smaller image"),
    "truncated": (photo(300, 200)[:3000], "cannot be read as an image (a damaged or unfinished file?)"),
    "junk-after-a-png-signature": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00\x01" * 40, "cannot be read as an image"),
}


@pytest.mark.parametrize("data,words", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("how", ["url", "upload"])
def test_a_bomb_or_junk_is_one_sentence_and_nothing_is_uploaded(bsky, data, words, how):  # noqa: F811
    if how == "url":
        bsky.files[URL] = httpx.Response(200, content=data)
        image = {"url": URL, "alt": "x"}
    else:
        image = {"upload": media.store(bsky.maya, data, name="x.png", mime="image/png"), "alt": "x"}
    doc_id = bsky.queue("bsky", "bad", caption="Look", account=HANDLE, images=[image])
    bsky.tick()
    d = bsky.doc(doc_id)
    name = URL if how == "url" else "x.png"
    assert d["status"] == "error" and d["lastError"].startswith(f"image 1 ({name}) ") and words in d["lastError"]
    assert "\n" not in d["lastError"]
    assert bsky.pds.blobs == [] and bsky.pds.calls.count("com.atproto.repo.createRecord") == 0
