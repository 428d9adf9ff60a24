"""A held post on the console's pages: the hold links to the credentials page's paste form, filled
in, instead of naming a command; the credentials page lists what the settings and held work want
and the vault lacks as missing, each with a paste button, and opens its paste form filled in
from ``?platform=...&account=...``. Against a real `skyhub run` whose publish tick holds the post."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.console.web import doc_url
from ledger import Ledger
from publishers.queue import new_request, queue
from skyhub_testkit.hub import Hub

from .conftest import Console

SHOP = "shop.bsky.social"
PASTE = f"/console/credentials?platform=bluesky&amp;account={SHOP}"


@pytest.fixture
def held(tmp_path: Path, key_text: str) -> Iterator[tuple[Hub, Console, str]]:
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key_text, "SKYHUB_PUBLISH__EVERY": "1s", "SKYHUB_VAULT__EVERY": "1h", "SKYHUB_BOT__HANDLE": "ourbot.bsky.social"})
    console = Console(hub.url)
    try:
        doc, _ = queue(Ledger(hub.admin, "user:maya", hub.clock), new_request("bsky", account=SHOP, slug="hello", caption="Hello",
                                                                    now_ms=hub.clock.now_ms()))
        deadline = time.monotonic() + 60
        while "held" not in hub.admin.get("requests", doc["_id"]):  # the hub's publish tick holds it: no credential
            assert time.monotonic() < deadline, "the publish tick did not hold the post"
            time.sleep(0.1)
        assert "skyhub vault put bluesky shop.bsky.social" in hub.admin.get("requests", doc["_id"])["held"]["reason"]  # the CLI's
        console.sign_in(hub.token("maya"))
        yield hub, console, doc["_id"]
    finally:
        console.close()
        hub.stop()


def _row(page: str, row_id: str) -> str:
    found = re.search(rf'<tr id="{re.escape(row_id)}".*?</tr>', page, re.S)
    assert found, f"no row {row_id}"
    return found.group(0)


def test_every_page_that_shows_the_hold_links_the_paste_form_and_names_no_command(held):
    hub, console, post = held
    queue_page = console.http.get("/console/publish").text
    row = _row(queue_page, "row-" + post.replace(":", "-"))
    assert "held: no credential for this account in the vault" in row and f'href="{PASTE}"' in row
    overview = console.http.get("/").text
    assert f"{post} is held" in overview and f'href="{PASTE}"' in overview
    for page in (queue_page, overview):
        assert "skyhub vault" not in page and "`" not in html.unescape(page)
    document = console.http.get(doc_url("requests", post)).text
    assert f'href="{PASTE}"' in document  # next to the fields (which show the document as it is)


def test_the_credentials_page_lists_what_is_missing_and_a_paste_takes_it_off(held):
    hub, console, _ = held
    page = console.http.get("/console/credentials").text
    shop = _row(page, "cred-bluesky-shop-bsky-social")
    assert "missing" in shop and "1 held document in requests" in shop and f'href="{PASTE}"' in shop
    bot = _row(page, "cred-bluesky-ourbot-bsky-social")
    assert "missing" in bot and "named in bot.handle" in bot and "/console/credentials?platform=bluesky&amp;account=ourbot.bsky.social" in bot
    assert "2 credentials are missing" in page

    form = console.http.get("/console/credentials?platform=bluesky&account=shop.bsky.social").text
    assert re.search(r"<option selected>bluesky</option>", form)
    assert f'id="cred-account" name="account" value="{SHOP}"' in form
    assert re.search(r'<input type="password" id="secret"[^>]* autofocus>', form)
    done = console.post("/console/credentials", {"platform": "bluesky", "account": SHOP, "secret": "app-pass-word"},
                        form_page="/console/credentials")
    assert done.status_code == 303
    page = console.http.get("/console/credentials").text
    assert "missing" not in _row(page, "cred-bluesky-shop-bsky-social") and "1 credential is missing" in page


def test_a_paste_form_asked_for_what_is_not_a_credential_opens_empty(hub, console):
    console.sign_in(hub.token("maya"))
    for query in ("platform=nowhere&account=x", "platform=bluesky&account=%3Cscript%3E", "platform=bluesky&account=", "account=x"):
        page = console.http.get(f"/console/credentials?{query}").text
        assert 'id="cred-account" name="account" value=""' in page and "autofocus" not in page, query
        assert "<script>" not in page


@pytest.mark.browser
def test_on_a_phone_a_held_post_s_paste_button_opens_the_form_filled_in_and_focused(held, browser):
    hub, _, post = held
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        p = context.new_page()
        p.set_default_timeout(20_000)
        p.goto(hub.url + "/console/sign-in")
        p.fill("#token", hub.token("ana"))
        p.press("#token", "Enter")
        p.wait_for_url(hub.url + "/")
        p.goto(hub.url + "/console/publish")
        row = "row-" + post.replace(":", "-")
        paste = p.locator(f'[id="{row}"]').get_by_role("link", name=f"Paste a secret for {SHOP} (bluesky)")  # shown: "Paste"
        assert paste.get_attribute("href") == html.unescape(PASTE)
        paste.focus()
        p.keyboard.press("Enter")
        p.wait_for_url(hub.url + html.unescape(PASTE))
        assert p.locator("#cred-platform").input_value() == "bluesky" and p.locator("#cred-account").input_value() == SHOP
        assert p.evaluate("() => document.activeElement.id") == "secret"  # type the secret straight away
        p.keyboard.type("app-pass-word")
        p.keyboard.press("Enter")
        p.wait_for_url("**/console/credentials?done=*")
        assert p.locator("#cred-bluesky-shop-bsky-social .status").inner_text() == "unverified"
        assert p.evaluate("() => document.documentElement.scrollWidth") <= 390
    finally:
        context.close()
