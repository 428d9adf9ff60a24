"""The compose page and the review queue in Debian's chromium, at a phone's size and a desktop's,
on a real `skyhub run` with publish.require_review on: an editor composes one post for three
networks with a per-network caption and a first comment, the counters and previews following
every keystroke, and saves it as a draft, then submits it; an approver, in a second session,
approves it on the review page. The page never scrolls sideways with long captions, and axe-core
finds nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.auth import set_role
from ledger import Ledger, NotFound
from publishers.posts import variants_of
from skyhub_testkit.hub import Hub
from vault import Vault, parse_key

from .chromium import ARTIFACTS, AXE, AXE_JS

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "desktop": (1366, 768)}
IG = "17841400000000001"
THREADS = "2900000000000001"
SHOP = "the-corner-bookshop-and-cafe-down-by-the-old-harbour-wall.bsky.social"
LONG = "Our spring collection is here, every piece made by hand. " * 4 + "x" * 120 + " #spring #cups"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    from vault import new_key_text

    tmp: Path = tmp_path_factory.mktemp("compose")
    key_text = new_key_text()
    hub = Hub(f"sqlite:///{tmp}/skyhub.db", tmp, jobs=False, env={
        "SKYHUB_VAULT_KEY": key_text, "SKYHUB_PUBLISH__EVERY": "1h", "SKYHUB_VAULT__EVERY": "1h",
        "SKYHUB_PUBLISH__REQUIRE_REVIEW": "true", "SKYHUB_PUBLISH__ACCOUNTS": json.dumps({"bsky": SHOP})})
    try:
        vault = Vault(Ledger(hub.admin, "user:ann", hub.clock), parse_key(key_text, "test"))
        for platform, account in (("instagram", IG), ("threads", THREADS), ("bluesky", SHOP)):
            meta = vault.put(platform, account, {"appPassword": "a"} if platform == "bluesky" else {"accessToken": "t"})
            doc = hub.admin.get("vault", meta["id"])
            hub.admin.put("vault", {**{k: v for k, v in doc.items() if not k.startswith("_")}, "status": "ok"}, meta["id"],
                          actor="admin", if_rev=doc["_rev"])
        yield hub
    finally:
        hub.stop()


class Person:
    """One browser session at one size, signed in."""

    def __init__(self, browser: Any, hub: Hub, size: str, token: str) -> None:
        width, height = SIZES[size]
        self.width, self.url = width, hub.url
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.page.route(self.url + AXE, lambda route: route.fulfill(body=AXE_JS, content_type="text/javascript"))
        self.page.goto(self.url + "/console/sign-in")
        self.page.fill("#token", token)
        self.page.press("#token", "Enter")
        self.page.wait_for_url(self.url + "/")

    def fits(self, name: str) -> None:
        """No sideways scroll, no axe-core violation; a screenshot in the artifacts."""
        p = self.page
        wide = p.evaluate("() => document.documentElement.scrollWidth")
        assert wide <= self.width, f"{name}: the page is {wide} px wide in a {self.width} px window"
        if not p.evaluate("() => typeof window.axe !== 'undefined'"):
            p.add_script_tag(url=self.url + AXE)
        found = p.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
                              .map(v => ({id: v.id, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))""")
        assert not found, f"{name}: axe-core: {json.dumps(found, indent=1)}"
        p.screenshot(path=str(ARTIFACTS / f"compose-{self.width}-{name}.png"), full_page=True)

    def close(self) -> None:
        self.context.close()


def statuses(hub: Hub, slug: str) -> dict[str, str]:
    try:
        return {d["platform"]: d["status"] for d in variants_of(hub.admin, slug)}
    except NotFound:
        return {}


