"""The publishing calendar in Debian's chromium at a phone's size and a desktop's: drawn in the
person's zone (not the browser's, not UTC), a post dragged to another day and a post moved with
the pick form, each checked on the post's documents (their time and history); no sideways scroll
and axe-core clean at both sizes. The 50-entry and long-caption cases are in test_layout's VIEWS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.auth import set_zone
from skyhub_testkit.hub import Hub

from .chromium import ARTIFACTS, AXE, AXE_JS
from .test_calendar import SHOP, THREADS, draft

pytestmark = pytest.mark.browser

WEEK = "/console/publish/calendar?view=week&start=2027-01-11"


@pytest.fixture
def hub(tmp_path: Path, key_text: str) -> Iterator[Hub]:
    found = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False, env={"SKYHUB_VAULT_KEY": key_text})
    try:
        set_zone(found.admin, "maya", "America/New_York", clock=found.clock)
        yield found
    finally:
        found.stop()


def _tab(browser: Any, hub: Hub, width: int, height: int) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height}, timezone_id="Asia/Tokyo")  # not the person's zone
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.route(hub.url + AXE, lambda route: route.fulfill(body=AXE_JS, content_type="text/javascript"))
    page.goto(hub.url + "/console/sign-in")
    page.fill("#token", hub.token("maya"))
    page.press("#token", "Enter")
    page.wait_for_url(hub.url + "/")
    return page


def _fits_and_is_clean(page: Any, width: int, name: str) -> None:
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.add_script_tag(url=page.url.split("/console")[0] + AXE)
    found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
        .map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))""")
    page.screenshot(path=str(ARTIFACTS / f"calendar-{name}.png"), full_page=True)
    assert found == [], json.dumps(found, indent=1)


def _history(hub: Hub, slug: str) -> list[Any]:
    return [c.doc.get("at") for c in hub.admin.history("requests", f"bsky:{SHOP}:{slug}")]


def test_drag_a_post_to_another_day_on_the_desktop(browser: Any, hub: Hub) -> None:
    draft(hub, "sale", "2027-01-13T14:00:00Z", caption="Winter sale " + "and more " * 30)  # 09:00 on Wednesday in New York
    page = _tab(browser, hub, 1366, 768)
    try:
        page.goto(hub.url + WEEK)
        assert page.evaluate("() => document.documentElement.dataset.zone") == "America/New_York"
        assert page.locator("#day-2027-01-13 #post-sale").count() == 1
        assert page.locator("#post-sale time").get_attribute("datetime") == "2027-01-13T14:00:00.000Z"
        _fits_and_is_clean(page, 1366, "desktop-week")
        page.drag_and_drop("#post-sale .cal-caption", "#day-2027-01-15")
        page.wait_for_url("**done=*")
        assert page.locator("#day-2027-01-15 #post-sale").count() == 1
        assert "sale moved to 2027-01-15 09:00 (America/New_York)" in page.locator("#flash").inner_text()
        for variant in (f"bsky:{SHOP}:sale", f"threads:{THREADS}:sale"):
            assert hub.admin.get("requests", variant)["at"] == "2027-01-15T09:00:00-05:00"
        assert _history(hub, "sale")[-2:] == ["2027-01-13T14:00:00Z", "2027-01-15T09:00:00-05:00"]
    finally:
        page.context.close()


def test_a_refused_drag_says_why_and_moves_nothing(browser: Any, hub: Hub) -> None:
    draft(hub, "sale", "2027-01-13T14:00:00Z")
    page = _tab(browser, hub, 1366, 768)
    try:
        page.goto(hub.url + WEEK)
        draft(hub, "sale", "2027-01-13T14:00:00Z", caption="Winter sale, new words")  # changed after the page was drawn
        page.drag_and_drop("#post-sale .cal-caption", "#day-2027-01-15")
        page.locator("#cal-said.error").wait_for()
        assert "sale changed since this page was drawn" in page.locator("#cal-said").inner_text()
        assert hub.admin.get("requests", f"bsky:{SHOP}:sale")["at"] == "2027-01-13T14:00:00Z"
    finally:
        page.context.close()


def test_pick_a_new_time_on_a_phone(browser: Any, hub: Hub) -> None:
    draft(hub, "sale", "2027-01-13T14:00:00Z", caption="Winter sale " + "x" * 280)
    page = _tab(browser, hub, 390, 844)
    try:
        page.goto(hub.url + WEEK)
        _fits_and_is_clean(page, 390, "phone-week")
        entry = page.locator("#post-sale")
        entry.locator("summary").click()
        entry.locator("input[name=date]").fill("2027-01-16")
        entry.locator("input[name=time]").fill("18:30")
        entry.locator("button[type=submit]").click()
        page.wait_for_url("**done=*")
        assert page.locator("#day-2027-01-16 #post-sale time").get_attribute("datetime") == "2027-01-16T23:30:00.000Z"
        assert hub.admin.get("requests", f"bsky:{SHOP}:sale")["at"] == "2027-01-16T18:30:00-05:00"
        assert len(_history(hub, "sale")) == 2
        _fits_and_is_clean(page, 390, "phone-week-moved")
    finally:
        page.context.close()
