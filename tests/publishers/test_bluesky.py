"""The publish tick on Bluesky against a fake PDS: images from URLs and files with alt text and
aspect ratio, facets, replies, one record whatever crashes, and every image problem in words."""

from __future__ import annotations

import io
import struct
import zlib

import httpx
import pytest

from publishers import media
from publishers.images import sniff
from skyhub_testkit.fakepds import DID, HANDLE, POST, xrpc_error
from tests.publishers.conftest import PDS


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def jpeg(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 120, 40)).save(out, "JPEG")
    return out.getvalue()


def pixels(data: bytes) -> tuple[tuple[int, int], bytes]:
    """An image's size and RGBA pixels: what a person sees, whatever the encoding."""
    from PIL import Image

    im = Image.open(io.BytesIO(data))
    return im.size, im.convert("RGBA").tobytes()


@pytest.fixture
def bsky(env):
    env.credential("bluesky", HANDLE, {"appPassword": "abcd-efgh-ijkl-mnop", "session": {**env.pds.session(), "pds": PDS}})
    return env


def test_a_post_with_two_images_facets_and_alt_text(bsky):
    upload = media.store(bsky.maya, png(40, 30), name="beach.png", mime="image/png")  # a file from the person's machine, as bytes
    bsky.files["https://cdn.example.org/cat.jpg"] = httpx.Response(200, content=jpeg(1200, 800))
    text = "New in store, thanks @ana.test! https://shop.example.org/new #launch"
    doc_id = bsky.queue("bsky", "launch", caption=text, account=HANDLE,
                        images=[{"url": "https://cdn.example.org/cat.jpg", "alt": "A cat"}, {"upload": upload, "alt": "A beach"}])
    assert bsky.tick() == {"done": 1}
    d = bsky.doc(doc_id)
    rkey = d["rkey"]
    assert d["recordUri"] == f"at://{DID}/{POST}/{rkey}" and d["permalink"] == f"https://bsky.app/profile/{HANDLE}/post/{rkey}"
    record = bsky.pds.records[(POST, rkey)]["value"]
    assert record["text"] == text
    images = record["embed"]["images"]
    assert [(i["alt"], i["aspectRatio"]["width"], i["aspectRatio"]["height"]) for i in images] == [
        ("A cat", 1200, 800), ("A beach", 40, 30)]
    assert [b[0] for b in bsky.pds.blobs] == ["image/jpeg", "image/png"]
    kinds = {f["features"][0]["$type"].rsplit("#", 1)[1]: f for f in record["facets"]}
    assert kinds["mention"]["features"][0]["did"] == "did:plc:ana"
    assert kinds["link"]["features"][0]["uri"] == "https://shop.example.org/new" and kinds["tag"]["features"][0]["tag"] == "launch"
    assert bsky.pds.calls.count("com.atproto.repo.createRecord") == 1
    assert bsky.statuses(doc_id) == ["pending", "pending", "done"]
    assert bsky.tick() == {}


def test_a_crash_after_create_record_leaves_one_record(bsky):
    class Killed(BaseException):
        pass

    doc_id = bsky.queue("bsky", "crash", caption="Once", account=HANDLE)

    def created_then_die(request, server):
        server.com_atproto_repo_createRecord(request)
        raise Killed

    bsky.pds.fail["com.atproto.repo.createRecord"] = [created_then_die]
    with pytest.raises(Killed):
        bsky.tick()
    d = bsky.doc(doc_id)
    assert d["status"] == "pending" and d["intent"]["rkey"] == d["rkey"]
    assert bsky.tick() == {"busy": 1}  # the process that wrote the intent may still be posting
    bsky.clock.advance(60_000)
    assert bsky.tick() == {"done": 1}
    assert len(bsky.pds.records) == 1 and bsky.pds.calls.count("com.atproto.repo.createRecord") == 1
    assert bsky.doc(doc_id)["recordUri"].endswith("/" + d["rkey"])


