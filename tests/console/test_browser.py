"""The console in real headless Chromium (Debian's `chromium`, driven by Playwright with
``executable_path``; nothing is downloaded), against real `skyhub run` processes: signing in,
queueing a carousel through the form and watching it reach ``done`` live against a local
stand-in for Meta, a bad input's sentence, a job moving live, NEEDS RE-AUTH cleared by a paste
whose secret the page never receives back, retry, a forged POST, sign-out. Every view is
checked with axe-core (vendored) for serious and critical violations, and screenshotted into
``tests/console/artifacts/``. Forms are filled and sent from the keyboard."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hub.console.web import doc_url
from ledger import SYSTEM, Ledger
from ledger.lease import claim, finish
from publishers.queue import new_request, queue
from skyhub_testkit.fakemeta import TOKEN_EXPIRED_190, FakeMeta
from skyhub_testkit.hub import Hub
from vault import Vault, parse_key

from .chromium import ARTIFACTS, AXE, AXE_JS

pytestmark = pytest.mark.browser
IG = "17841400000000000"


class Meta(FakeMeta):
    """The publishers' stand-in for Meta, answering the vault's ``GET /me`` check as well."""

    def answer(self, method: str, host: str, path: str, args: dict[str, str], auth: str) -> Any:
        if path.rstrip("/").endswith("/me"):
            if auth.removeprefix("Bearer ") not in self.tokens:
                return TOKEN_EXPIRED_190
            return 200, {"id": IG, "user_id": IG, "username": "shop"}
        return super().answer(method, host, path, args, auth)


class Page:
    """One signed-in tab: keyboard sign-in, axe on every view, a screenshot of each, and every
    response body the page received (to look for secrets)."""

    def __init__(self, browser: Any, hub: Hub, name: str, width: int = 1280, height: int = 900) -> None:
        self.hub = hub
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.bodies: list[str] = []
        self.page.on("response", self._keep)
        self.name = name

    def _keep(self, response: Any) -> None:
        if "text/event-stream" in (response.headers.get("content-type") or ""):
            return
        try:
            self.bodies.append(response.body().decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - a redirect or an aborted load has no body
            pass

    def sign_in(self, token: str) -> None:
        p = self.page
        p.goto(self.hub.url + "/")
        assert "/console/sign-in" in p.url
        self.check("sign-in")
        p.focus("#token")
        p.keyboard.type(token)
        p.keyboard.press("Enter")
        p.wait_for_url(self.hub.url + "/")

    def check(self, view: str) -> None:
        """No serious or critical axe violation on this view; a screenshot of it."""
        p = self.page
        if not p.evaluate("() => typeof window.axe !== 'undefined'"):
            p.route(self.hub.url + AXE, lambda route: route.fulfill(body=AXE_JS, content_type="text/javascript"))
            p.add_script_tag(url=self.hub.url + AXE)
        found = p.evaluate("""async () => {
            const r = await axe.run(document, {resultTypes: ['violations']});
            return r.violations.filter(v => ['serious', 'critical'].includes(v.impact))
                .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
        }""")
        p.screenshot(path=str(ARTIFACTS / f"{self.name}-{view}.png"), full_page=True)
        assert found == [], json.dumps(found, indent=1)

    def mark(self) -> None:
        self.page.evaluate("() => { window.__noReload = true; }")

    def not_reloaded(self) -> bool:
        return bool(self.page.evaluate("() => window.__noReload === true"))

    def close(self) -> None:
        self.context.close()


def _hub(tmp_path: Path, key: str, **env: str) -> Hub:
    return Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, env={"SKYHUB_VAULT_KEY": key, **env})


@pytest.fixture
def meta() -> Iterator[tuple[Meta, Any]]:
    m = Meta(SYSTEM.now_ms)
    server = m.serve()
    yield m, server
    server.stop()


def test_queue_a_carousel_from_the_form_and_watch_it_reach_done_live(browser, tmp_path, key_text, meta):
    fake, server = meta
    hub = _hub(tmp_path, key_text, SKYHUB_PLATFORMS__INSTAGRAM_URL=server.url, SKYHUB_PLATFORMS__TIMEOUT="3s",
               SKYHUB_PUBLISH__EVERY="1s", SKYHUB_VAULT__EVERY="1s", SKYHUB_JOBS__ENABLED="false")
    tab = Page(browser, hub, "publish-flow")
    try:
        p = tab.page
        tab.sign_in(hub.token("maya"))
        tab.check("overview")
        p.goto(hub.url + "/console/credentials")
        p.select_option("#cred-platform", "instagram")
        p.focus("#cred-account")
        p.keyboard.type(IG)
        p.keyboard.press("Tab")
        p.keyboard.type("good-token")  # the secret field follows the account
        p.check("input[name=verify]")
        p.focus("#secret")
        p.keyboard.press("Enter")
        p.wait_for_url("**/console/credentials?done=*")
        assert p.locator(f"#cred-instagram-{IG} .status").inner_text() == "ok"
        tab.check("credentials")

        p.goto(hub.url + "/console/publish")
        p.focus("#platform")  # Instagram, the first radio
        p.keyboard.press("Space")
        for field, text in [("#account", IG), ("#slug", "launch"), ("#caption", "It's here #launch"),
                            ("#image-1", "https://cdn.example.org/box.jpg"), ("#alt-1", "The box, closed"),
                            ("#image-2", "https://cdn.example.org/open.jpg"), ("#alt-2", "The box, open")]:
            p.focus(field)
            p.keyboard.type(text)
        p.focus("#slug")
        p.keyboard.press("Enter")
        p.wait_for_url("**/console/publish?done=*")
        assert f"ig:{IG}:launch queued (pending)" in p.locator("#flash").inner_text()
        tab.check("publishing")
        tab.mark()
        row = p.locator(f"#row-ig-{IG}-launch")
        row.locator("td.status", has_text="done").wait_for(timeout=60_000)
        link = row.locator("a.permalink")
        assert link.get_attribute("href", timeout=5000).startswith("https://www.instagram.com/p/")
        assert tab.not_reloaded(), "the row changed by reloading the page, not live"
        assert fake.calls["create"] == 2 and fake.calls["carousel"] == 1 and fake.calls["publish"] == 1
        doc = hub.admin.get("requests", f"ig:{IG}:launch")
        assert doc["status"] == "done" and hub.admin.history("requests", doc["_id"])[0].actor == "user:maya"
        tab.check("publishing-done")
        p.goto(hub.url + doc_url("requests", doc["_id"]))
        assert p.locator("#history li").count() >= 4
        tab.check("document")
        for body in tab.bodies:
            assert "good-token" not in body
    finally:
        tab.close()
        hub.stop()


def test_a_bad_input_shows_its_sentence_next_to_the_field_and_writes_nothing(browser, tmp_path, key_text):
    hub = _hub(tmp_path, key_text)
    tab = Page(browser, hub, "bad-input")
    try:
        p = tab.page
        tab.sign_in(hub.token("maya"))
        p.goto(hub.url + "/console/publish")
        p.focus("#platform")
        p.keyboard.press("Space")
        for field, text in [("#account", IG), ("#slug", "oops"), ("#image-1", "https://cdn.example.org/box.png"), ("#alt-1", "A box")]:
            p.focus(field)
            p.keyboard.type(text)
        p.keyboard.press("Enter")
        error = p.locator("#image-1-error")
        error.wait_for()
        assert "image 1 must be a JPEG (Instagram takes JPEG only): its URL should end in .jpg or .jpeg" in error.inner_text()
        field = p.locator("#image-1")
        assert field.get_attribute("aria-invalid") == "true" and "image-1-error" in field.get_attribute("aria-describedby")
        # the summary takes focus: the page's script moves it once it runs, which on a busy machine can be after
        # the error is in the page, so wait for the move (it fails if focus never goes there)
        p.wait_for_function("() => document.activeElement && document.activeElement.id === 'error-summary'")
        assert p.locator("#slug").input_value() == "oops"
        tab.check("publishing-errors")
        assert hub.admin.query("requests", "kind", "publish-request").docs == []
    finally:
        tab.close()
        hub.stop()


def test_a_job_moves_pending_running_done_live_without_reload(browser, tmp_path, key_text):
    hub = _hub(tmp_path, key_text, SKYHUB_JOBS__ENABLED="false")  # the test is the worker, one step at a time
    tab = Page(browser, hub, "job")
    try:
        p = tab.page
        tab.sign_in(hub.token("ana"))
        tab.mark()

        def count(status: str) -> str:
            cell = p.locator(f'#machines svg[data-machine="jobs/job"] text.count[data-state="{status}"]')
            return str(cell.text_content()).split()[0]

        job = hub.admin.put("jobs", {"type": "job", "status": "pending", "input": {"n": 1}}, actor="user:ana")
        p.locator('[data-count="jobs/job/pending"]').wait_for()
        assert count("pending") == "1"
        worker = Ledger(hub.admin, "handler:on_change", hub.clock)
        started = time.monotonic()
        held = claim(worker, "jobs", job, "running", 30_000, hub.clock.now_ms())
        p.locator('[data-count="jobs/job/running"]').wait_for()
        assert time.monotonic() - started < 5 and count("running") == "1" and count("pending") == "0"
        tab.check("overview-running")
        finish(worker, "jobs", held, "done", result={"ok": True})
        p.locator('[data-count="jobs/job/done"]').wait_for()
        assert count("done") == "1" and count("running") == "0"
        assert tab.not_reloaded()
        p.goto(hub.url + "/console/db/jobs?status=done")
        tab.check("status-list")
        p.goto(hub.url + "/console/activity")
        p.locator("svg.chart").first.wait_for()
        tab.check("activity")
        p.goto(hub.url + "/console/mentions")
        tab.check("mentions")
    finally:
        tab.close()
        hub.stop()


def test_needs_reauth_shows_first_and_a_paste_clears_it_without_the_secret_coming_back(browser, tmp_path, key_text):
    hub = _hub(tmp_path, key_text)
    maya = Ledger(hub.admin, "user:maya", hub.clock)
    Vault(maya, parse_key(key_text, "test")).put("instagram", IG, {"accessToken": "old-token"})
    head = hub.admin.get("vault", f"instagram:{IG}")
    hub.admin.put("vault", {**head, "status": "ok"}, actor="admin")
    queue(maya, new_request("ig", account=IG, slug="later", images=[{"url": "https://cdn.example.org/a.jpg", "alt": "A"}],
                            now_ms=hub.clock.now_ms()))
    tab = Page(browser, hub, "reauth")
    canary = "CANARY-" + "7" * 24
    try:
        p = tab.page
        tab.sign_in(hub.token("ana"))
        tab.mark()
        head = hub.admin.get("vault", f"instagram:{IG}")
        Vault(Ledger(hub.admin, "tick:publish", hub.clock), parse_key(key_text, "test")).report_dead(
            head["_id"], "Instagram answered 190: Error validating access token")
        first = p.locator("#attention li").first
        first.locator(".tag", has_text="needs re-auth").wait_for()
        assert f"instagram:{IG} NEEDS RE-AUTH" in first.inner_text() and "Error validating access token" in first.inner_text()
        assert tab.not_reloaded()
        tab.check("overview-reauth")
        first.locator("a.action").focus()
        p.keyboard.press("Enter")
        p.wait_for_url(f"**/console/credentials?platform=instagram&account={IG}")
        assert "NEEDS RE-AUTH" in p.locator(f"#cred-instagram-{IG}").inner_text()
        # the form is filled in for that credential and its secret field has the focus: type, Enter
        assert p.locator("#cred-platform").input_value() == "instagram" and p.locator("#cred-account").input_value() == IG
        assert p.evaluate("() => document.activeElement.id") == "secret"
        p.keyboard.type(canary)
        p.keyboard.press("Enter")
        p.wait_for_url("**/console/credentials?done=*")
        assert p.locator(f"#cred-instagram-{IG} .status").inner_text() == "unverified"
        tab.check("credentials-pasted")
        p.goto(hub.url + "/")
        assert "NEEDS RE-AUTH" not in p.locator("#attention").inner_text()
        p.goto(hub.url + doc_url("vault", f"instagram:{IG}"))
        tab.check("document-vault")
        for url in ("/", "/console/credentials", "/console/activity"):
            p.goto(hub.url + url)
            assert canary not in p.content()
        assert tab.bodies and not [b for b in tab.bodies if canary in b]
        doc = hub.admin.get("vault", f"instagram:{IG}")
        assert doc["version"] == 2 and doc["needsReauth"] is False
    finally:
        tab.close()
        hub.stop()


def test_retry_a_failed_request_a_forged_post_and_sign_out(browser, tmp_path, key_text):
    hub = _hub(tmp_path, key_text)
    maya = Ledger(hub.admin, "user:maya", hub.clock)
    doc, _ = queue(maya, new_request("threads", account="29", slug="f", caption="x", now_ms=hub.clock.now_ms()))
    hub.admin.put("requests", {**doc, "status": "error", "lastError": "Threads answered 400", "attempts": 3}, actor="admin")
    tab = Page(browser, hub, "retry")
    try:
        p = tab.page
        tab.sign_in(hub.token("maya"))
        p.goto(hub.url + "/console/publish?status=error")
        assert "Threads answered 400" in p.locator("#row-threads-29-f").inner_text()
        p.locator('button[aria-label="Retry threads:29:f"]').focus()
        p.keyboard.press("Enter")
        p.wait_for_url("**/console/publish?done=*")
        assert p.locator("#row-threads-29-f td.status").inner_text() == "pending"
        assert hub.admin.get("requests", "threads:29:f")["status"] == "pending"
        forged = p.evaluate("""async () => {
            const r = await fetch('/console/publish', {method: 'POST', body: new URLSearchParams(
                {platform: 'threads', account: '29', slug: 'forged', caption: 'no'})});
            return [r.status, await r.text()];
        }""")
        assert forged[0] == 403 and "CSRF" in forged[1]
        assert [d["_id"] for d in hub.admin.query("requests", "kind", "publish-request").docs] == ["threads:29:f"]
        p.locator("header button", has_text="Sign out").focus()
        p.keyboard.press("Enter")
        p.wait_for_url("**/console/sign-in")
        p.goto(hub.url + "/console/publish")
        assert p.url.startswith(hub.url + "/console/sign-in?next=")
        assert p.locator("#token").count() == 1
    finally:
        tab.close()
        hub.stop()


def test_on_a_phone_a_post_that_needs_a_person_fits_and_is_resolved_from_the_keyboard(browser, tmp_path, key_text):
    hub = _hub(tmp_path, key_text)
    slug = "same-caption-post-with-a-long-slug"
    doc, _ = queue(Ledger(hub.admin, "user:ana", hub.clock), new_request("threads", account="29", slug=slug, caption="Same",
                                                             now_ms=hub.clock.now_ms()))
    candidates = [{"mediaId": f"1790000000000000{n}", "permalink": f"https://www.threads.net/@shop/post/{n}/",
                   "timestamp": f"2026-12-01T09:00:0{n}+0000"} for n in (1, 2)]
    hub.admin.put("requests", {**doc, "status": "needs-person", "candidates": candidates, "carouselId": "c1",
                               "lastError": "Threads published this post, but 2 recent post(s) have its caption"}, actor="admin")
    tab = Page(browser, hub, "phone-needs-person", width=390, height=844)
    try:
        p = tab.page
        tab.sign_in(hub.token("ana"))
        assert p.evaluate("document.documentElement.scrollWidth") <= 390
        p.goto(hub.url + doc_url("requests", f"threads:29:{slug}"))
        tab.check("document")
        # long JSON values and links in the fields and the revision history wrap: nothing scrolls sideways
        assert p.evaluate("document.documentElement.scrollWidth") <= 390
        for _ in range(60):
            p.keyboard.press("Tab")
            if p.evaluate("document.activeElement.textContent.startsWith('It became 17900000000000002')"):
                break
        else:
            raise AssertionError("the second candidate's button is not reachable with Tab")
        p.keyboard.press("Enter")
        p.wait_for_url("**?done=*")
        done = hub.admin.get("requests", f"threads:29:{slug}")
        assert done["status"] == "done" and done["mediaId"] == "17900000000000002"
    finally:
        tab.close()
        hub.stop()


def test_the_api_docs_render_from_the_hub_alone_under_a_strict_policy(browser, tmp_path):
    hub = Hub(f"sqlite:///{tmp_path}/hub.db", tmp_path, jobs=False)
    try:
        for width, height in ((1280, 900), (390, 844)):
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            requested: list[str] = []
            problems: list[str] = []
            page.on("request", lambda r, seen=requested: seen.append(r.url))
            page.on("console", lambda m, bad=problems: bad.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e, bad=problems: bad.append(str(e)))
            page.goto(hub.url + "/docs")
            page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
            assert "skyhub" in page.inner_text(".swagger-ui .info .title")
            page.wait_for_selector('[data-path="/v1/publish"]', timeout=30_000)
            assert [u for u in requested if not u.startswith(hub.url)] == []  # nothing from another host
            assert problems == []  # no script error, no content-security-policy violation
            context.close()
    finally:
        hub.stop()
