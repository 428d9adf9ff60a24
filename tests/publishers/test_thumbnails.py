"""The console's thumbnails of posts' images (publishers/pages.py, publishers/thumbnails.py) on
the hub's API and console in this process, with real sockets: an image host on 127.0.0.2 (the
one network the operator allows: "the internet" here) and a canary on 127.0.0.1 that must never
be reached. The hub fetches through its guarded fetcher and keeps the thumbnail; the queue's
rows show it with the image's alt text; the browser never gets a third party's URL; every
request needs a signed-in person."""

from __future__ import annotations

import io
from urllib.parse import quote

import httpx
import pytest
from PIL import Image

from hub.app import build_app
from hub.auth import add_user
from hub.settings import load_settings
from hub.webapp import create_api
from ledger import SYSTEM, Ledger
from publishers import media
from publishers.admission import Admission
from publishers.queue import new_request, queue
from skyhub_testkit.hub import serving
from skyhub_testkit.servers import LocalServer, redirect
from tests.console.conftest import Console
from tests.publishers.photos import has_metadata, photo, png_with

PHOTO = photo(1200, 800)


class World:
    def __init__(self, app, url, images, canary):
        self.app, self.url, self.images, self.canary = app, url, images, canary
        self.console = Console(url)
        assert self.console.sign_in(add_user(app.store, "maya", clock=app.clock)).status_code == 303
        self.maya = Ledger(app.store, "user:maya", app.clock)

    def post(self, slug, images, platform="bsky"):
        body = new_request(platform, account="shop.test" if platform == "bsky" else "17841400000000000", slug=slug,
                           caption="Look", images=images, now_ms=self.app.clock.now_ms())
        return queue(self.maya, body, admission=Admission.from_settings(self.app.settings))[0]["_id"]

    def raw(self, slug, url):
        """A post written by an admin past the machine's rules (a legacy document, say)."""
        body = {"kind": "publish-request", "status": "pending", "platform": "bsky", "account": "shop.test", "slug": slug,
                "attempts": 0, "caption": "x", "images": [{"url": url, "alt": "x"}]}
        return self.app.store.put("requests", body, f"bsky:shop.test:{slug}", actor="admin")["_id"]

    def thumb(self, doc_id, **params):
        query = "&".join(f"{k}={v}" for k, v in {"id": quote(doc_id, safe=""), **params}.items())
        return self.console.http.get(f"/console/publish/thumbnail?{query}")


def make_world(tmp_path, monkeypatch, **env):
    canary = LocalServer("127.0.0.1", default=PHOTO, default_type="image/jpeg")
    images = LocalServer("127.0.0.2", routes={
        "/beach.jpg": (200, {"Content-Type": "image/jpeg"}, PHOTO),
        "/logo.png": (200, {"Content-Type": "image/png"}, png_with(300, 200, alpha=True)),
        "/gone.jpg": (404, {"Content-Type": "text/plain"}, b"not here"),
        "/to-canary.jpg": redirect(f"{canary.url}/secret.jpg"),
    })
    for key, value in {"SKYHUB_FETCH__ALLOW_HTTP": "true", "SKYHUB_FETCH__ALLOW_NETWORKS": '["127.0.0.2/32"]', **env}.items():
        monkeypatch.setenv(key, value)
    app = build_app(load_settings(database_url=f"sqlite:///{tmp_path}/hub.db"), clock=SYSTEM)
    return app, images, canary


@pytest.fixture
def world(tmp_path, monkeypatch):
    app, images, canary = make_world(tmp_path, monkeypatch)
    with serving(create_api(app)) as url:
        w = World(app, url, images, canary)
        yield w
        w.console.close()
    app.stop()
    images.stop()
    canary.stop()


def test_a_url_images_thumbnail_is_fetched_by_the_hub_once_and_kept(world):
    doc_id = world.post("beach", [{"url": f"{world.images.url}/beach.jpg", "alt": "The beach at noon"}])
    first = world.thumb(doc_id, n=1, px=96)
    assert first.status_code == 200 and first.headers["content-type"] == "image/jpeg"
    assert first.headers["cache-control"] == "private, max-age=300"
    im = Image.open(io.BytesIO(first.content))
    assert im.size == (96, 96) and has_metadata(first.content) == [] and len(first.content) < 20_000
    assert world.thumb(doc_id, n=1, px=96).content == first.content
    assert world.images.hits == ["/beach.jpg"]  # the second came from the cache
    whole = world.thumb(doc_id, n=1, px=192, fit="contain")
    assert Image.open(io.BytesIO(whole.content)).size == (192, 128) and world.images.hits == ["/beach.jpg"] * 2
    clear = world.thumb(world.post("logo", [{"url": f"{world.images.url}/logo.png", "alt": "The logo"}]))
    assert clear.headers["content-type"] == "image/png"  # transparent: a PNG


