"""Issue 18's acceptance, walked in Debian's chromium on a real `skyhub run` with publish.require_review
on: a manager's week. Maya (the manager) imports ten posts from a CSV in the console (two rows invalid:
each reported with its sentence, nothing written for them, eight written); Ed (an editor) composes one
post for Instagram, Threads and Bluesky with a caption per network and a first comment, saves it as a
draft and submits it; Ann (an approver, another browser context) approves it on the review page; Maya
drags it to another day on the calendar; the publish tick publishes it on the fake Meta (Instagram,
Threads) and on the local Bluesky network, and posts each first comment once (counted on the fake Meta
and in the PDS thread). Every person's zone is America/New_York and every browser's Asia/Tokyo: every
time shown (calendar, queue, document page, compose form) is New York's."""

from __future__ import annotations

import ssl
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from PIL import Image

from hub.auth import set_role, set_zone
from hub.console.web import doc_url
from ledger import Ledger, NotFound
from publishers.listing import by_time
from publishers.posts import variants_of
from skyhub_testkit.hub import Hub
from tests.console.chromium import ARTIFACTS, CHROMIUM, FLAGS
from tests.publishers.test_import import rows
from vault import Vault, new_key_text, parse_key

from .test_publish_bluesky import Files, wait_for

pytestmark = pytest.mark.browser

NY, TOKYO = ZoneInfo("America/New_York"), "Asia/Tokyo"
IG, THREADS = "17841400000000000", "2900000000000001"  # the hub's default accounts, as the CSV's rows name them
SLUG = "winter-box"
COMMENT = "Made by hand in Lyon: https://shop.example.org/box"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: ./dev test installs it"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def signed_in(browser: Any, hub: Hub, token: str) -> Any:
    context = browser.new_context(viewport={"width": 1366, "height": 900}, timezone_id=TOKYO)  # not the person's zone
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(hub.url + "/console/sign-in")
    page.fill("#token", token)
    page.press("#token", "Enter")
    page.wait_for_url(hub.url + "/")
    return page


def times_in_new_york(page: Any, where: str) -> int:
    """Every <time> on the page is shown in New York's zone (not Tokyo's, not UTC); how many there are."""
    page.wait_for_function("() => [...document.querySelectorAll('time[datetime]')].every(t => t.dataset.shown)")
    shown = page.evaluate("() => [...document.querySelectorAll('time[datetime]')].map(t => [t.getAttribute('datetime'), t.dataset.shown])")
    for stamp, text in shown:
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        assert text[:19] == at.astimezone(NY).strftime("%Y-%m-%d %H:%M:%S"), f"{where}: {stamp} shown as {text!r}"
    return len(shown)


class HttpsFiles(Files):
    """The manager's images on https://localhost (Instagram and Threads take only https URLs), with a
    certificate of its own that the hub's process trusts (``SSL_CERT_FILE``); the guarded fetcher checks it."""

    def __init__(self, folder: Path, certs: Path) -> None:
        super().__init__(folder)
        self.ca = certs / "localhost.pem"
        key = certs / "localhost.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(self.ca)],
                       check=True, capture_output=True, timeout=60)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.ca), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://localhost:{self.server.server_address[1]}"


def said(page: Any, words: str) -> None:
    """The page's answer to a form: its flash (or, to say what went wrong, its errors)."""
    page.locator("#flash, [role=alert], .field-error, p.error").first.wait_for()
    errors = page.locator("[role=alert], .field-error, p.error").all_inner_texts()
    assert page.locator("#flash").count() == 1, errors
    assert words in page.inner_text("#flash")


def statuses(hub: Hub) -> dict[str, str]:
    try:
        return {d["platform"]: d["status"] for d in variants_of(hub.admin, SLUG)}
    except NotFound:
        return {}


