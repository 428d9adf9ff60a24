"""A post for several networks through ``queue.submit_post`` and acted on as one (``publishers.posts``):
idempotent queueing, updates while nothing has started, every problem at once, dry runs, the
queue sorted by time, edits, reschedules, duplicates, comments, and an approved post queued at its time."""

from __future__ import annotations

from typing import Any

import pytest

from hub.auth import set_role
from ledger import Conflict, Forbidden, Ledger
from publishers import posts
from publishers.errors import PostInvalid
from publishers.listing import by_time
from publishers.queue import PostIn, VariantIn, submit_post
from publishers.settings import PublishSettings
from skyhub_testkit.fakepds import HANDLE
from tests.publishers.conftest import IG, JPG, NOW, PDS, TH

HOUR = 3_600_000


class Settings:
    """The hub's settings as the queue reads them (``section(name)``)."""

    def __init__(self, **publish: Any) -> None:
        self.publish = PublishSettings(accounts={"ig": IG, "threads": TH}, **publish)

    def section(self, name: str) -> Any:
        return self.publish if name == "publish" else None


SETTINGS = Settings()


def launch(**changes: Any) -> PostIn:
    fields: dict[str, Any] = dict(
        variants=[VariantIn("ig"), VariantIn("threads", caption="It's here, on Threads"), VariantIn("bsky", account="skybot.test")],
        caption="It's here", images=[{"url": JPG.format(1), "alt": "The box"}], first_comment="Shop: https://shop.example.org",
        at="2027-01-15T12:00:00+01:00")
    fields.update(changes)
    return PostIn(**fields)


def revisions(env, doc_id):
    return len(env.store.history("requests", doc_id))


def test_one_post_for_three_networks_is_one_post_however_often_it_is_queued(env):
    first = submit_post(env.maya, SETTINGS, launch(), now_ms=NOW)
    ids = [v["id"] for v in first.variants]
    slug = first.id
    assert slug.startswith("it-s-here-") and ids == [f"ig:{IG}:{slug}", f"threads:{TH}:{slug}", f"bsky:skybot.test:{slug}"]
    assert first.queued and first.status == "pending" and [v["outcome"] for v in first.variants] == ["new"] * 3
    ig, threads, bsky = (env.doc(i) for i in ids)
    assert ig["post"] == threads["post"] == bsky["post"] == slug
    assert (ig["caption"], threads["caption"], bsky["caption"]) == ("It's here", "It's here, on Threads", "It's here")
    assert ig["firstComment"] == "Shop: https://shop.example.org" and ig["day"] == "2027-01-15"
    again = submit_post(env.maya, SETTINGS, launch(), now_ms=NOW + HOUR)
    assert again.id == slug and not again.queued and not again.updated
    assert all(revisions(env, i) == 1 for i in ids)  # nothing new was written
    other = submit_post(env.maya, SETTINGS, launch(caption="It's here!"), now_ms=NOW)
    assert other.id != slug and other.queued  # other content, no slug: another post; the first one stays
    assert len(by_time(env.store)) == 6


def test_changed_content_under_a_slug_updates_the_post_until_a_step_is_taken(env):
    first = submit_post(env.maya, SETTINGS, launch(slug="launch"), now_ms=NOW)
    assert first.id == "launch"
    changed = submit_post(env.maya, SETTINGS, launch(slug="launch", caption="It's finally here"), now_ms=NOW + 1)
    assert changed.updated and [v["outcome"] for v in changed.variants] == ["updated", "unchanged", "updated"]
    assert env.doc(f"ig:{IG}:launch")["caption"] == "It's finally here" and revisions(env, f"ig:{IG}:launch") == 2
    assert env.doc(f"threads:{TH}:launch")["caption"] == "It's here, on Threads"  # its own caption did not change
    # the tick starts the Bluesky variant: from then on its content is fixed, and nothing else is written either
    bsky = env.doc("bsky:skybot.test:launch")
    env.store.put("requests", {**bsky, "intent": {"step": "post", "at": NOW, "rkey": "3k"}, "rkey": "3k",
                               "startedAt": "2026-01-15T08:00:00.000Z"}, actor="tick:publish")
    with pytest.raises(Conflict) as err:
        submit_post(env.maya, SETTINGS, launch(slug="launch", caption="Again"), now_ms=NOW + 2)
    assert err.value.reason.startswith("bsky:skybot.test:launch is already queued with different content, and its content "
                                       "is fixed (the publish tick has started it)")
    assert env.doc(f"ig:{IG}:launch")["caption"] == "It's finally here"
    # a network that is not in the post yet is added to it
    added = submit_post(env.maya, SETTINGS, PostIn(variants=[VariantIn("threads", account="2900000000000009")], slug="launch",
                                                    caption="Hi"), now_ms=NOW)
    assert [v["outcome"] for v in added.variants] == ["new"]
    assert [v["_id"] for v in posts.get_post(env.store, "launch")["variants"]] == [
        f"ig:{IG}:launch", f"threads:{TH}:launch", "threads:2900000000000009:launch", "bsky:skybot.test:launch"]


