"""Every console view at a phone's size (390 x 844) and a desktop's (1366 x 768), in Debian's
chromium, on a hub seeded with the worst a hub holds: 50-row lists, ids of over 200 characters, a
caption of 2,000 characters, unbroken strings, JSON values, a failed job with a long traceback,
credentials with long account names. On every view, at both sizes: the page never scrolls
sideways (``document.documentElement.scrollWidth`` is at most the window's width), axe-core finds
no violation of any impact, and a full-page screenshot goes to ``tests/console/artifacts/``
(``layout-<size>-<view>.png``); on the phone, every visible interactive element (links, buttons,
form controls, the navigation; a checkbox or a radio through the label that holds it) is at least
44 x 44 px."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hub.console.web import doc_url
from ledger import Conflict, Ledger
from ledger.pause import pause
from publishers.queue import new_request, queue
from skyhub_testkit.hub import Hub
from vault import Vault, new_key_text, parse_key

from .chromium import ARTIFACTS, AXE, AXE_JS

pytestmark = pytest.mark.browser

SIZES = {"phone": (390, 844), "desktop": (1366, 768)}
TOUCH = 44  # px, each side: the smallest touch target on the phone

# worst cases: a handle of 120 characters (each label under 63) and slugs of 95, so post ids pass 200
HANDLE = "the-corner-bookshop-and-cafe-down-by-the-old-harbour-wall.the-shops-of-the-old-town-and-the-new-town-together.bsky.social"
SLUG = "spring-launch-of-the-new-collection-with-a-slug-so-long-that-nobody-would-ever-type-it-by-h-{:02d}"
IG = "17841400000000123"
UNBROKEN = "x" * 40 + "-no-spaces-" + "y" * 240  # 291 characters without a place to break
CAPTION = ("Our spring collection is here, and every piece of it was made by hand in our workshop. " * 22)[:1750] + " " + UNBROKEN
TRACEBACK = "Traceback (most recent call last):\n" + "".join(
    f'  File "/opt/skyhub/.venv/lib/python3.11/site-packages/some/deeply/nested/package/module_{i}.py", line {i * 7}, in handler_{i}\n'
    f"    result = call_the_next_layer(request, settings, context, retries={i}, timeout=30)\n" for i in range(30)
) + "RuntimeError: the worker could not reach https://builder.example.org/" + "z" * 200
JOB_ID = "nightly-rebuild-of-the-catalogue-for-every-shop-in-the-network-" * 4  # 252 characters
CRED_ACCOUNT = "the-longest-account-name-a-shop-ever-chose-for-its-publishing-{:02d}.bsky.social-and-more-characters-here"
DEFAULT_BSKY = "default-shop.bsky.social"
BOT = "ourbot.bsky.social"


@dataclass
class Seeded:
    hub: Hub
    token: str
    post: str  # the Instagram post with the 2,000-character caption
    choice: str  # a post that needs a person to say which media it became (a button per candidate)
    job: str
    credential: str


def _edit(hub: Hub, db: str, doc_id: str, **fields: Any) -> None:
    """A field change as admin, read again when the hub's tick wrote the document meanwhile."""
    for _ in range(50):
        doc = hub.admin.get(db, doc_id)
        try:
            hub.admin.put(db, {**{k: v for k, v in doc.items() if not k.startswith("_")}, **fields}, doc_id, actor="admin",
                          if_rev=doc["_rev"])
            return
        except Conflict:
            continue
    raise AssertionError(f"{db}/{doc_id} kept changing")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    found = seed(tmp_path_factory.mktemp("layout"))
    try:
        yield found
    finally:
        found.hub.stop()


