"""The readable document page and the lists in Debian's chromium, at 390 x 844 and 1366 x 768,
against a real `skyhub run`: times shown in the zone the server names (``<html data-zone>``, here
set on the way to the browser, as h18cal's hub sets it) with "ago" text that moves, a post's
image as a thumbnail served by the hub, Cancel asking first (dismissed: nothing written;
accepted: cancelled), a list of 120 documents with its total, sorted by time, jumping to page 3;
no sideways scroll, 44 px touch targets on the phone, axe-core clean at both sizes."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from hub.app import build_rules
from hub.auth import set_zone
from hub.console.web import doc_url
from ledger import SYSTEM, FakeClock, open_store
from publishers.remote import publish_queue
from skyhub_testkit.hub import Hub
from skyhub_testkit.servers import LocalServer
from tests.console.test_layout import SIZES, Tab
from tests.publishers.photos import photo

pytestmark = pytest.mark.browser
ZONE = "Asia/Tokyo"  # UTC+9 all year: the shown time cannot be the UTC one by accident
CAROUSEL_AT = 1_764_680_400_000  # 2025-12-02 13:00:00 UTC, 22:00:00 in Tokyo


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from vault import new_key_text

    tmp = tmp_path_factory.mktemp("document")
    images = LocalServer("127.0.0.2", routes={"/shelf.jpg": (200, {"Content-Type": "image/jpeg"}, photo(900, 600))})
    hub = Hub(f"sqlite:///{tmp}/skyhub.db", tmp, jobs=False, env={
        "SKYHUB_VAULT_KEY": new_key_text(), "SKYHUB_FETCH__ALLOW_HTTP": "true", "SKYHUB_FETCH__ALLOW_NETWORKS": '["127.0.0.2/32"]',
        "SKYHUB_PUBLISH__EVERY": "1h"})
    try:
        maya = hub.client("user:maya")
        try:  # through the hub, which judges the image's address with its own fetch settings
            publish_queue(maya, {"platform": "bsky", "account": "shop.test", "slug": "shelf", "caption": "New cups",
                                 "images": [{"url": images.url + "/shelf.jpg", "alt": "A shelf of cups"}]})
        finally:
            maya.close()
        post = {"_id": "bsky:shop.test:shelf"}
        hub.admin.put("requests", {**hub.admin.get("requests", post["_id"]), "carouselAt": CAROUSEL_AT,
                                   "lastError": "Bluesky answered 502\nthen the connection closed"}, post["_id"], actor="admin")
        clock = FakeClock(SYSTEM.now_ms() - 600_000)  # 120 tasks a second apart, the last written first by id
        store = open_store(hub.database_url, build_rules(), clock)
        try:
            for i in reversed(range(120)):
                clock.advance(1000)
                store.put("tasks", {"kind": "task", "status": "failed", "lastError": f"boom {i}"}, f"t{i:03d}", actor="admin")
        finally:
            store.close()
        token = hub.token("maya")
        set_zone(hub.admin, "maya", ZONE, clock=SYSTEM)  # the person's zone, as `skyhub user zone maya Asia/Tokyo` keeps it
        yield SimpleNamespace(hub=hub, images=images, post=post["_id"], token=token)
    finally:
        hub.stop()
        images.stop()


@pytest.mark.parametrize("size", list(SIZES))
def test_the_document_page_reads_well_and_cancel_asks_first(browser, world, size):
    hub = world.hub
    tab = Tab(browser, world, size)
    p = tab.page
    try:
        tab.sign_in(world.token)
        p.goto(hub.url + doc_url("requests", world.post))
        tokyo = datetime.fromtimestamp(CAROUSEL_AT / 1000, tz=UTC).astimezone(ZoneInfo(ZONE)).strftime("%Y-%m-%d %H:%M:%S")
        shown = p.locator('#fields time[datetime="2025-12-02T13:00:00.000Z"]')
        p.wait_for_function("(sel) => /ago\\)$/.test(document.querySelector(sel).textContent)", arg='#fields time[datetime="2025-12-02T13:00:00.000Z"]')
        text = shown.inner_text()
        assert text.startswith(tokyo) and tokyo.endswith("22:00:00"), text  # in Tokyo, not in UTC
        assert re.search(r"\(\d+ d ago\)$", text), text
        assert "1764680400000" in (shown.get_attribute("title") or "")  # the raw value, where a person can find it
        body = p.locator("main").inner_text()
        assert not re.search(r"\b1[67]\d{11}\b", body), "an epoch in ms is shown as a number"
        newest = p.locator("ol.history time[data-ago]").first
        first = newest.inner_text()
        assert re.search(r"\(\d+ (s|min) ago\)$", first), first
        p.wait_for_function("([sel, was]) => document.querySelector(sel).textContent !== was",
                            arg=["ol.history time[data-ago]", first], timeout=5000)  # the "ago" moves by itself
        assert p.locator("pre.block", has_text="then the connection closed").count() == 1
        thumb = p.locator("ul.thumbs img").first
        assert thumb.get_attribute("alt") == "A shelf of cups"
        assert (thumb.get_attribute("src") or "").startswith("/console/publish/thumbnail?")
        p.wait_for_function("""() => { const img = document.querySelector("ul.thumbs img");
            img.loading = "eager"; return img.complete && img.naturalWidth > 0; }""")
        before = p.locator("ol.history > li").count()
        doc = hub.admin.get("requests", world.post)
        hub.admin.put("requests", {**doc, "note": f"seen on the {size}"}, world.post, actor="admin", if_rev=doc["_rev"])
        p.wait_for_function("(n) => document.querySelectorAll('ol.history > li').length > n", arg=before)  # the live swap
        p.wait_for_function("() => / GMT\\+9 \\(\\d+ s ago\\)$/.test(document.querySelector('ol.history time[data-ago]').textContent)")
        problems = tab.measure(f"document-{size}")
        assert not problems, "\n".join(problems)

        job = f"cancel-me-{size}"
        hub.admin.put("jobs", {"type": "job", "status": "pending", "input": {"n": 1}, "attempts": 0}, job, actor="admin")
        p.goto(hub.url + doc_url("jobs", job))
        asked: list[str] = []

        def dismiss(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.dismiss()

        p.once("dialog", dismiss)
        button = p.locator("form.confirm button.danger")
        assert button.inner_text() == "Cancel"
        assert not p.locator("form.confirm input[name=confirm]").is_visible()  # with a script: the dialog asks, not the box
        button.click()
        assert asked == [f"Cancel {job}? This cannot be undone."]
        assert hub.admin.get("jobs", job)["status"] == "pending"  # said no: nothing written
        p.once("dialog", lambda dialog: dialog.accept())
        button.click()
        p.wait_for_url("**done=*")
        assert hub.admin.get("jobs", job)["status"] == "cancelled"
        assert hub.admin.history("jobs", job)[-1].actor == "user:maya"
        problems = tab.measure(f"document-cancelled-{size}")
        assert not problems, "\n".join(problems)
    finally:
        p.unroute_all(behavior="ignoreErrors")
        tab.close()
    assert world.images.hits.count("/shelf.jpg") == 1  # the hub fetched it once (guarded), the browser never did


@pytest.mark.parametrize("size", list(SIZES))
def test_a_list_of_120_shows_its_total_sorts_by_time_and_jumps_to_page_3(browser, world, size):
    hub = world.hub
    tab = Tab(browser, world, size)
    p = tab.page
    try:
        tab.sign_in(world.token)
        p.goto(hub.url + "/console/db/tasks?status=failed")
        assert p.locator("#list-total").inner_text().startswith("1–50 of 120")
        rows = p.locator("#list tbody tr td:first-child a")
        assert rows.first.inner_text() == "t000"  # newest first: t000 was written last
        problems = tab.measure(f"list-{size}")
        assert not problems, "\n".join(problems)
        p.get_by_role("link", name="Oldest first").click()
        p.wait_for_url("**sort=oldest*")
        assert rows.first.inner_text() == "t119"
        p.fill("#jump-page", "3")
        p.press("#jump-page", "Enter")
        p.wait_for_url("**page=3*")
        assert p.locator("#list-total").inner_text().startswith("101–120 of 120")
        assert [rows.nth(i).inner_text() for i in (0, 19)] == ["t019", "t000"] and rows.count() == 20
        problems = tab.measure(f"list-page-3-{size}")
        assert not problems, "\n".join(problems)
    finally:
        tab.close()