def test_every_problem_of_every_network_at_once_and_nothing_written(env):
    bad = launch(images=[], caption="x" * 301, first_comment="y" * 501, variants=[VariantIn("ig"), VariantIn("threads"),
                                                                                  VariantIn("bsky", account="skybot.test")])
    with pytest.raises(PostInvalid) as err:
        submit_post(env.maya, SETTINGS, bad, now_ms=NOW)
    sentences = err.value.reason.split("; ")
    assert f"ig:{IG}: an Instagram post needs an image (or 2 to 10 for a carousel), got none" in sentences
    assert f"threads:{TH}: a first comment on Threads is at most 500 characters, got 501" in sentences
    assert "bsky:skybot.test: a Bluesky post is at most 300 characters, got 301" in sentences
    assert "bsky:skybot.test: a first comment on Bluesky is at most 300 characters, got 501" in sentences
    with pytest.raises(PostInvalid) as err:
        submit_post(env.maya, SETTINGS, PostIn(variants=[VariantIn("ig"), VariantIn("ig", account=IG)], images=[
            {"url": JPG.format(1), "alt": ""}]), now_ms=NOW)
    assert f"ig:{IG} is given twice" in err.value.reason
    assert env.store.head_seq() == 0


def test_a_dry_run_says_what_would_happen_and_writes_nothing(env):
    dry = submit_post(env.maya, SETTINGS, launch(slug="launch"), now_ms=NOW, dry_run=True)
    assert dry.dry_run and [v["outcome"] for v in dry.variants] == ["new"] * 3 and env.store.head_seq() == 0
    submit_post(env.maya, SETTINGS, launch(slug="launch"), now_ms=NOW)
    seq = env.store.head_seq()
    dry = submit_post(env.maya, SETTINGS, launch(slug="launch", caption="Other"), now_ms=NOW, dry_run=True)
    assert [v["outcome"] for v in dry.variants] == ["updated", "unchanged", "updated"] and env.store.head_seq() == seq


def test_an_editor_s_post_waits_for_an_approver_when_review_is_required(env):
    set_role(env.store, "ed", "editor", clock=env.clock)
    ed = Ledger(env.store, "user:ed", env.clock)
    review = Settings(require_review=True)
    done = submit_post(ed, review, launch(slug="eds"), now_ms=NOW)
    assert done.status == "in-review"
    doc = env.doc(f"ig:{IG}:eds")
    assert doc["review"]["by"] == "user:ed" and doc["review"]["verdict"] == "submitted"
    assert submit_post(ed, SETTINGS, launch(slug="eds-2"), now_ms=NOW).status == "pending"  # review not required
    assert submit_post(env.maya, review, launch(slug="mayas"), now_ms=NOW).status == "pending"  # no role: admin


def test_the_queue_is_sorted_by_time_and_read_by_day(env):
    for slug, at in (("late", "2027-02-20T09:00:00+00:00"), ("soon", "2027-02-10T09:00:00+00:00"), ("mid", "2027-02-15T09:00:00+00:00")):
        submit_post(env.maya, SETTINGS, PostIn(variants=[VariantIn("bsky", account="skybot.test")], caption=slug, slug=slug, at=at),
                    now_ms=NOW)
    submit_post(env.maya, SETTINGS, PostIn(variants=[VariantIn("bsky", account="skybot.test")], caption="now", slug="now"), now_ms=NOW)
    listed = posts.list_posts(env.store)
    assert [p["id"] for p in listed] == ["now", "soon", "mid", "late"]
    assert listed[1]["time"] == "2027-02-10T09:00:00.000Z" and listed[1]["caption"] == "soon"
    week = posts.list_posts(env.store, since_ms=1_802_217_600_000, until_ms=1_802_217_600_000 + 7 * 86_400_000)  # Feb 10-16
    assert [p["id"] for p in week] == ["soon", "mid"]
    assert [d["slug"] for d in by_time(env.store, limit=2)] == ["now", "soon"]