def test_the_queue_shows_the_first_images_thumbnail_with_its_alt_text_and_no_third_party_url(world):
    doc_id = world.post("beach", [{"url": f"{world.images.url}/beach.jpg", "alt": "The beach at noon"},
                                  {"url": f"{world.images.url}/logo.png", "alt": "The logo"}])
    page = world.console.http.get("/console/publish")
    src = f"/console/publish/thumbnail?id={quote(doc_id, safe='')}&amp;n=1&amp;px=96"
    assert f'<img src="{src}" alt="The beach at noon" width="48" height="48" loading="lazy" class="thumb">' in page.text
    assert world.images.url not in page.text  # the browser is never sent to the image's host
    assert world.images.hits == []  # the page itself fetches nothing: the thumbnail does, when the browser asks
    assert world.console.http.get(src.replace("&amp;", "&")).status_code == 200


def test_a_private_address_is_refused_however_the_post_names_it(world):
    sneaky = world.post("sneaky", [{"url": f"{world.images.url}/to-canary.jpg", "alt": "x"}])  # public, then redirected
    legacy = world.raw("legacy", f"{world.canary.url}/secret.jpg")  # loopback, written past the rules
    named = world.raw("named", f"http://localhost:{world.canary.port}/secret.jpg")
    for doc_id in (sneaky, legacy, named):
        r = world.thumb(doc_id)
        assert r.status_code == 502 and r.headers["content-type"].startswith("image/svg+xml"), (doc_id, r.status_code)
        assert r.headers["x-thumbnail-problem"].endswith("is not fetched: its address is not a public one")
        assert r.headers["cache-control"] == "private, max-age=60"
        assert str(world.canary.port) not in r.headers["x-thumbnail-problem"].replace(f"{world.canary.port}/secret", "")
    assert world.canary.hits == []
    assert world.images.hits == ["/to-canary.jpg"]


def test_an_image_that_cannot_be_fetched_has_a_clear_fallback_tried_again_later(world):
    doc_id = world.post("gone", [{"url": f"{world.images.url}/gone.jpg", "alt": "Gone"}])
    r = world.thumb(doc_id)
    assert r.status_code == 502 and b"<svg" in r.content and b"<rect" in r.content
    assert r.headers["x-thumbnail-problem"] == f"image 1 ({world.images.url}/gone.jpg) could not be fetched: 127.0.0.2 answered HTTP 404"
    world.thumb(doc_id)
    assert world.images.hits == ["/gone.jpg"]  # remembered for a minute, not fetched on every view
    missing = world.thumb("bsky:shop.test:nope")
    assert missing.status_code == 404 and b"<svg" in missing.content
    assert world.thumb(doc_id, n=2).status_code == 404  # the post has one image
    for bad in ({"n": "0"}, {"n": "x"}, {"px": "4000"}, {"fit": "stretch"}):
        answer = world.thumb(doc_id, **bad)
        assert answer.status_code == 400 and answer.text.startswith("a thumbnail is ?id=POST&n=1 to 50&px=96|192|384")


def test_an_uploaded_images_thumbnail_comes_from_its_chunks(world):
    upload, _ = media.take(world.maya, photo(600, 400, orientation=6), name="home.jpg")
    doc_id = world.post("home", [{"upload": upload, "alt": "Home"}])
    r = world.thumb(doc_id, px=96, fit="contain")
    assert r.status_code == 200 and Image.open(io.BytesIO(r.content)).size == (64, 96)  # upright
    assert world.images.hits == [] and world.canary.hits == []


def test_a_thumbnail_needs_a_signed_in_person(world):
    doc_id = world.post("beach", [{"url": f"{world.images.url}/beach.jpg", "alt": "The beach"}])
    stranger = httpx.Client(base_url=world.url, follow_redirects=False, timeout=30)
    try:
        r = stranger.get(f"/console/publish/thumbnail?id={quote(doc_id, safe='')}")
        assert r.status_code == 303 and r.headers["location"].startswith("/console/sign-in?next=")
        stranger.cookies.set("skyhub_session", "x" * 40)
        forged = stranger.get(f"/console/publish/thumbnail?id={quote(doc_id, safe='')}")
        assert forged.status_code == 303
    finally:
        stranger.close()
    assert world.images.hits == []


def test_the_cache_is_the_operators_to_size(tmp_path, monkeypatch):
    app, images, canary = make_world(tmp_path, monkeypatch, SKYHUB_PUBLISH__THUMBNAIL_CACHE_BYTES="0")
    try:
        with serving(create_api(app)) as url:
            w = World(app, url, images, canary)
            doc_id = w.post("beach", [{"url": f"{images.url}/beach.jpg", "alt": "The beach"}])
            assert w.thumb(doc_id).status_code == 200 and w.thumb(doc_id).status_code == 200
            assert images.hits == ["/beach.jpg", "/beach.jpg"]  # nothing kept: fetched each time
            w.console.close()
    finally:
        app.stop()
        images.stop()
        canary.stop()
