"""The publishing machine's review and edit rules, judged by the store in the write's transaction:
every person edge for every role (editor, approver, admin, a person without a role, a device),
with publish.require_review off and on, and the content rule before and after the first intent."""

from __future__ import annotations

import pytest

from hub.app import build_rules
from hub.auth import set_role
from ledger import FakeClock, Forbidden, open_store
from publishers.listing import iso
from publishers.settings import PublishSettings

NOW = 1_800_000_000_000
IG = "17841400000000000"
JPG = "https://cdn.example.org/p/1.jpg"
ROLES = {"editor": "user:ed", "approver": "user:ann", "admin": "user:ada", "none": "user:old", "device": "device:ci"}


class World:
    def __init__(self, tmp_path, review: bool) -> None:
        self.clock = FakeClock(NOW)
        rules = build_rules()
        section = PublishSettings(require_review=review, devices=["device:ci"])
        rules.configure(lambda name: section if name == "publish" else None)
        self.store = open_store(f"sqlite:///{tmp_path}/review.db", rules, self.clock)
        set_role(self.store, "ed", "editor", clock=self.clock)
        set_role(self.store, "ann", "approver", clock=self.clock)
        set_role(self.store, "ada", "admin", clock=self.clock)
        self.n = 0

    def post(self, status: str = "draft", **fields):
        """A post in ``status``, written by admin (who is not judged), to test one edge at a time."""
        self.n += 1
        body = {"kind": "publish-request", "status": status, "platform": "ig", "account": IG, "slug": f"p{self.n}",
                "caption": "Hello", "images": [{"url": JPG, "alt": "a box"}], "attempts": 0, "createdAt": "2026-12-01T09:00:00.000Z",
                **fields}
        return self.store.put("requests", body, f"ig:{IG}:p{self.n}", actor="admin")

    def write(self, actor: str, doc, **changes):
        body = {k: v for k, v in doc.items() if not k.startswith("_")}
        body.update(changes)
        body = {k: v for k, v in body.items() if v is not None}
        return self.store.put("requests", body, doc["_id"], actor=actor, if_rev=doc["_rev"])

    def review(self, actor: str, verdict: str, **extra):
        return {"by": actor, "at": iso(self.clock.now_ms()), "verdict": verdict, **extra}


@pytest.fixture(params=[False, True], ids=["review-off", "review-on"])
def world(request, tmp_path):
    w = World(tmp_path, request.param)
    w.review_on = request.param
    yield w
    w.store.close()


def allowed(write, *args, **fields) -> bool:
    """Whether ``write(*args, **fields)`` is let through by the machine."""
    try:
        write(*args, **fields)
    except Forbidden:
        return False
    return True


def new_body(world, actor, status, **fields):
    world.n += 1
    return {"kind": "publish-request", "status": status, "platform": "ig", "account": IG, "slug": f"n{world.n}",
            "caption": "New", "images": [{"url": JPG, "alt": "a box"}], "attempts": 0, **fields}


@pytest.mark.parametrize("role", list(ROLES))
def test_creating_a_post(world, role):
    actor = ROLES[role]
    draft = allowed(world.store.put, "requests", new_body(world, actor, "draft"), actor=actor)
    queued = allowed(world.store.put, "requests", new_body(world, actor, "pending"), actor=actor)
    reviewed = allowed(world.store.put, "requests", new_body(world, actor, "in-review",
                                                                    review=world.review(actor, "submitted")), actor=actor)
    assert draft is True and reviewed is True  # devices named in publish.devices may write posts
    assert queued is (not world.review_on or role in ("approver", "admin", "none")), (role, world.review_on)


def test_a_device_not_named_may_not_create_a_post_in_any_state(world):
    for status in ("draft", "in-review", "pending"):
        with pytest.raises(Forbidden) as err:
            world.store.put("requests", new_body(world, "device:builder", status), actor="device:builder")
        assert "device:builder may not queue a post" in err.value.reason


APPROVES = {"editor": False, "approver": True, "admin": True, "none": True, "device": False}