def test_edit_reschedule_and_duplicate(env):
    submit_post(env.maya, SETTINGS, launch(slug="launch"), now_ms=NOW)
    done = posts.edit(env.maya, SETTINGS, "launch", posts.Change(captions={"bsky": "On Bluesky"}, first_comment=""), now_ms=NOW)
    assert [v["outcome"] for v in done["variants"]] == ["edited"] * 3
    assert env.doc("bsky:skybot.test:launch")["caption"] == "On Bluesky" and "firstComment" not in env.doc(f"ig:{IG}:launch")
    with pytest.raises(PostInvalid) as err:  # every problem first: nothing is written
        posts.edit(env.maya, SETTINGS, "launch", posts.Change(caption="x" * 2201), now_ms=NOW)
    assert f"ig:{IG}:launch: an Instagram caption is at most 2,200 characters" in err.value.reason
    assert env.doc(f"ig:{IG}:launch")["caption"] == "It's here"
    moved = posts.reschedule(env.maya, SETTINGS, "launch", "2027-02-01T10:00:00+01:00", now_ms=NOW)
    ig = env.doc(f"ig:{IG}:launch")
    assert moved["status"] == "pending" and ig["at"] == "2027-02-01T10:00:00+01:00" and ig["day"] == "2027-02-01"
    assert ig["notBefore"] == 1_801_472_400_000
    with pytest.raises(PostInvalid) as err:
        posts.reschedule(env.maya, SETTINGS, "launch", "2020-01-01T10:00:00+01:00", now_ms=NOW)
    assert "is in the past" in err.value.reason
    # one variant was published: an edit changes the others, and says so
    env.store.put("requests", {**env.doc("bsky:skybot.test:launch"), "status": "done", "recordUri": "at://x", "permalink": "p",
                               "startedAt": "2027-01-01T00:00:00.000Z"}, actor="admin")
    done = posts.edit(env.maya, SETTINGS, "launch", posts.Change(caption="Fixed typo"), now_ms=NOW)
    assert [v["outcome"] for v in done["variants"]] == ["edited", "edited", "left: its content is fixed (it is done)"]
    copy = posts.duplicate(env.maya, SETTINGS, "launch", now_ms=NOW)
    assert copy.id == "launch-copy" and copy.status == "draft"
    assert env.doc("bsky:skybot.test:launch-copy")["caption"] == "On Bluesky"
    assert "at" not in env.doc("bsky:skybot.test:launch-copy")  # published: its time is behind it
    assert env.doc(f"ig:{IG}:launch-copy")["at"] == "2027-02-01T10:00:00+01:00"  # still ahead: kept
    assert posts.duplicate(env.maya, SETTINGS, "launch", now_ms=NOW).id == "launch-copy-2"
    assert [c.doc["caption"] for c in env.store.history("requests", f"ig:{IG}:launch")] == [
        "It's here", "It's here", "It's here", "Fixed typo"]  # every change is a revision


def test_review_acts_apply_to_every_variant_and_say_what_they_left(env):
    set_role(env.store, "ed", "editor", clock=env.clock)
    set_role(env.store, "ann", "approver", clock=env.clock)
    ed, ann = Ledger(env.store, "user:ed", env.clock), Ledger(env.store, "user:ann", env.clock)
    submit_post(ed, SETTINGS, launch(slug="launch", draft=True), now_ms=NOW)
    assert posts.submit_for_review(ed, "launch", now_ms=NOW)["status"] == "in-review"
    posts.comment(ed, "launch", "Is the link right?", now_ms=NOW)
    with pytest.raises(Forbidden):
        posts.approve(ed, "launch", now_ms=NOW)
    assert posts.reject(ann, "launch", "Say when the shop opens", now_ms=NOW)["status"] == "draft"
    view = posts.get_post(env.store, "launch")
    assert view["review"] == {"by": "user:ann", "at": "2027-01-15T08:00:00.000Z", "verdict": "rejected",
                              "reason": "Say when the shop opens"}
    assert [c["text"] for c in view["comments"]] == ["Is the link right?"]
    posts.edit(ed, SETTINGS, "launch", posts.Change(caption="It's here: open at 9"), now_ms=NOW)
    posts.submit_for_review(ed, "launch", now_ms=NOW)
    assert posts.approve(ann, f"ig:{IG}:launch", now_ms=NOW)["status"] == "approved"  # one variant by its id
    done = posts.approve(ann, "launch", now_ms=NOW)
    assert [v["outcome"] for v in done["variants"]] == ["left: it is approved", "moved", "moved"]
    with pytest.raises(PostInvalid) as err:
        posts.approve(ann, "launch", now_ms=NOW)
    assert err.value.reason.startswith(f"nothing to approve: ig:{IG}:launch is approved")


def test_an_approved_post_is_queued_by_the_tick_at_its_time_and_published(env):
    env.credential("bluesky", HANDLE, {"appPassword": "abcd-efgh-ijkl-mnop", "session": {**env.pds.session(), "pds": PDS}})
    submit_post(env.maya, SETTINGS, PostIn(variants=[VariantIn("bsky", account=HANDLE)], caption="Hello", slug="hello",
                                           at="2027-01-15T09:00:00+00:00", draft=True), now_ms=NOW)  # an hour from now
    posts.approve(env.maya, "hello", now_ms=NOW)
    assert env.tick() == {"not-yet": 1}
    env.clock.advance(HOUR)
    assert env.tick() == {"queued": 1, "done": 1}
    assert env.statuses(f"bsky:{HANDLE}:hello") == ["draft", "approved", "pending", "pending", "done"]
