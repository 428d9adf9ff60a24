"""The queue's thumbnails in real headless Chromium (as tests/console/test_browser.py drives it),
against a real `skyhub run`: under the console's strict CSP the first image of each post shows
as a thumbnail the hub made (its alt text the image's), the browser never asks the image's host
for anything, an image that cannot be fetched shows the fallback, and axe-core finds nothing
serious at phone and desktop sizes."""

from __future__ import annotations

import pytest

from publishers.remote import publish_queue
from skyhub_testkit.servers import LocalServer
from tests.console.test_browser import Page, _hub  # the browser fixture: tests/console/conftest.py
from tests.publishers.photos import photo

pytestmark = pytest.mark.browser


def test_the_queue_shows_thumbnails_made_by_the_hub(browser, tmp_path, key_text):
    images = LocalServer("127.0.0.2", routes={"/beach.jpg": (200, {"Content-Type": "image/jpeg"}, photo(1200, 800)),
                                              "/gone.jpg": (404, {"Content-Type": "text/plain"}, b"gone")})
    hub = _hub(tmp_path, key_text, SKYHUB_FETCH__ALLOW_HTTP="true", SKYHUB_FETCH__ALLOW_NETWORKS='["127.0.0.2/32"]',
               SKYHUB_JOBS__ENABLED="false")
    maya = hub.client("user:maya")
    try:
        for slug, path, alt in (("beach", "/beach.jpg", "The beach at noon"), ("gone", "/gone.jpg", "A photo that is gone")):
            publish_queue(maya, {"platform": "bsky", "account": "shop.test", "slug": slug, "caption": "Look",
                                 "images": [{"url": images.url + path, "alt": alt}]})
        for width, height, view in ((1280, 900, "desktop"), (390, 844, "phone")):
            tab = Page(browser, hub, f"thumbnails-{view}", width=width, height=height)
            asked: list[str] = []
            tab.page.on("request", lambda request, asked=asked: asked.append(request.url))
            try:
                p = tab.page
                tab.sign_in(hub.token("maya"))
                p.goto(hub.url + "/console/publish")
                for slug, alt in (("beach", "The beach at noon"), ("gone", "A photo that is gone")):
                    selector = f"#row-bsky-shop\\.test-{slug} img.thumb"  # live updates may swap the row: always the current one
                    assert p.locator(selector).get_attribute("alt") == alt
                    p.wait_for_function("""(sel) => { const img = document.querySelector(sel);
                        if (!img) return false; img.loading = "eager"; return img.complete && img.naturalWidth > 0; }""",
                                        arg=selector)
                tab.check("queue")
                assert not any(u.startswith(images.url) for u in asked), asked
                assert any("/console/publish/thumbnail?id=bsky%3Ashop.test%3Abeach" in u for u in asked)
            finally:
                tab.close()
        assert images.hits.count("/beach.jpg") == 1  # made once, shown at both sizes from the hub's cache
    finally:
        maya.close()
        hub.stop()
        images.stop()