def seed(tmp: Path) -> Seeded:
    """A hub with the worst cases in every list (see the module docstring)."""
    key_text = new_key_text()
    hub = Hub(f"sqlite:///{tmp}/skyhub.db", tmp, jobs=False, env={
        "SKYHUB_VAULT_KEY": key_text, "SKYHUB_PUBLISH__EVERY": "1s", "SKYHUB_VAULT__EVERY": "1h",
        "SKYHUB_PUBLISH__ACCOUNTS": json.dumps({"bsky": DEFAULT_BSKY}), "SKYHUB_BOT__HANDLE": BOT,
    })
    try:
        admin, now = hub.admin, hub.clock.now_ms()
        maya = Ledger(admin, "user:maya", hub.clock)
        posts = []
        for n in range(52):  # more than a page of the queue, every id over 200 characters
            doc, _ = queue(maya, new_request("bsky", account=HANDLE, slug=SLUG.format(n), caption=f"Post {n}: {UNBROKEN[:200]}",
                                             now_ms=now))
            posts.append(doc["_id"])
        assert len(posts[0]) > 200
        post, _ = queue(maya, new_request("ig", account=IG, slug="spring", caption=CAPTION, now_ms=now, images=[
            {"url": "https://cdn.example.org/" + "very/long/path/" * 12 + "photo.jpg", "alt": "A shelf of hand-made cups " * 8}]))
        assert len(post["caption"]) >= 2000
        deadline = time.monotonic() + 120  # the hub's publish tick holds them: no credential for either account
        while sum(1 for p in posts if "held" in admin.get("requests", p)) < len(posts):
            assert time.monotonic() < deadline, "the publish tick did not hold the posts"
            time.sleep(0.2)
        for p in posts[:5]:
            _edit(hub, "requests", p, status="error", attempts=3, lastError="Bluesky answered 400 InvalidRequest: " + UNBROKEN, held=None)
        _edit(hub, "requests", posts[5], status="done", held=None, permalink=f"https://bsky.app/profile/{HANDLE}/post/3l" + "k" * 60)
        _edit(hub, "requests", posts[6], status="needs-person", held=None, candidates=[
            {"mediaId": "17900000000000001" * 3, "timestamp": "2026-12-01T09:00:01+0000"},
            {"mediaId": "17900000000000002", "timestamp": "2026-12-01T09:00:02+0000", "permalink": "https://bsky.app/" + UNBROKEN}],
              lastError="Bluesky has two recent posts with this text: " + UNBROKEN)

        for n in range(55):  # a failed job with a long traceback, 55 of them, ids of 250 characters
            admin.put("jobs", {"type": "job", "status": "failed", "attempts": 3, "lastError": TRACEBACK,
                               "input": {"shop": HANDLE, "pages": list(range(40)), "note": UNBROKEN}}, f"{JOB_ID}{n:02d}", actor="admin")
        for n in range(55):  # mention builds that failed, with their build logs
            admin.put("requests", {"kind": "mention", "status": "build-failed", "uri": f"at://did:plc:{'a' * 24}/app.bsky.feed.post/{n}",
                                   "cid": "c", "authorDid": "did:plc:" + "b" * 24, "authorHandle": HANDLE,
                                   "text": f"@{BOT} make me a page for {UNBROKEN}", "attempts": 3, "lastError": TRACEBACK},
                      f"did:plc:{'a' * 24}:{'3l' + 'm' * 40}{n:02d}", actor="admin")

        vault = Vault(maya, parse_key(key_text, "test"))
        for n in range(50):  # long account names, a few of them dead
            meta = vault.put(("bluesky", "threads", "instagram")[n % 3], CRED_ACCOUNT.format(n), {"appPassword": "a", "accessToken": "a"}
                             if n % 3 == 0 else {"accessToken": "a"})
            dead = n % 7 == 0
            _edit(hub, "vault", meta["id"], status="needs-reauth" if dead else "ok", needsReauth=dead,
                  lastError=("Meta answered 190: Error validating access token: " + UNBROKEN) if dead else None,
                  expiresAt=now + 86_400_000 * 50)
        review_post(maya, hub)
        operator = Ledger(admin, "admin", hub.clock)  # the overview's Paused table at its widest: a long account, a long why
        pause(operator, f"bsky:{HANDLE}", "Waiting for the shop to confirm the new handle: " + UNBROKEN)
        pause(operator, "tick:reply", "Replies held while the bot's wording is reviewed")
        return Seeded(hub, hub.token("maya"), post["_id"], posts[6], f"{JOB_ID}00", f"bluesky:{CRED_ACCOUNT.format(0)}")
    except BaseException:
        hub.stop()
        raise


REVIEW_SLUG = "spring-launch-for-three-networks-with-a-name-as-long-as-a-name-may-be-" + "z" * 30  # 100 characters


