"""The compose page and the review queue over HTTP, against a real `skyhub run` with
publish.require_review on: an editor composes one post for three networks and submits it; an
approver approves or rejects it; every button a person lacks is absent from the page AND refused
by the machine when forged, through the console, the API and a raw store write; a device cannot
create a post. The account picker lists the credentials with their status, and a default account
the vault lacks as missing. A bad form comes back filled, one sentence next to each field."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hub.auth import set_role
from ledger import Forbidden, Ledger, NotFound
from publishers.cli import cli_words
from publishers.posts import variants_of
from publishers.validate import problems
from skyhub_testkit.hub import Hub
from vault import Vault, parse_key

from .conftest import Console

IG = "17841400000000001"
THREADS = "2900000000000001"
SHOP = "shop.bsky.social"
DEAD = "17841400000000999"
JPG = "https://cdn.example.org/spring/cups.jpg"


class World:
    def __init__(self, hub: Hub, key_text: str) -> None:
        self.hub = hub
        self.consoles: list[Console] = []
        for name, role in (("ed", "editor"), ("ann", "approver")):
            set_role(hub.admin, name, role, clock=hub.clock)
        self.tokens = {"ed": hub.token("ed"), "ann": hub.token("ann")}
        vault = Vault(Ledger(hub.admin, "user:ann", hub.clock), parse_key(key_text, "test"))
        for platform, account, status in (("instagram", IG, "ok"), ("threads", THREADS, "ok"), ("instagram", DEAD, "needs-reauth")):
            meta = vault.put(platform, account, {"accessToken": "t"})
            doc = hub.admin.get("vault", meta["id"])  # as the vault tick would leave it: verified, or refused
            hub.admin.put("vault", {**{k: v for k, v in doc.items() if not k.startswith("_")}, "status": status,
                                    "needsReauth": status != "ok"}, meta["id"], actor="admin", if_rev=doc["_rev"])

    def console(self, name: str) -> Console:
        c = Console(self.hub.url)
        c.sign_in(self.tokens[name])
        self.consoles.append(c)
        return c

    def variants(self, slug: str) -> dict[str, dict[str, Any]]:
        try:
            found = variants_of(self.hub.admin, slug)
        except NotFound:
            return {}
        return {d["platform"]: d for d in found}


@pytest.fixture
def world(tmp_path: Path, key_text: str) -> Iterator[World]:
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False, env={
        "SKYHUB_VAULT_KEY": key_text, "SKYHUB_PUBLISH__EVERY": "1h", "SKYHUB_VAULT__EVERY": "1h",
        "SKYHUB_PUBLISH__REQUIRE_REVIEW": "true", "SKYHUB_PUBLISH__ACCOUNTS": json.dumps({"bsky": SHOP})})
    w = World(hub, key_text)
    try:
        yield w
    finally:
        for c in w.consoles:
            c.close()
        hub.stop()


def post_form(slug: str = "spring", **extra: str) -> dict[str, str]:
    """The compose form for three networks, each with its own caption, Bluesky its own first comment."""
    return {"slug": slug, "caption": "Spring is here #spring #cups", "image-1": JPG, "alt-1": "Three blue cups on a shelf",
            "firstComment": "Shop link in bio", "tz": "Europe/Paris",
            "to-ig": "1", "account-ig": IG, "caption-ig": "Spring on Instagram #spring",
            "to-threads": "1", "account-threads": THREADS, "caption-threads": "Spring on Threads",
            "to-bsky": "1", "account-bsky": SHOP, "caption-bsky": "Spring on Bluesky", "comment-bsky": "shop.example.org/spring",
            "action": "draft", **extra}


def compose(c: Console, data: dict[str, str]) -> httpx.Response:
    return c.post("/console/publish/compose", data, form_page="/console/publish/compose")


def buttons(page: str) -> list[str]:
    return re.findall(r'<button type="submit" name="action" value="(\w+)"', page)


def test_the_account_picker_lists_the_credentials_with_their_status_and_no_free_text(world: World) -> None:
    page = world.console("ed").http.get("/console/publish/compose").text
    assert f'<option value="{IG}">{IG} (ok)</option>' in page
    assert f'<option value="{DEAD}">{DEAD} (needs re-auth)</option>' in page
    assert f'<option value="{THREADS}">{THREADS} (ok)</option>' in page
    assert f'<option value="{SHOP}" selected>{SHOP} (missing)</option>' in page  # the hub's default, not in the vault
    assert f'href="/console/credentials?platform=bluesky&amp;account={SHOP}"' in page  # its fix: the paste form, filled in
    assert f'href="/console/credentials?platform=instagram&amp;account={DEAD}"' in page
    assert not re.search(r'<input[^>]*name="account-', page)  # picked, never typed


def test_an_editor_saves_a_draft_for_three_networks_then_submits_it_and_has_no_approve_button(world: World) -> None:
    ed = world.console("ed")
    page = ed.http.get("/console/publish/compose").text
    assert buttons(page) == ["draft", "submit"]  # review is required: an editor neither approves nor queues
    saved = compose(ed, post_form())
    assert saved.status_code == 303, saved.text
    assert saved.headers["location"].startswith("/console/publish/compose/spring")
    v = world.variants("spring")
    assert {p: d["status"] for p, d in v.items()} == {"ig": "draft", "threads": "draft", "bsky": "draft"}
    assert v["ig"]["caption"] == "Spring on Instagram #spring" and v["threads"]["caption"] == "Spring on Threads"
    assert v["ig"]["firstComment"] == "Shop link in bio" and v["bsky"]["firstComment"] == "shop.example.org/spring"
    assert v["bsky"]["images"] == [{"url": JPG, "alt": "Three blue cups on a shelf"}]

    edit = ed.http.get("/console/publish/compose/spring").text  # the draft, back in the form
    assert 'value="Spring on Bluesky"' not in edit and ">Spring on Bluesky</textarea>" in edit
    assert "Edit a post" in edit and 'name="post" value="spring"' in edit
    assert 'src="/console/publish/thumbnail?id=ig%3A' in edit  # the image through the guarded route, once saved
    assert JPG not in re.findall(r'<img[^>]*src="([^"]+)"', edit)

    forged = compose(ed, post_form(action="approve"))  # a button the page does not show: the machine refuses it
    assert forged.status_code == 403, forged.text
    assert "may not" in html.unescape(forged.text) or "approvers" in html.unescape(forged.text)
    assert {d["status"] for d in world.variants("spring").values()} == {"draft"}
    queued = compose(ed, post_form(action="queue"))
    assert queued.status_code == 403 and "require" in html.unescape(queued.text)
    assert {d["status"] for d in world.variants("spring").values()} == {"draft"}

    submitted = compose(ed, post_form(action="submit", **{"caption-threads": "Spring on Threads, again", "nocomment-threads": "1"}))
    assert submitted.status_code == 303, submitted.text
    v = world.variants("spring")
    assert {d["status"] for d in v.values()} == {"in-review"} and v["threads"]["caption"] == "Spring on Threads, again"
    assert "firstComment" not in v["threads"] and v["ig"]["firstComment"] == "Shop link in bio"  # none on Threads only
    assert 'id="nocomment-threads" name="nocomment-threads" value="1" data-no-comment checked' in ed.http.get(
        "/console/publish/compose/spring").text


def test_an_approver_approves_queues_and_the_review_page_shows_the_post(world: World) -> None:
    ed, ann = world.console("ed"), world.console("ann")
    assert compose(ed, post_form(action="submit")).status_code == 303
    review = ann.http.get("/console/publish/review").text
    assert "spring" in review and "Spring on Instagram #spring" in review and "Spring on Bluesky" in review
    assert 'action="/console/publish/review/approve"' in review and 'action="/console/publish/review/reject"' in review
    assert "submitted by user:ed" in review
    assert 'src="/console/publish/thumbnail?id=bsky%3Ashop.bsky.social%3Aspring' in review and 'alt="Three blue cups on a shelf"' in review
    mine = ed.http.get("/console/publish/review").text  # the editor sees the post, comments, and no verdict button
    assert "Spring on Threads" in mine and "/review/approve" not in mine and "/review/reject" not in mine

    page = ann.http.get("/console/publish/compose").text
    assert buttons(page) == ["draft", "submit", "approve", "queue"]
    done = ann.post("/console/publish/review/approve", {"id": "spring"}, form_page="/console/publish/review")
    assert done.status_code == 303, done.text
    assert {d["status"] for d in world.variants("spring").values()} == {"approved"}
    assert "spring" not in ann.http.get("/console/publish/review").text.split('id="review-list"')[1]

    queued = compose(ann, post_form(slug="summer", action="queue", **{"caption-ig": "Summer", "caption-threads": "Summer",
                                                                      "caption-bsky": "Summer"}))
    assert queued.status_code == 303, queued.text
    assert {d["status"] for d in world.variants("summer").values()} == {"pending"}
    approved = compose(ann, post_form(slug="autumn", action="approve", **{"caption-ig": "Autumn", "caption-threads": "Autumn",
                                                                          "caption-bsky": "Autumn"}))
    assert approved.status_code == 303, approved.text
    assert {d["status"] for d in world.variants("autumn").values()} == {"approved"}
    assert {d["review"]["by"] for d in world.variants("autumn").values()} == {"user:ann"}


def test_an_editor_cannot_approve_through_the_console_the_api_or_a_raw_write(world: World) -> None:
    ed = world.console("ed")
    assert compose(ed, post_form(action="submit")).status_code == 303
    refused = ed.post("/console/publish/review/approve", {"id": "spring"}, form_page="/console/publish/review")
    assert refused.status_code == 403 and "approve" in html.unescape(refused.text)
    turned = ed.post("/console/publish/review/reject", {"id": "spring", "text": "no"}, form_page="/console/publish/review")
    assert turned.status_code == 403 and "may not reject" in html.unescape(turned.text)
    api = httpx.post(f"{world.hub.url}/v1/posts/spring/approve", headers={"Authorization": f"Bearer {world.tokens['ed']}"})
    assert api.status_code == 403, api.text
    doc = world.variants("spring")["ig"]
    raw = world.hub.client("user:ed")
    body = {**{k: v for k, v in doc.items() if not k.startswith("_")}, "status": "approved",
            "review": {"by": "user:ed", "at": doc["review"]["at"], "verdict": "approved"}}
    with pytest.raises(Forbidden):
        raw.put("requests", body, doc["_id"], if_rev=doc["_rev"])
    assert {d["status"] for d in world.variants("spring").values()} == {"in-review"}


def test_a_device_cannot_create_a_post(world: World) -> None:
    device = world.hub.client("device:ci")
    body = {"kind": "publish-request", "status": "draft", "platform": "bsky", "account": SHOP, "slug": "sneaky",
            "caption": "from a device", "images": [], "attempts": 0, "createdAt": "2026-12-01T09:00:00.000Z"}
    with pytest.raises(Forbidden):
        device.put("requests", body, f"bsky:{SHOP}:sneaky")
    assert world.variants("sneaky") == {}


def test_reject_needs_a_reason_and_comments_are_shown_with_who_and_when(world: World) -> None:
    ed, ann = world.console("ed"), world.console("ann")
    assert compose(ed, post_form(action="submit")).status_code == 303
    empty = ann.post("/console/publish/review/reject", {"id": "spring", "text": " "}, form_page="/console/publish/review")
    assert empty.status_code == 422 and "a rejection needs a reason" in empty.text
    assert {d["status"] for d in world.variants("spring").values()} == {"in-review"}
    said = ed.post("/console/publish/review/comment", {"id": "spring", "text": "Is the link right?"}, form_page="/console/publish/review")
    assert said.status_code == 303, said.text
    rejected = ann.post("/console/publish/review/reject", {"id": "spring", "text": "Use the summer photo"},
                        form_page="/console/publish/review")
    assert rejected.status_code == 303, rejected.text
    v = world.variants("spring")
    assert {d["status"] for d in v.values()} == {"draft"}
    assert v["ig"]["review"]["verdict"] == "rejected" and v["ig"]["review"]["reason"] == "Use the summer photo"
    assert v["ig"]["comments"][0]["by"] == "user:ed" and v["ig"]["comments"][0]["text"] == "Is the link right?"
    assert compose(ed, post_form(action="submit")).status_code == 303  # back in review: the comment is on the page
    page = ann.http.get("/console/publish/review").text
    assert re.search(r"<strong>user:ed</strong> · <time datetime=\"[0-9T:.Z-]+\">", page) and "Is the link right?" in page


def test_a_bad_form_comes_back_filled_with_one_sentence_next_to_each_field(world: World) -> None:
    ed = world.console("ed")
    data = post_form(**{"alt-1": "", "caption-threads": "x" * 501, "account-threads": "not-on-this-hub", "at": "tomorrow"})
    answer = compose(ed, data)
    assert answer.status_code == 422, answer.text
    page = html.unescape(answer.text)
    assert "image 1 needs alt text on Bluesky" in page
    assert re.search(r'id="account-threads-error"><li>\'not-on-this-hub\' is not one of this hub\'s Threads accounts', page)
    assert 'id="at-error"><li>the time must be a date and a time' in page
    assert "x" * 501 + "</textarea>" in page and "Spring on Instagram #spring</textarea>" in page  # nothing lost
    assert world.variants("spring") == {}
    none = compose(ed, {"caption": "hello", "action": "draft"})
    assert none.status_code == 422 and "pick at least one network" in none.text
    long = compose(ed, post_form(**{"account-threads": THREADS, "caption-threads": "x" * 501}))
    assert long.status_code == 422
    assert 'id="caption-threads-error"><li>threads:2900000000000001: a Threads post is at most 500 characters, got 501' in long.text
    counter = re.sub(r"<[^>]+>", "", re.search(r'<p class="help counter" id="count-threads".*?</p>', long.text, re.S).group(0))
    assert "501 / 500 characters · over Threads's limit" in html.unescape(counter)  # the server's counter, without JS
    assert world.variants("spring") == {}


def test_web_sentences_name_no_cli_flag_and_the_cli_words_its_own() -> None:
    sentence = "; ".join(problems({"platform": "bsky", "account": SHOP, "slug": "s", "caption": "x",
                                   "images": [{"url": "/tmp/cups.png", "alt": "cups"}]}))
    assert "--" not in sentence and "`" not in sentence and "upload it first" in sentence
    assert "`skyhub publish bsky --image FILE`" in cli_words(sentence)
    assert cli_words("ig:1:s is already queued with different content (pending): choose another slug for a new Instagram post"
                     ).endswith("choose another --slug for a new Instagram post")
    assert cli_words("image 1 needs alt text on Bluesky") == "image 1 needs alt text on Bluesky (give it with --alt right after its --image)"


def test_a_conflict_on_the_publishing_form_names_no_flag(world: World) -> None:
    ed = world.console("ann")
    first = {"platform": "bsky", "account": SHOP, "slug": "hello", "caption": "Hello", "tz": "UTC"}
    assert ed.post("/console/publish", first, form_page="/console/publish").status_code == 303
    again = ed.post("/console/publish", {**first, "caption": "Hello again"}, form_page="/console/publish")
    assert again.status_code == 409 and "choose another slug" in again.text and "--slug" not in again.text


def test_editing_a_post_with_images_per_network_keeps_each_networks_images(world: World) -> None:
    from publishers.queue import PostIn, VariantIn, submit_post
    from publishers.settings import PublishSettings

    class Settings:
        def section(self, name: str) -> Any:
            return PublishSettings(accounts={"bsky": SHOP}) if name == "publish" else None

    ann = Ledger(world.hub.admin, "user:ann", world.hub.clock)
    other = "https://cdn.example.org/spring/other.jpg"
    submit_post(ann, Settings(), PostIn(variants=[VariantIn("ig", IG, images=[{"url": JPG, "alt": "cups"}]),
                                                  VariantIn("threads", THREADS, images=[{"url": other, "alt": "plates"}])],
                                        caption="Spring", slug="mixed", draft=True), now_ms=world.hub.clock.now_ms())
    c = world.console("ann")
    page = c.http.get("/console/publish/compose/mixed").text
    assert 'name="keep-images" value="1"' in page and 'id="image-1"' not in page  # not shown as one set of rows
    data = {"post": "mixed", "slug": "mixed", "caption": "Spring, edited", "tz": "UTC", "keep-images": "1", "action": "draft",
            "to-ig": "1", "account-ig": IG, "to-threads": "1", "account-threads": THREADS}
    assert compose(c, data).status_code == 303
    v = world.variants("mixed")
    assert v["ig"]["caption"] == v["threads"]["caption"] == "Spring, edited"
    assert v["ig"]["images"] == [{"url": JPG, "alt": "cups"}] and v["threads"]["images"] == [{"url": other, "alt": "plates"}]


def test_a_post_of_one_network_is_shown_with_why_it_is_not_edited_here(world: World) -> None:
    c = world.console("ann")
    assert c.post("/console/publish", {"platform": "bsky", "account": SHOP, "slug": "solo", "caption": "Hello", "tz": "UTC"},
                  form_page="/console/publish").status_code == 303
    page = html.unescape(c.http.get(f"/console/publish/compose/bsky:{SHOP}:solo").text)
    assert "was queued for one network on the Publishing page" in page and buttons(page) == []
    assert ">Hello</textarea>" in page  # its content, shown


def test_the_form_takes_and_shows_times_in_the_persons_zone_not_the_browsers(world: World) -> None:
    from hub.auth import set_zone

    set_zone(world.hub.admin, "ed", "America/New_York", clock=world.hub.clock)
    ed = world.console("ed")
    page = ed.http.get("/console/publish/compose").text  # without it the browser's zone (console.js) would be filled in
    assert 'id="tz" name="tz" value="America/New_York"' in page
    form = {k: v for k, v in post_form(at="2099-06-01T09:30").items() if k != "tz"}
    form["tz"] = re.search(r'id="tz" name="tz" value="([^"]*)"', page).group(1)  # as the browser sends the page's value
    assert compose(ed, form).status_code == 303
    assert {d["at"] for d in world.variants("spring").values()} == {"2099-06-01T09:30:00-04:00"}
    edit = ed.http.get("/console/publish/compose/spring").text  # the saved time, back in the person's zone
    assert 'id="at" name="at" value="2099-06-01T09:30"' in edit and 'value="America/New_York"' in edit
    assert 'value="2099-06-01T09:30"' in ed.http.get("/console/publish/compose/spring?tz=America/New_York").text
    assert 'value="2099-06-01T13:30"' in ed.http.get("/console/publish/compose/spring?tz=UTC").text
