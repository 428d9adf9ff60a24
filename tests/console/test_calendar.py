"""The publishing calendar and the zone form against a real `skyhub run`: the grid in the person's
zone, a post moved by the pick form (its document's time and history), a move of a changed post or
to a time the clocks skip refused with a sentence, an unknown zone refused, ``<html data-zone>``."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.auth import set_zone, zone_of
from ledger import Ledger
from publishers.queue import PostIn, VariantIn, submit_post
from publishers.settings import PublishSettings
from skyhub_testkit.hub import Hub

from .conftest import Console, signed_in

SHOP = "shop.bsky.social"
THREADS = "2900000000000001"
WEEK = "/console/publish/calendar?view=week&start=2027-01-13"


class Settings:
    """The settings the queue reads (``section("publish")``), as the hub's defaults."""

    publish = PublishSettings()

    def section(self, name: str) -> PublishSettings | None:
        return self.publish if name == "publish" else None


def draft(hub: Hub, slug: str, at: str, caption: str = "Winter sale starts") -> str:
    post = PostIn(variants=[VariantIn("threads", account=THREADS), VariantIn("bsky", account=SHOP)], caption=caption,
                  at=at, slug=slug, draft=True)
    submit_post(Ledger(hub.admin, "user:maya", hub.clock), Settings(), post, now_ms=hub.clock.now_ms())
    return slug


@pytest.fixture
def planner(tmp_path: Path, key_text: str) -> Iterator[tuple[Hub, Console]]:
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False, env={"SKYHUB_VAULT_KEY": key_text})
    yield from signed_in(hub, "maya")


def _entry(page: str, slug: str) -> str:
    found = re.search(rf'<li class="cal-entry[^"]*" id="post-{slug}".*?</li>\s*(?=<li class="cal-entry|</ul>)', page, re.S)
    assert found, f"no calendar entry for {slug}"
    return found.group(0)


def _day_of(page: str, slug: str) -> str:
    found = re.search(rf'data-date="([0-9-]+)" id="day-[0-9-]+">(?:(?!<li class="cal-day).)*id="post-{slug}"', page, re.S)
    assert found, f"{slug} is on no day"
    return found.group(1)


def test_the_week_is_drawn_in_the_persons_zone_with_one_entry_per_post(planner):
    hub, console = planner
    set_zone(hub.admin, "maya", "America/New_York", clock=hub.clock)
    draft(hub, "late", "2027-01-15T02:30:00Z")  # 21:30 on Thursday the 14th in New York
    page = console.http.get(WEEK).text
    assert '<html lang="en" data-zone="America/New_York">' in page
    assert _day_of(page, "late") == "2027-01-14"
    entry = _entry(page, "late")
    assert '<time datetime="2027-01-15T02:30:00.000Z">21:30</time>' in entry
    assert ">TH<" in entry and ">BS<" in entry and "draft" in entry and "Winter sale starts" in entry
    assert page.count('id="post-late"') == 1
    month = console.http.get("/console/publish/calendar?view=month&start=2027-01-01").text
    assert _day_of(month, "late") == "2027-01-14" and "January 2027" in month


def test_the_browsers_zone_is_used_until_the_person_chooses_one_and_a_bad_one_is_ignored(planner):
    hub, console = planner
    draft(hub, "late", "2027-01-15T02:30:00Z")
    console.http.cookies.set("skyhub_zone", "Asia/Tokyo")
    page = console.http.get(WEEK).text
    assert 'data-zone="Asia/Tokyo"' in page and '<time datetime="2027-01-15T02:30:00.000Z">11:30</time>' in page
    assert _day_of(page, "late") == "2027-01-15"
    console.http.cookies.set("skyhub_zone", "Mars/Olympus")
    ignored = console.http.get(WEEK).text  # not a zone: none is claimed (the page's script uses the browser's), the grid is UTC's
    assert "data-zone=" not in ignored.split(">", 2)[1] and '<time datetime="2027-01-15T02:30:00.000Z">02:30</time>' in ignored