def test_a_managers_week(bsky_network: Any, browser: Any, tmp_path: Path) -> None:
    from skyhub_testkit.fakemeta import FakeMeta

    net = bsky_network
    shop = net.create_account(net.unique_handle("shop"), "shop-password-3")
    instagram, threads = FakeMeta(lambda: int(time.time() * 1000)), FakeMeta(lambda: int(time.time() * 1000), threads=True)
    ig_server, th_server = instagram.serve(), threads.serve()
    images = tmp_path / "images"
    images.mkdir()
    Image.new("RGB", (90, 60), (30, 60, 120)).save(images / "box.jpg", "JPEG")
    files = HttpsFiles(images, tmp_path)
    key = new_key_text()
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key, "SKYHUB_PLATFORMS__BLUESKY_PDS": net.pds, "SKYHUB_PLATFORMS__INSTAGRAM_URL": ig_server.url,
        "SKYHUB_PLATFORMS__THREADS_URL": th_server.url, "SKYHUB_VAULT__EVERY": "1s", "SKYHUB_PUBLISH__EVERY": "1s",
        "SKYHUB_PUBLISH__REQUIRE_REVIEW": "true", "SKYHUB_PUBLISH__ACCOUNTS__IG": IG, "SKYHUB_PUBLISH__ACCOUNTS__THREADS": THREADS,
        # the manager's images are on this machine: the operator lets the guarded fetcher reach it (and only it)
        "SKYHUB_FETCH__ALLOW_NETWORKS": '["127.0.0.1/32"]', "SSL_CERT_FILE": str(files.ca),
    })
    pages: list[Any] = []
    try:
        vault = Vault(Ledger(hub.admin, "user:ops", hub.clock), parse_key(key, "test"))
        for platform, account, secret in (("instagram", IG, {"accessToken": "good-token"}), ("threads", THREADS, {"accessToken": "good-token"}),
                                          ("bluesky", shop.handle, {"appPassword": shop.password})):
            meta = vault.put(platform, account, secret)
            head = hub.admin.get("vault", meta["id"])  # as the vault tick leaves it: verified
            hub.admin.put("vault", {**{k: v for k, v in head.items() if not k.startswith("_")}, "status": "ok"}, meta["id"],
                          actor="admin", if_rev=head["_rev"])
        tokens = {name: hub.token(name) for name in ("maya", "ed", "ann")}
        set_role(hub.admin, "ed", "editor", clock=hub.clock)
        set_role(hub.admin, "ann", "approver", clock=hub.clock)
        for name in tokens:
            set_zone(hub.admin, name, "America/New_York", clock=hub.clock)
        maya, ed, ann = (signed_in(browser, hub, tokens[n]) for n in ("maya", "ed", "ann"))
        pages += [maya, ed, ann]

        # Monday: the month's calendar from the spreadsheet, two rows wrong
        maya.goto(hub.url + "/console/publish/import")
        maya.set_input_files("#import-file", files=[{"name": "december.csv", "mimeType": "text/csv", "buffer": rows().encode()}])
        maya.wait_for_function("() => document.getElementById('import-content').value.includes('day-10')")
        maya.click("button[value=import]")
        maya.locator("#import-report h2", has_text="Imported").wait_for()
        assert maya.locator("#import-counts").inner_text().startswith("8 new, 0 updated, 0 unchanged, 2 invalid")
        assert "an Instagram post needs an image" in maya.locator("#import-row-5").inner_text()
        assert "tiktok" in maya.locator("#import-row-9").inner_text()
        assert {d.get("post") for d in by_time(hub.admin)} == {f"day-{n}" for n in range(1, 11) if n not in (4, 8)}

        # Tuesday: Ed writes one post for three networks, for tomorrow (New York), at a time of day 90 to 150 s
        # ahead (the form takes whole minutes): the margin for the steps up to Maya's move, which must still
        # find it in the future; the test then waits for that time
        at = (datetime.now(NY) + timedelta(seconds=90 + 59)).replace(second=0, microsecond=0)
        day, planned = at.date(), at + timedelta(days=1)
        ed.goto(hub.url + "/console/publish/compose")
        assert ed.input_value("#tz") == "America/New_York"  # the person's zone, not the browser's
        for network, account in (("ig", IG), ("threads", THREADS), ("bsky", shop.handle)):
            ed.check(f"#to-{network}")
            ed.select_option(f"#account-{network}", account)
        ed.fill("#slug", SLUG)
        ed.fill("#caption", "The winter box is here")
        ed.fill("#caption-ig", "The winter box is here #winter #box")
        ed.fill("#caption-threads", "The winter box is here, on Threads")
        ed.fill("#caption-bsky", "The winter box is here, on Bluesky")
        ed.fill("#image-1", f"{files.url}/box.jpg")
        ed.fill("#alt-1", "The winter box, closed")
        ed.fill("#firstComment", COMMENT)
        ed.fill("#at", planned.strftime("%Y-%m-%dT%H:%M"))
        ed.click("button[value=draft]")
        said(ed, "saved as a draft")
        assert statuses(hub) == {"ig": "draft", "threads": "draft", "bsky": "draft"}
        assert {d["at"] for d in variants_of(hub.admin, SLUG)} == {planned.isoformat()}
        assert ed.input_value("#at") == planned.strftime("%Y-%m-%dT%H:%M")  # the saved draft, back in New York's time
        ed.click("button[value=submit]")
        said(ed, "")
        assert statuses(hub) == {"ig": "in-review", "threads": "in-review", "bsky": "in-review"}

        # Ann approves it from the review queue
        ann.goto(hub.url + "/console/publish/review")
        card = ann.locator(f"section[data-post='{SLUG}']")
        assert "The winter box is here, on Threads" in card.inner_text()
        times_in_new_york(ann, "review")
        card.locator("button", has_text="Approve").click()
        said(ann, "approved")
        assert statuses(hub) == {"ig": "approved", "threads": "approved", "bsky": "approved"}

        # Maya sees it tomorrow on the week's calendar and drags it to today (its time of day kept)
        view = "week" if day.weekday() < 6 else "month"  # both days on one grid (a Sunday's tomorrow is next week)
        maya.goto(f"{hub.url}/console/publish/calendar?view={view}&start={day.isoformat()}")
        entry = f"#post-{SLUG}"
        assert maya.locator(f"#day-{planned.date().isoformat()} {entry}").count() == 1
        assert times_in_new_york(maya, "calendar") >= 1
        maya.drag_and_drop(f"{entry} .cal-caption", f"#day-{day.isoformat()}")
        maya.wait_for_url("**done=*")
        assert f"{SLUG} moved to {day.isoformat()} {at.strftime('%H:%M')} (America/New_York)" in maya.inner_text("#flash")
        assert maya.locator(f"#day-{day.isoformat()} {entry}").count() == 1
        assert {d["at"] for d in variants_of(hub.admin, SLUG)} == {at.isoformat()}
        times_in_new_york(maya, "calendar, moved")

        # the tick publishes it at its new time on every network, then its first comment, once each
        ids = [f"ig:{IG}:{SLUG}", f"threads:{THREADS}:{SLUG}", f"bsky:{shop.handle}:{SLUG}"]
        wait = max(0.0, at.timestamp() - time.time()) + 180
        docs = wait_for("every network published and commented", lambda: (
            found := [hub.admin.get("requests", i) for i in ids]) and all(d["status"] == "commented" for d in found) and found,
            timeout=wait)
        ig_doc, th_doc, bsky_doc = docs
        assert all(d["publishedAt"] >= at.timestamp() * 1000 for d in docs)  # not before its new time
        assert [c.text for c in instagram.comments] == [COMMENT] and instagram.comments[0].id == ig_doc["commentId"]
        assert [m.caption for m in threads.replies(to=th_doc["mediaId"])] == [COMMENT]
        assert instagram.calls["publish"] == 1 and threads.calls["publish"] == 1 and threads.calls["reply-publish"] == 1
        net.process_all()
        thread = net.query("app.bsky.feed.getPostThread", {"uri": bsky_doc["recordUri"], "depth": 2})["thread"]
        assert thread["post"]["record"]["text"] == "The winter box is here, on Bluesky"
        assert thread["post"]["embed"]["images"][0]["alt"] == "The winter box, closed"
        (reply,) = thread["replies"]
        assert reply["post"]["record"]["text"] == COMMENT and reply["post"]["uri"] == bsky_doc["commentUri"]

        # what published looks like to Maya, every time in her zone: the calendar, the queue, a document page
        maya.reload()
        assert "commented" in maya.locator(entry).inner_text() or "done" in maya.locator(entry).inner_text()
        times_in_new_york(maya, "calendar, published")
        maya.goto(hub.url + "/console/publish")
        for doc_id in ids:  # the queue: each network's row, published with its first comment
            assert maya.locator(f"tr[data-status='commented'] a[href='{doc_url('requests', doc_id)}']").count() == 1
        assert times_in_new_york(maya, "queue") >= 1
        maya.goto(hub.url + doc_url("requests", ids[2]))
        assert bsky_doc["permalink"] in maya.content()
        assert times_in_new_york(maya, "document page") >= 1
        maya.screenshot(path=str(ARTIFACTS / "week-document.png"), full_page=True)
        assert len(instagram.comments) == 1 and len(threads.replies()) == 1  # still once each
    finally:
        for page in pages:
            page.context.close()
        hub.stop()
        ig_server.stop()
        th_server.stop()
        files.stop()
    assert shop.password not in "".join(hub.stderr)