def review_post(maya: Ledger, hub: Hub) -> None:
    """A post for three networks in review: Instagram's long caption, long accounts, a long comment (compose, review)."""
    from publishers.posts import comment, submit_for_review
    from publishers.queue import PostIn, VariantIn, submit_post

    image = [{"url": "https://cdn.example.org/" + "very/long/path/" * 12 + "cups.jpg", "alt": "A shelf of hand-made cups " * 8}]
    post = PostIn(variants=[VariantIn("ig", IG, caption=CAPTION), VariantIn("threads", CRED_ACCOUNT.format(1), caption=UNBROKEN[:480]),
                            VariantIn("bsky", HANDLE, caption=UNBROKEN[:290])],
                  images=image, first_comment="Shop: https://shop.example.org/" + UNBROKEN[:200], slug=REVIEW_SLUG, draft=True)
    submit_post(maya, _Settings(), post, now_ms=hub.clock.now_ms())
    submit_for_review(maya, REVIEW_SLUG, now_ms=hub.clock.now_ms())
    comment(maya, REVIEW_SLUG, "Is the link right? " + UNBROKEN, now_ms=hub.clock.now_ms())


class _Settings:
    """The hub's publish settings as the seed needs them (the default accounts given to the hub above)."""

    def section(self, name: str) -> Any:
        from publishers.settings import PublishSettings

        return PublishSettings(accounts={"bsky": DEFAULT_BSKY}) if name == "publish" else None  # [fetch]: its defaults


def _bad_compose(page: Any) -> None:
    """The compose page sent with mistakes, with long captions: each sentence next to its field, the form kept."""
    page.goto(page.url.split("/console")[0] + "/console/publish/compose")
    page.fill("#caption", CAPTION)
    page.check("#to-threads")
    page.fill("#image-1", "ftp://" + UNBROKEN)
    page.fill("#alt-2", "an alt text without its image " + UNBROKEN)
    page.click("button[value=draft]")
    page.locator("#error-summary").wait_for()


def _bad_form(page: Any) -> None:
    """The publishing form sent with mistakes: each sentence next to its field."""
    page.goto(page.url.split("/console")[0] + "/console/publish")
    page.fill("#slug", "not a slug " + UNBROKEN)
    page.fill("#image-1", "ftp://" + UNBROKEN)
    page.focus("#slug")
    page.keyboard.press("Enter")
    page.locator("#error-summary").wait_for()


VIEWS: dict[str, str | Callable[[Any], None]] = {
    "overview": "/",
    "list-jobs": "/console/db/jobs?status=failed",
    "list-jobs-oldest-page-2": "/console/db/jobs?status=failed&sort=oldest&page=2",  # the jump's page, 250-character ids
    "list-jobs-by-id": "/console/db/jobs?status=failed&sort=id",
    "list-posts": "/console/db/requests?status=pending",
    "document-post": "{post}",
    "document-needs-person": "{choice}",
    "document-job": "{job}",
    "document-credential": "{credential}",
    "activity": "/console/activity",
    "credentials": "/console/credentials",
    "credentials-paste": f"/console/credentials?platform=bluesky&account={HANDLE}",
    "mentions": "/console/mentions?status=build-failed",
    "publishing": "/console/publish",
    "publishing-errors": _bad_form,
    "compose": "/console/publish/compose",
    "compose-edit": f"/console/publish/compose/{REVIEW_SLUG}",
    "compose-errors": _bad_compose,
    "review": "/console/publish/review",
    "calendar-week": "/console/publish/calendar",  # this week: the 52 posts of today, unbroken captions, ids over 200 characters
    "calendar-month": "/console/publish/calendar?view=month",
    "zone": "/console/publish/zone",
    "import": "/console/publish/import",
    "search": "/console/search?q=make+page",  # every database: 55 mentions with long unbroken text
    "search-jobs": "/console/search?db=jobs&q=nightly-rebuild",  # one database, a page of 50 ids of 250 characters
    "error": "/console/doc/jobs/" + "no-such-job-" * 20,
    "bulk-retry-jobs": "/console/bulk?db=jobs&action=retry&status=failed",  # the confirm page: a sample with a long traceback
    "audit": "/console/audit",
}