def test_a_reply_keeps_the_threads_root(bsky):
    root = {"uri": f"at://{DID}/{POST}/3kroot", "cid": "bafyroot"}
    bsky.pds.records[(POST, "3kroot")] = {**root, "value": {"$type": POST, "text": "root", "createdAt": "2026-11-30T10:00:00Z"}}
    bsky.pds.records[(POST, "3kmid")] = {"uri": f"at://{DID}/{POST}/3kmid", "cid": "bafymid", "value": {
        "$type": POST, "text": "mid", "createdAt": "2026-11-30T10:01:00Z", "reply": {"root": root, "parent": root}}}
    doc_id = bsky.queue("bsky", "reply", caption="Thanks!", account=HANDLE, reply_to=f"at://{DID}/{POST}/3kmid")
    assert bsky.tick() == {"done": 1}
    record = bsky.pds.records[(POST, bsky.doc(doc_id)["rkey"])]["value"]
    reply = {k: {f: v[f] for f in ("uri", "cid")} for k, v in record["reply"].items() if k in ("root", "parent")}
    assert reply == {"root": root, "parent": {"uri": f"at://{DID}/{POST}/3kmid", "cid": "bafymid"}}


@pytest.mark.parametrize("answer,status,words", [
    (httpx.Response(404), "error", "could not be fetched: cdn.example.org answered HTTP 404"),
    (lambda: httpx.Response(200, content=iter([b"x" * 6_000_000, b"x" * 4_485_761])), "error", "is over 10,485,760 bytes"),
    (httpx.Response(200, content=b"x" * 10, headers={"content-length": "20000000"}), "error", "is 20,000,000 bytes"),
    (httpx.Response(200, content=b"<html>not an image</html>"), "error", "is not a JPEG, PNG, GIF or WebP image"),
    (httpx.Response(503), "pending", "answered HTTP 503"),
    (httpx.ReadTimeout("slow"), "pending", "did not answer in time (ReadTimeout); this is usually temporary: it is tried again later"),
], ids=["404", "too-large", "declared-too-large", "not-an-image", "503", "timeout"])
def test_image_problems_are_one_sentence(bsky, answer, status, words):
    def serve(request):
        if isinstance(answer, Exception):
            raise answer
        return answer() if callable(answer) else answer

    bsky.files["https://cdn.example.org/x.png"] = serve
    doc_id = bsky.queue("bsky", "img", caption="Look", account=HANDLE, images=[{"url": "https://cdn.example.org/x.png", "alt": "x"}])
    bsky.tick()
    d = bsky.doc(doc_id)
    assert d["status"] == status and words in d["lastError"] and d["lastError"].startswith("image 1 (https://cdn.example.org/x.png)")
    assert bsky.pds.calls.count("com.atproto.repo.createRecord") == 0 and d["attempts"] == 0


def test_an_expired_session_holds_and_a_rate_limit_blocks_the_account(bsky):
    first = bsky.queue("bsky", "one", caption="One", account=HANDLE)
    bsky.pds.fail["com.atproto.repo.getRecord"] = [xrpc_error(429, "RateLimitExceeded", "slow down", **{"ratelimit-reset": "1800000600"})]
    second = bsky.queue("bsky", "two", caption="Two", account=HANDLE)
    assert bsky.tick() == {"rate-limited": 1, "blocked": 1}
    assert bsky.store.get("publish", f"bsky:{HANDLE}")["blockedUntil"] == 1_800_000_600_000
    bsky.clock.advance(600_001)
    bsky.pds.access = "revoked"
    assert bsky.tick() == {"held": 2}
    assert "ExpiredToken" in bsky.doc(first)["held"]["reason"] and bsky.doc(second)["held"]["credential"] == f"bluesky:{HANDLE}"
    assert bsky.store.get("vault", f"bluesky:{HANDLE}")["needsReauth"] is True
    assert bsky.doc(first)["attempts"] == 0 and not bsky.pds.records


def test_image_headers_give_the_size():
    assert sniff(png(640, 480)) == ("png", 640, 480)
    assert sniff(jpeg(1080, 1350)) == ("jpeg", 1080, 1350)
    assert sniff(b"GIF89a" + struct.pack("<HH", 12, 34) + b"\x00" * 10) == ("gif", 12, 34)
    vp8x = b"RIFF" + b"\x00" * 4 + b"WEBPVP8X" + b"\x00" * 8 + (99).to_bytes(3, "little") + (49).to_bytes(3, "little")
    assert sniff(vp8x) == ("webp", 100, 50)
    assert sniff(b"plain text") == (None, None, None)
