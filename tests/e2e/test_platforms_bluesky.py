"""platforms.bluesky against a REAL local Bluesky network (@atproto/dev-env): a session from an
app password, a refreshed one, an uploaded image, and a post with facets under a fixed key,
read back through the AppView."""

from __future__ import annotations

import struct
import time
import zlib

import httpx
import pytest

from platforms import AuthFailure
from platforms.bluesky import Bluesky, Image, new_rkey
from platforms.richtext import facets


def png(width: int, height: int) -> bytes:
    """A real (red) PNG, made with the standard library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def test_a_session_and_a_post_with_an_image_and_facets(bsky_network):
    net = bsky_network
    poster = net.create_account(net.unique_handle("poster"), "poster-password-1")
    friend = net.create_account(net.unique_handle("friend"))
    now_ms = int(time.time() * 1000)
    with httpx.Client(timeout=30.0) as http:
        anon = Bluesky(http, net.pds)
        with pytest.raises(AuthFailure):
            anon.create_session(poster.handle, "not-the-password")
        first = anon.create_session(poster.handle, poster.password)
        assert first.did == poster.did and first.expires_at is not None and first.expires_at > now_ms
        session = anon.refresh_session(first.refresh_jwt)
        assert session.did == poster.did and session.refresh_jwt != first.refresh_jwt

        bsky = Bluesky(http, net.pds, session.as_dict())
        blob = bsky.upload_blob(png(3, 2), "image/png")
        assert blob["mimeType"] == "image/png"
        text = f"Été 🌞 avec @{friend.handle} #skyhub https://example.com/été"
        found = facets(text, bsky.resolve_handle)
        rkey = new_rkey(now_ms)
        ref = bsky.post(rkey, text, facets=found, images=[Image(blob, "three by two red pixels", 3, 2)], langs=["fr"])
        assert ref["uri"] == f"at://{poster.did}/app.bsky.feed.post/{rkey}"
        assert bsky.post(rkey, "a retry with other text") == ref  # the fixed key: posted once
        assert not http.is_closed

    net.process_all()
    (post,) = net.query("app.bsky.feed.getPosts", {"uris": [ref["uri"]]})["posts"]
    record = post["record"]
    assert record["text"] == text and record["langs"] == ["fr"]
    raw = text.encode()
    marked = {f["features"][0]["$type"].rsplit("#", 1)[1]: (raw[f["index"]["byteStart"]:f["index"]["byteEnd"]].decode(), f["features"][0])
              for f in record["facets"]}
    assert marked["mention"] == (f"@{friend.handle}", {"$type": "app.bsky.richtext.facet#mention", "did": friend.did})
    assert marked["tag"][0] == "#skyhub" and marked["tag"][1]["tag"] == "skyhub"
    assert marked["link"][0] == "https://example.com/été"
    (image,) = record["embed"]["images"]
    assert image["alt"] == "three by two red pixels" and (image["aspectRatio"]["width"], image["aspectRatio"]["height"]) == (3, 2)
    assert post["embed"]["images"][0]["alt"] == "three by two red pixels"  # the AppView's view of it
    feed = net.query("app.bsky.feed.getAuthorFeed", {"actor": poster.did})["feed"]
    assert [item["post"]["uri"] for item in feed] == [ref["uri"]]