@pytest.mark.parametrize("role", list(ROLES))
def test_review_edges(world, role):
    actor = ROLES[role]
    person = role != "device"
    # submit: draft -> in-review, signed by the writer
    doc = world.post("draft")
    assert allowed(world.write, actor, doc, status="in-review", review=world.review(actor, "submitted")) is person
    # approve: from review, and straight from a draft
    for source in ("in-review", "draft"):
        doc = world.post(source)
        assert allowed(world.write, actor, doc, status="approved", review=world.review(actor, "approved")) is APPROVES[role]
    # reject, with a reason: approvers; withdraw: any person
    doc = world.post("in-review")
    assert allowed(world.write, actor, doc, status="draft",
                                       review=world.review(actor, "rejected", reason="Say when")) is APPROVES[role]
    doc = world.post("in-review")
    assert allowed(world.write, actor, doc, status="draft") is person
    # queue directly
    for source in ("draft", "in-review"):
        doc = world.post(source)
        queues = person and (not world.review_on or APPROVES[role])
        assert allowed(world.write, actor, doc, status="pending") is queues, (source, role)
    # cancel, from every state before the queue starts it
    for source in ("draft", "in-review", "approved", "pending"):
        doc = world.post(source)
        assert allowed(world.write, actor, doc, status="cancelled") is person
    # retry an error
    doc = world.post("error", lastError="refused")
    assert allowed(world.write, actor, doc, status="pending", lastError=None) is person
    # resolve a post that needs a person: approvers
    doc = world.post("carousel-created", carouselId="c1", intent={"step": "publish", "at": NOW})
    doc = world.store.put("requests", {**{k: v for k, v in doc.items() if not k.startswith("_")}, "status": "needs-person",
                                       "candidates": [{"mediaId": "m1", "permalink": "https://i.test/p/1"}]}, doc["_id"], actor="admin")
    assert allowed(world.write, actor, doc, status="done", mediaId="m1", permalink="https://i.test/p/1", intent=None) \
        is APPROVES[role]


@pytest.mark.parametrize("role", list(ROLES))
def test_editing_content_by_state(world, role):
    actor = ROLES[role]
    person = role != "device"
    for source in ("draft", "in-review"):
        doc = world.post(source)
        assert allowed(world.write, actor, doc, caption="Changed") is person
    # an approved post changes in place for approvers; an editor's change goes back to review
    doc = world.post("approved")
    assert allowed(world.write, actor, doc, caption="Changed") is APPROVES[role]
    doc = world.post("approved")
    assert allowed(world.write, actor, doc, caption="Changed", status="in-review",
                                       review=world.review(actor, "submitted")) is person
    # a queued post: approvers; editors only when review is not required
    doc = world.post("pending")
    assert allowed(world.write, actor, doc, caption="Changed") is (person and (APPROVES[role] or not world.review_on))


def test_comments_on_an_approved_post_are_anyone_s_but_content_is_not(world):
    doc = world.post("approved")
    entry = {"by": "user:ed", "at": iso(NOW), "text": "Can we say today?"}
    doc = world.write("user:ed", doc, comments=[entry])
    assert doc["status"] == "approved" and doc["comments"] == [entry]


def test_content_is_editable_until_the_first_intent_and_fixed_after(world):
    doc = world.post("pending")
    doc = world.write("user:ann", doc, caption="Before the first step")
    started = world.write("tick:publish", doc, intent={"step": "container", "at": NOW, "count": 1}, startedAt=iso(NOW))
    with pytest.raises(Forbidden) as err:
        world.write("user:ann", started, caption="After")
    assert err.value.reason.startswith(f"the content of ig:{IG}:p1 is fixed (the publish tick has started it)")
    # the call failed and its intent was cleared: a container may exist; the content stays fixed
    failed = world.write("tick:publish", started, intent=None, lastError="timed out")
    with pytest.raises(Forbidden):
        world.write("user:ann", failed, caption="After")
    with pytest.raises(Forbidden) as err:  # nor can a person take the mark away
        world.write("user:ann", failed, startedAt=None)
    assert err.value.reason == "startedAt is the publish tick's to write, not a person's"
    with pytest.raises(Forbidden) as err:  # the time is content too
        world.write("user:ann", failed, at="2026-12-24T09:00:00+00:00", notBefore=1_798_102_800_000)
    assert "is fixed" in err.value.reason


def test_the_tick_never_changes_content_and_people_never_write_the_tick_s_fields(world):
    doc = world.post("pending")
    with pytest.raises(Forbidden) as err:
        world.write("tick:publish", doc, caption="x")
    assert err.value.reason == "tick:publish may not change a post's caption: only people edit posts"
    with pytest.raises(Forbidden) as err:
        world.write("user:ann", doc, mediaId="m1")
    assert err.value.reason == "mediaId is the publish tick's to write, not a person's"