class Tab:
    """One browser context at one size, signed in once."""

    def __init__(self, browser: Any, seeded: Seeded, size: str) -> None:
        width, height = SIZES[size]
        self.size, self.width = size, width
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.url = seeded.hub.url
        self.page.route(self.url + AXE, lambda route: route.fulfill(body=AXE_JS, content_type="text/javascript"))

    def sign_in(self, token: str) -> None:
        self.page.goto(self.url + "/console/sign-in")
        self.page.fill("#token", token)
        self.page.press("#token", "Enter")
        self.page.wait_for_url(self.url + "/")

    def measure(self, view: str) -> list[str]:
        """What is wrong with the view on screen now, in sentences (none: it is right)."""
        p = self.page
        p.wait_for_load_state("load")
        problems = []
        wide = p.evaluate("() => document.documentElement.scrollWidth")
        if wide > self.width:
            problems.append(f"the page scrolls sideways: {wide} px wide in a {self.width} px window; widest: "
                            + json.dumps(p.evaluate(WIDEST, self.width)))
        if self.size == "phone":
            small = p.evaluate(SMALL_TARGETS, TOUCH)
            if small:
                problems.append(f"{len(small)} touch target(s) under {TOUCH} px: " + json.dumps(small[:12], indent=1))
        if not p.evaluate("() => typeof window.axe !== 'undefined'"):
            p.add_script_tag(url=self.url + AXE)
        found = p.evaluate("""async () => {
            const r = await axe.run(document, {resultTypes: ['violations']});
            return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                           nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
        }""")
        if found:
            problems.append("axe-core: " + json.dumps(found, indent=1))
        p.screenshot(path=str(ARTIFACTS / f"layout-{self.size}-{view}.png"), full_page=True)
        return problems

    def close(self) -> None:
        self.context.close()


# every visible link, button and form control whose box is under the size (a checkbox or a radio: the label around it)
SMALL_TARGETS = """(min) => {
    const out = [];
    const seen = new Set();
    const all = document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]:not([tabindex="-1"])');
    for (const el of all) {
        let target = el;
        if (el.matches('input[type=checkbox], input[type=radio]')) target = el.closest('label') || el;
        if (seen.has(target)) continue;
        seen.add(target);
        const r = target.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;                    // not rendered (hidden, display: none)
        if (getComputedStyle(target).visibility === 'hidden') continue;
        if (r.right <= 0 || r.bottom <= 0) continue;                        // off the page until focused (the skip link)
        if (r.width < min || r.height < min) {
            out.push({what: target.tagName.toLowerCase() + (target.id ? '#' + target.id : '') + (target.className && typeof target.className === 'string' ? '.' + target.className.split(' ').join('.') : ''),
                      text: (target.textContent || target.getAttribute('aria-label') || '').trim().slice(0, 40),
                      width: Math.round(r.width * 10) / 10, height: Math.round(r.height * 10) / 10});
        }
    }
    return out;
}"""

# the elements that reach past the window's right edge, the deepest first (what makes the page wide)
WIDEST = """(width) => {
    const out = [];
    for (const el of document.querySelectorAll('body *')) {
        const r = el.getBoundingClientRect();
        if (r.right > width + 1 && !Array.from(el.children).some(c => c.getBoundingClientRect().right > width + 1)) {
            out.push(el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '') + ' ' + Math.round(r.right));
        }
        if (out.length >= 6) break;
    }
    return out;
}"""


@pytest.fixture(scope="module")
def tabs(browser: Any, seeded: Seeded) -> Iterator[dict[str, Tab]]:
    made = {}
    try:
        for size in SIZES:
            made[size] = Tab(browser, seeded, size)
            made[size].sign_in(seeded.token)
        yield made
    finally:
        for tab in made.values():
            tab.close()


@pytest.mark.parametrize("size", list(SIZES))
def test_sign_in_fits(browser: Any, seeded: Seeded, size: str) -> None:
    tab = Tab(browser, seeded, size)
    try:
        tab.page.goto(seeded.hub.url + "/console/sign-in")
        problems = tab.measure("sign-in")
        assert not problems, "\n".join(problems)
        tab.page.fill("#token", "skh_not-a-token-" + UNBROKEN)  # the refusal's sentence, next to the field
        tab.page.press("#token", "Enter")
        tab.page.locator("#token-error").wait_for()
        problems = tab.measure("sign-in-refused")
        assert not problems, "\n".join(problems)
    finally:
        tab.close()


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("size", list(SIZES))
def test_every_view_fits(tabs: dict[str, Tab], seeded: Seeded, size: str, view: str) -> None:
    tab = tabs[size]
    how = VIEWS[view]
    if callable(how):
        how(tab.page)
    else:
        path = how.format(post=doc_url("requests", seeded.post), choice=doc_url("requests", seeded.choice), job=doc_url("jobs", seeded.job),
                          credential=doc_url("vault", seeded.credential))
        tab.page.goto(seeded.hub.url + path)
    problems = tab.measure(view)
    assert not problems, "\n".join(problems)

