"""Images a person uploads (publishers/media.py): through `skyhub publish bsky --image FILE` and
`POST /v1/media` they are stored upright and without EXIF, GPS, XMP or comments, so the position
never reaches the hub's database; junk is one sentence with nothing written; `POST /v1/media`
takes a real image's bytes (binary, up to media.MAX_BYTES: a 6 MB photo) and refuses more."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from hub.app import build_rules
from ledger import SYSTEM, Ledger, open_store
from publishers import media
from publishers.errors import ContentProblem
from tests.publishers.photos import has_metadata, photo
from tests.publishers.test_api import hub  # noqa: F401 - the fixture: the hub's API in this process, as maya
from tests.publishers.test_queue import cli  # noqa: F401 - the fixture: the CLI as a subprocess on a local ledger


def stored(store, upload) -> bytes:
    return media.read(Ledger(store, "admin", SYSTEM), upload, n=1)


def chunks(store) -> list[str]:
    return [d["_id"] for d in store.query("media", "kind", "media-chunk", 100).docs]


def test_take_stores_the_image_upright_and_without_its_metadata(tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/hub.db", build_rules(), SYSTEM)
    try:
        upload, notes = media.take(Ledger(store, "user:maya", SYSTEM), photo(300, 200, orientation=6), name="home.jpg")
        data = stored(store, upload)
        assert has_metadata(data) == [] and Image.open(io.BytesIO(data)).size == (200, 300) and notes == ()
        assert upload["type"] == "image/jpeg" and upload["name"] == "home.jpg" and upload["size"] == len(data)
        with pytest.raises(ContentProblem, match=r"^image x\.png cannot be read as an image"):
            media.take(Ledger(store, "user:maya", SYSTEM), b"\x89PNG\r\n\x1a\n" + b"junk" * 20, name="x.png")
        assert len(chunks(store)) == 1
    finally:
        store.close()


def test_the_cli_strips_a_phone_photo_before_storing_it(cli, tmp_path):  # noqa: F811
    (tmp_path / "beach.jpg").write_bytes(photo(2800, 1900, orientation=6))  # ~6 MB, GPS, sideways
    out = cli("publish", "bsky", "--slug", "beach", "--account", "shop.test", "--image", "beach.jpg", "--alt", "The beach",
              "--caption", "At the beach", check=0)
    doc_id = json.loads(out.stdout)["id"]
    store = open_store(f"sqlite:///{tmp_path}/hub.db", build_rules(), SYSTEM)
    try:
        (image,) = store.get("requests", doc_id)["images"]
        data = stored(store, image["upload"])
        assert has_metadata(data) == [] and Image.open(io.BytesIO(data)).size == (1900, 2800)  # upright, full size
        assert not any(b"PhoneMaker" in c["data"].encode() for c in (store.get("media", i) for i in chunks(store)))
    finally:
        store.close()
    assert out.stderr == ""


def test_the_cli_refuses_junk_in_one_sentence_and_writes_nothing(cli, tmp_path):  # noqa: F811
    (tmp_path / "good.jpg").write_bytes(photo(100, 80))
    (tmp_path / "broken.jpg").write_bytes(photo(300, 200)[:3000])
    out = cli("publish", "bsky", "--slug", "s", "--account", "shop.test", "--image", "good.jpg", "--alt", "a",
              "--image", "broken.jpg", "--alt", "b", check=2)
    assert out.stderr == ("skyhub: usage: image broken.jpg cannot be read as an image (a damaged or unfinished file?): "
                          "give another JPEG, PNG, GIF or WebP file\n")
    store = open_store(f"sqlite:///{tmp_path}/hub.db", build_rules(), SYSTEM)
    try:
        assert chunks(store) == [] and store.query("requests", "kind", "publish-request", 10).docs == []
    finally:
        store.close()


def test_post_v1_media_takes_a_6_mb_photo_as_bytes_and_stores_it_without_gps(hub):  # noqa: F811
    src = photo(2800, 1900)
    assert len(src) > 5_500_000  # five times what the documents API takes in one request
    r = hub.post("/v1/media", content=src, headers={"Content-Type": "image/jpeg", "X-File-Name": "beach.jpg"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["warnings"] == [] and body["upload"]["name"] == "beach.jpg"
    data = stored(hub.app_state.store, body["upload"])
    assert has_metadata(data) == [] and Image.open(io.BytesIO(data)).size == (2800, 1900)
    queued = hub.post("/v1/publish", json={"platform": "bsky", "account": "shop.test", "slug": "beach", "caption": "Beach",
                                            "images": [{"upload": body["upload"], "alt": "The beach"}]})
    assert queued.status_code == 200 and queued.json()["queued"] is True


def test_post_v1_media_refuses_junk_and_too_much_in_one_sentence(hub):  # noqa: F811
    junk = hub.post("/v1/media", content=photo(300, 200)[:3000], headers={"Content-Type": "image/jpeg", "X-File-Name": "x.jpg"})
    assert junk.status_code == 400 and junk.json() == {
        "error": "invalid", "reason": "image x.jpg cannot be read as an image (a damaged or unfinished file?): give another "
                                      "JPEG, PNG, GIF or WebP file"}
    text = hub.post("/v1/media", content=b"hello", headers={"Content-Type": "image/png"})
    assert text.status_code == 400 and text.json()["reason"] == "the body must be a JPEG, PNG, GIF or WebP image"
    big = hub.post("/v1/media", content=b"\xff\xd8" + b"\x00" * media.MAX_BYTES, headers={"Content-Type": "image/jpeg"})
    assert big.status_code == 413 and big.json()["reason"] == (
        f"the request body is {media.MAX_BYTES + 2} bytes; the limit is {media.MAX_BYTES:,} bytes")
    assert chunks(hub.app_state.store) == []
    # the documents API keeps its limit and its rules: JSON, in UTF-8
    assert hub.post("/v1/db/notes", content=b"\xff\xd8" + b"x" * 10).status_code == 422


def test_post_v1_media_says_an_animated_gif_becomes_its_first_frame(hub):  # noqa: F811
    frames = [Image.new("RGB", (60, 40), c) for c in ((255, 0, 0), (0, 0, 255))]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=100)
    r = hub.post("/v1/media", content=out.getvalue(), headers={"Content-Type": "image/gif", "X-File-Name": "party.gif"})
    assert r.status_code == 200, r.text
    assert r.json()["warnings"] == [
        "image party.gif is animated: Bluesky shows images as stills, so its first frame is published"]
    assert r.json()["upload"]["type"] == "image/png"