@pytest.mark.parametrize("size", list(SIZES))
def test_an_editor_composes_for_three_networks_and_an_approver_approves(browser: Any, hub: Hub, size: str) -> None:
    slug = f"walk-{size}"
    ed = Person(browser, hub, size, hub.token(f"ed{size}"))
    set_role(hub.admin, f"ed{size}", "editor", clock=hub.clock)
    ann = Person(browser, hub, size, hub.token(f"ann{size}"))
    set_role(hub.admin, f"ann{size}", "approver", clock=hub.clock)
    try:
        p = ed.page
        p.goto(hub.url + "/console/publish/compose")
        assert p.locator("button[name=action]").all_inner_texts() == ["Save draft", "Submit for review"]
        for net, account in (("ig", IG), ("threads", THREADS), ("bsky", SHOP)):
            p.check(f"#to-{net}")
            p.select_option(f"#account-{net}", account)
        p.fill("#slug", slug)
        p.fill("#caption", "Hello #spring")  # every network counts the shared caption, as it types
        assert p.inner_text("#count-ig [data-count]") == "13" and p.inner_text("#count-ig [data-tags]") == "1"
        assert p.inner_text("#count-bsky [data-count]") == "13"
        p.fill("#caption-threads", "é" * 501)  # Threads' own caption, over its limit: said at once
        assert p.inner_text("#count-threads [data-count]") == "501" and "over Threads" in p.inner_text("#count-threads")
        assert p.inner_text("#count-ig [data-count]") == "13"  # the others keep the shared caption
        p.fill("#caption-threads", "Spring on Threads")
        assert p.inner_text("#count-threads [data-count]") == "17" and "over" not in p.inner_text("#count-threads")
        p.fill("#caption-ig", LONG)  # Instagram's feed cuts at 125 characters, then "more"
        assert p.text_content("#preview-ig [data-preview]") == LONG[:125] + " … more"
        assert p.text_content("#preview-threads [data-preview]") == "Spring on Threads"  # Threads shows it whole
        assert p.inner_text("#count-ig [data-tags]") == "2"
        p.fill("#caption-bsky", "👩‍👩‍👧 Spring on Bluesky")  # one grapheme for the family, as Bluesky counts
        assert p.inner_text("#count-bsky [data-count]") == str(len(" Spring on Bluesky") + 1)
        p.fill("#image-1", "https://cdn.example.org/spring/cups.jpg")
        p.fill("#alt-1", "Three blue cups on a shelf")
        assert p.inner_text("#preview-bsky [data-preview-alt]") == "Three blue cups on a shelf"
        p.fill("#firstComment", "Shop link in bio")
        assert p.inner_text("#preview-threads [data-preview-comment]") == "Shop link in bio"
        p.check("#nocomment-bsky")  # none on Bluesky
        assert p.inner_text("#preview-bsky [data-preview-comment]") == "none"
        ed.fits("typed")

        p.click("button[value=draft]")
        p.locator("#flash").wait_for()
        assert "saved as a draft" in p.inner_text("#flash")
        assert statuses(hub, slug) == {"ig": "draft", "threads": "draft", "bsky": "draft"}
        docs = {d["platform"]: d for d in variants_of(hub.admin, slug)}
        assert docs["threads"]["caption"] == "Spring on Threads" and docs["ig"]["caption"] == LONG
        assert docs["ig"]["firstComment"] == docs["threads"]["firstComment"] == "Shop link in bio" and "firstComment" not in docs["bsky"]
        assert p.input_value("#caption-threads") == "Spring on Threads"  # the saved draft, back in the form
        assert p.locator("#preview-ig img.thumb").get_attribute("src").startswith("/console/publish/thumbnail?id=")
        ed.fits("saved")
        p.click("button[value=submit]")
        p.locator("#flash").wait_for()
        assert statuses(hub, slug) == {"ig": "in-review", "threads": "in-review", "bsky": "in-review"}
        p.goto(hub.url + "/console/publish/review")
        assert p.locator("button", has_text="Approve").count() == 0 and p.locator("button", has_text="Reject").count() == 0
        ed.fits("review-editor")

        q = ann.page
        q.goto(hub.url + "/console/publish/review")
        card = q.locator(f"section[data-post='{slug}']")
        assert "Spring on Threads" in card.inner_text()
        ann.fits("review")
        card.locator("button", has_text="Approve").click()
        q.locator("#flash").wait_for()
        assert "approved" in q.inner_text("#flash")
        assert statuses(hub, slug) == {"ig": "approved", "threads": "approved", "bsky": "approved"}
    finally:
        ed.close()
        ann.close()