def test_the_zone_form_stores_a_zone_and_refuses_an_unknown_one_with_a_sentence(planner):
    hub, console = planner
    bad = console.post("/console/publish/zone", {"zone": "Mars/Olympus"}, form_page="/console/publish/zone")
    assert bad.status_code == 422 and "time zone 'Mars/Olympus' is not one" in html.unescape(bad.text)
    assert zone_of(hub.admin, "maya") is None
    ok = console.post("/console/publish/zone", {"zone": "Europe/Berlin"}, form_page="/console/publish/zone")
    assert ok.status_code == 303 and zone_of(hub.admin, "maya") == "Europe/Berlin"
    assert 'data-zone="Europe/Berlin"' in console.http.get("/console/publish").text  # every page, not only the calendar


def test_a_post_moved_with_the_pick_form_gets_the_new_time_in_a_new_revision(planner):
    hub, console = planner
    set_zone(hub.admin, "maya", "Europe/Berlin", clock=hub.clock)
    draft(hub, "sale", "2027-01-13T09:00:00+01:00")
    page = console.http.get(WEEK).text
    revs = html.unescape(re.search(r'name="revs" value="([^"]+)"', _entry(page, "sale")).group(1))
    before = len(hub.admin.history("requests", f"bsky:{SHOP}:sale"))
    moved = console.post("/console/publish/calendar/move", {"id": "sale", "revs": revs, "date": "2027-01-16", "time": "18:45",
                                                            "view": "week", "start": "2027-01-11"}, form_page=WEEK)
    assert moved.status_code == 303, moved.text
    for variant in (f"bsky:{SHOP}:sale", f"threads:{THREADS}:sale"):
        assert hub.admin.get("requests", variant)["at"] == "2027-01-16T18:45:00+01:00"
    assert len(hub.admin.history("requests", f"bsky:{SHOP}:sale")) == before + 1
    after = console.http.get(moved.headers["location"]).text
    assert "sale moved to 2027-01-16 18:45 (Europe/Berlin)" in html.unescape(after) and _day_of(after, "sale") == "2027-01-16"
    stale = console.post("/console/publish/calendar/move", {"id": "sale", "revs": revs, "date": "2027-01-14", "time": "10:00",
                                                            "view": "week", "start": "2027-01-11"}, form_page=WEEK)
    assert stale.status_code == 409 and "sale changed since this page was drawn" in html.unescape(stale.text)
    assert hub.admin.get("requests", f"bsky:{SHOP}:sale")["at"] == "2027-01-16T18:45:00+01:00"  # nothing moved blind


def test_a_move_to_a_time_the_clocks_skip_is_refused_as_json_for_the_drag(planner):
    hub, console = planner
    set_zone(hub.admin, "maya", "Europe/Berlin", clock=hub.clock)
    draft(hub, "spring", "2027-03-24T09:00:00+01:00")
    answer = console.post("/console/publish/calendar/move", {"id": "spring", "date": "2027-03-28", "time": "02:30"},
                          form_page=WEEK, headers={"Accept": "application/json"})
    assert answer.status_code == 422
    assert answer.json() == {"ok": False, "sentence": "2027-03-28 02:30 does not exist in Europe/Berlin (the clocks skip it): "
                                                      "pick another time"}
    assert hub.admin.get("requests", f"bsky:{SHOP}:spring")["at"] == "2027-03-24T09:00:00+01:00"


def test_the_queue_is_sorted_by_time_with_caption_excerpts(planner):
    hub, console = planner
    draft(hub, "aaa-late", "2027-01-20T09:00:00Z", caption="Later, though its id sorts first " + "word " * 40)
    draft(hub, "zzz-early", "2027-01-10T09:00:00Z", caption="Earlier post")
    page = console.http.get("/console/publish").text
    rows = re.findall(r'<tr id="row-([^"]+)"', page)
    assert rows.index(f"bsky-{SHOP}-zzz-early") < rows.index(f"bsky-{SHOP}-aaa-late")
    assert rows.index(f"threads-{THREADS}-zzz-early") < rows.index(f"bsky-{SHOP}-aaa-late")
    assert '<p class="excerpt">Later, though its id sorts first word' in page and "…</p>" in page