def test_a_reschedule_writes_notbefore_from_at_and_nothing_else(world):
    doc = world.post("pending")
    moved = world.write("user:ann", doc, at="2027-01-05T09:00:00+01:00", notBefore=1_799_136_000_000 + 0, day="2027-01-05")
    assert moved["notBefore"] == 1_799_136_000_000 and moved["day"] == "2027-01-05"
    with pytest.raises(Forbidden) as err:
        world.write("user:ann", moved, at="2027-01-06T09:00:00+01:00", notBefore=1)
    assert err.value.reason.startswith("notBefore is written from at")
    with pytest.raises(Forbidden) as err:
        world.write("user:ann", moved, at="2027-01-06T09:00:00+01:00", notBefore=1_799_222_400_000, day="2027-01-05")
    assert err.value.reason.startswith("day is the UTC date")


def test_a_bluesky_post_whose_record_key_is_fixed_cannot_be_cancelled(world):
    doc = world.post("pending", rkey="3kabc")
    with pytest.raises(Forbidden) as err:
        world.write("user:ann", doc, status="cancelled")
    assert "may already be live under its record key" in err.value.reason
    doc = world.post("pending", intent={"step": "container", "at": NOW})
    with pytest.raises(Forbidden) as err:
        world.write("user:ann", doc, status="cancelled")
    assert "a call for this post is under way (container)" in err.value.reason


def test_reviews_and_comments_are_signed_by_their_writer_and_kept(world):
    doc = world.post("in-review")
    with pytest.raises(Forbidden) as err:  # an approval in another's name
        world.write("user:ann", doc, status="approved", review=world.review("user:ada", "approved"))
    assert err.value.reason == "the review must be signed by its writer: by must be 'user:ann'"
    with pytest.raises(Forbidden) as err:
        world.write("user:ann", doc, status="draft", review=world.review("user:ann", "rejected"))
    assert err.value.reason == "a rejection needs a reason: say what to change"
    with pytest.raises(Forbidden) as err:  # a review written without a review move
        world.write("user:ann", doc, review=world.review("user:ann", "approved"))
    assert err.value.reason.startswith("a review is written only when")
    first = {"by": "user:ed", "at": iso(NOW), "text": "One"}
    doc = world.write("user:ed", doc, comments=[first])
    for comments, sentence in (
        ([first, {"by": "user:ann", "at": iso(NOW), "text": "Two"}], "a comment must be signed by its writer"),
        ([{**first, "text": "Changed"}, {"by": "user:ed", "at": iso(NOW), "text": "Two"}], "comments are kept"),
        ([], "comments are kept"),
        ([first, {"by": "user:ed", "at": iso(NOW), "text": "2"}, {"by": "user:ed", "at": iso(NOW), "text": "3"}], "one comment at a time"),
        ([first, {"by": "user:ed", "at": "2020-01-01T00:00:00Z", "text": "Late"}], "needs at: the time it is written"),
        ([first, {"by": "user:ed", "at": iso(NOW), "text": " "}], "a comment is text of 1 to 2,000"),
    ):
        with pytest.raises(Forbidden) as err:
            world.write("user:ed", doc, comments=comments)
        assert sentence in err.value.reason, (comments, err.value.reason)


def test_the_console_offers_retry_only_for_an_error_and_cancel_before_the_post_is_published():
    from publishers.machine import KIND, PUBLISH
    from publishers.pages import doc_actions

    def labels(status):
        return [label for _, label, _ in doc_actions("requests", {"kind": KIND, "status": status}, "user:ann", PUBLISH) or []]

    assert labels("draft") == ["Cancel"] and labels("in-review") == ["Cancel"] and labels("pending") == ["Cancel"]
    assert labels("error") == ["Retry"] and labels("done") == []


def test_done_and_commented_are_both_published_and_count_as_one_outcome():
    """``done`` is no longer terminal (the first comment follows): it is a settled end, so the activity
    chart, the queue depth and the metrics count a post once, when it is published."""
    from publishers.machine import PUBLISH, PUBLISHED

    assert set(PUBLISHED) <= PUBLISH.ends and "done" not in PUBLISH.terminal
    assert PUBLISH.follow_ups == {"commented"}
    assert PUBLISH.ends >= {"done", "commented", "cancelled", "skipped"}
