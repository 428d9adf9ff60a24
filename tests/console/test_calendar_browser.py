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


def test_import_a_calendar_with_two_bad_rows_of_ten_from_a_file_on_a_phone(browser: Any, tmp_path: Path, key_text: str) -> None:
    from publishers.listing import by_time
    from tests.publishers.test_import import rows

    found = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key_text, "SKYHUB_PUBLISH__ACCOUNTS__IG": "17841400000000000",
        "SKYHUB_PUBLISH__ACCOUNTS__THREADS": THREADS, "SKYHUB_PUBLISH__EVERY": "1h"})
    try:
        page = _tab(browser, found, 390, 844)
        page.goto(found.url + "/console/publish/import")
        _fits_and_is_clean(page, 390, "phone-import")
        page.set_input_files("#import-file", files=[{"name": "week-49.csv", "mimeType": "text/csv", "buffer": rows().encode()}])
        page.wait_for_function("() => document.getElementById('import-content').value.includes('day-10')")
        page.click("button[value=check]")
        page.locator("#import-report").wait_for()
        assert page.locator("#import-counts").inner_text() == (
            "8 would be new, 0 would be updated, 0 unchanged, 2 invalid (nothing written for them)")
        assert "an Instagram post needs an image" in page.locator("#import-row-5").inner_text()
        assert "tiktok" in page.locator("#import-row-9").inner_text()
        assert by_time(found.admin) == []  # the check wrote nothing
        _fits_and_is_clean(page, 390, "phone-import-checked")
        page.click("button[value=import]")
        page.locator("#import-report h2", has_text="Imported").wait_for()
        assert page.locator("#import-counts").inner_text().startswith("8 new, 0 updated, 0 unchanged, 2 invalid")
        posts = {d.get("post") for d in by_time(found.admin)}
        assert posts == {f"day-{n}" for n in range(1, 11) if n not in (4, 8)}
        page.click("button[value=import]")  # again: every row is as it was
        page.locator("#import-counts", has_text="0 new, 0 updated, 8 unchanged, 2 invalid").wait_for()
        page.context.close()
    finally:
        found.stop()
