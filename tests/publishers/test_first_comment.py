"""The first comment, one more step after ``done``, posted once whatever the answers: Instagram (a
comment on the media), Threads (a reply container, then its publish) and Bluesky (a reply in
the thread under a fixed key), against FakeMeta and FakePDS on a fake clock, on SQLite and
PostgreSQL. Every fault the publish tests cover: a timeout (nothing happened), a timeout or a
5xx after the comment went live, a plain 5xx, a refusal of the content, the credential refused."""

from __future__ import annotations

import httpx
import pytest

from skyhub_testkit.fakemeta import SERVER_ERROR_2, TOKEN_EXPIRED_190, error
from skyhub_testkit.fakepds import DID, HANDLE, POST
from tests.publishers.conftest import IG, PDS, TH, Env

MINUTE = 60_000
SETTLE = 30_000
COMMENT = "Shop: https://shop.example.org"


@pytest.fixture
def env(backend_url, tmp_path):
    e = Env(tmp_path, backend_url)
    e.credential("instagram", IG, {"accessToken": "good-token"})
    e.credential("threads", TH, {"accessToken": "good-token"})
    e.credential("bluesky", HANDLE, {"appPassword": "abcd-efgh-ijkl-mnop", "session": {**e.pds.session(), "pds": PDS}})
    yield e
    e.close()


def published(env, platform, slug, caption="It's here"):
    """A post with a first comment, walked to done."""
    images = 1 if platform != "bsky" else 0
    doc_id = env.queue(platform, slug, images=images, caption=caption, first_comment=COMMENT,
                       account=HANDLE if platform == "bsky" else None)
    for _ in range(4):
        env.tick()
        if env.doc(doc_id)["status"] == "done":
            break
        env.clock.advance(SETTLE)
    d = env.doc(doc_id)
    assert d["status"] == "done" and d["commentDue"] is True
    return doc_id


def comments_on(env, doc_id):
    return [c for c in env.meta.comments if c.media == env.doc(doc_id)["mediaId"]]


# ---- Instagram ---------------------------------------------------------------------------------
def test_instagram_comments_once_after_publishing(env):
    doc_id = published(env, "ig", "launch")
    assert env.meta.calls["comment"] == 0  # the comment is the next step, not part of the publish
    assert env.tick() == {"commented": 1}
    d = env.doc(doc_id)
    (comment,) = comments_on(env, doc_id)
    assert d["status"] == "commented" and d["commentId"] == comment.id and comment.text == COMMENT
    assert "commentDue" not in d and "intent" not in d and d["commentedAt"].endswith("Z")
    assert env.statuses(doc_id)[-3:] == ["done", "done", "commented"]  # the intent, then the result
    before = sum(env.meta.calls.values())
    assert env.tick() == {} and sum(env.meta.calls.values()) == before  # commented: nothing more


def test_instagram_a_comment_whose_answer_was_lost_is_read_back_not_posted_again(env):
    doc_id = published(env, "ig", "lost")
    env.meta.fail["comment"] = ["live-timeout"]
    assert env.tick() == {"unknown": 1}
    d = env.doc(doc_id)
    assert d["status"] == "done" and d["intent"]["step"] == "comment" and "may still have been posted" in d["lastError"]
    assert env.tick() == {"commented": 1}  # read back: found among the media's comments
    assert len(comments_on(env, doc_id)) == 1 and env.meta.calls["comment"] == 1 and env.meta.calls["comments"] == 1


@pytest.mark.parametrize("fault", ["timeout", SERVER_ERROR_2], ids=["timeout", "5xx"])
def test_instagram_a_comment_that_failed_before_going_live_is_posted_again_after_republish_after(env, fault):
    doc_id = published(env, "ig", "again")
    env.meta.fail["comment"] = [fault]
    assert env.tick() == {"unknown": 1}
    assert env.tick() == {"busy": 1}  # not found, but the call is younger than republish_after: perhaps under way
    assert comments_on(env, doc_id) == []
    env.clock.advance(MINUTE)
    assert env.tick() == {"commented": 1}
    d = env.doc(doc_id)
    assert len(comments_on(env, doc_id)) == 1 and env.meta.calls["comment"] == 2 and d["commentAttempts"] == 1


def test_instagram_a_comment_that_went_live_with_a_5xx_answer_is_not_posted_twice(env):
    doc_id = published(env, "ig", "live5xx")
    env.meta.fail["comment"] = [("live", SERVER_ERROR_2)]
    assert env.tick() == {"unknown": 1}
    env.clock.advance(MINUTE)
    assert env.tick() == {"commented": 1}
    assert len(comments_on(env, doc_id)) == 1 and env.meta.calls["comment"] == 1


def test_instagram_a_refused_comment_ends_the_step_and_the_post_stays_published(env):
    doc_id = published(env, "ig", "refused")
    env.meta.fail["comment"] = [error(100, "Invalid parameter", subcode=2207023)]
    assert env.tick() == {"comment-failed": 1}
    d = env.doc(doc_id)
    assert d["status"] == "done" and d["permalink"] and "Instagram refused the first comment" in d["commentError"]
    assert "commentDue" not in d and "intent" not in d
    assert env.tick() == {} and env.meta.calls["comment"] == 1


def test_instagram_a_refused_credential_holds_the_comment_until_a_fresh_paste(env):
    doc_id = published(env, "ig", "held")
    env.meta.fail["comment"] = [TOKEN_EXPIRED_190]
    assert env.tick() == {"held": 1}
    d = env.doc(doc_id)
    assert d["status"] == "done" and d["held"]["credential"] == f"instagram:{IG}" and "intent" not in d
    assert env.store.get("vault", f"instagram:{IG}")["status"] == "needs-reauth"
    env.credential("instagram", IG, {"accessToken": "good-token"})  # a fresh paste, verified
    assert env.tick() == {"commented": 1}
    assert len(comments_on(env, doc_id)) == 1 and "held" not in env.doc(doc_id)


def test_a_post_without_a_first_comment_is_done_and_nothing_more(env):
    doc_id = env.queue("ig", "plain", images=1, caption="Plain")
    env.tick()
    env.tick()
    d = env.doc(doc_id)
    assert d["status"] == "done" and "commentDue" not in d
    assert env.tick() == {} and env.meta.calls["comment"] == 0


# ---- Threads -----------------------------------------------------------------------------------
def test_threads_replies_once_a_container_then_its_publish(env):
    doc_id = published(env, "threads", "hello")
    media_id = env.doc(doc_id)["mediaId"]
    assert env.tick() == {"comment-container": 1}
    container = env.threads.containers[env.doc(doc_id)["commentContainer"]["id"]]
    assert (container.reply_to, container.media_type, container.caption) == (media_id, "TEXT", COMMENT)
    assert env.tick() == {"waiting": 1}  # 30 s after the container, as for a post
    env.clock.advance(SETTLE)
    assert env.tick() == {"commented": 1}
    (reply,) = env.threads.replies(to=media_id)
    assert env.doc(doc_id)["commentId"] == reply.id and env.threads.calls["reply-publish"] == 1
    assert len(env.threads.live()) == 1  # the reply is not a second post


@pytest.mark.parametrize("fault", ["live-timeout", ("live", SERVER_ERROR_2)], ids=["live-timeout", "live-5xx"])
def test_threads_a_reply_whose_answer_was_lost_is_read_back(env, fault):
    doc_id = published(env, "threads", "lost")
    env.tick()
    env.clock.advance(SETTLE)
    env.threads.fail["reply-publish"] = [fault]
    assert env.tick() == {"unknown": 1}
    assert env.tick() == {"commented": 1}  # the container is PUBLISHED: it went live
    media_id = env.doc(doc_id)["mediaId"]
    assert len(env.threads.replies(to=media_id)) == 1 and env.threads.calls["reply-publish"] == 1
    assert env.doc(doc_id)["commentId"] == env.threads.replies(to=media_id)[0].id


@pytest.mark.parametrize("fault", ["timeout", SERVER_ERROR_2], ids=["timeout", "5xx"])
def test_threads_a_reply_that_did_not_go_live_is_published_again_after_republish_after(env, fault):
    doc_id = published(env, "threads", "again")
    env.tick()
    env.clock.advance(SETTLE)
    env.threads.fail["reply-publish"] = [fault]
    assert env.tick() == {"unknown": 1}
    assert env.tick() == {"busy": 1}  # FINISHED, and the call is young
    env.clock.advance(MINUTE)
    assert env.tick() == {"commented": 1}
    assert len(env.threads.replies(to=env.doc(doc_id)["mediaId"])) == 1 and env.threads.calls["reply-publish"] == 2


def test_threads_a_reply_container_whose_creation_timed_out_is_made_again_and_published_once(env):
    doc_id = published(env, "threads", "container")
    env.threads.fail["reply"] = ["timeout"]
    assert env.tick() == {"retry-later": 1}
    assert env.tick() == {"comment-container": 1}
    env.clock.advance(SETTLE)
    assert env.tick() == {"commented": 1}
    assert len(env.threads.replies(to=env.doc(doc_id)["mediaId"])) == 1


# ---- Bluesky -----------------------------------------------------------------------------------
def test_bluesky_replies_once_in_the_post_s_thread(env):
    doc_id = published(env, "bsky", "hello")
    assert env.tick() == {"commented": 1}
    d = env.doc(doc_id)
    reply = env.pds.records[(POST, d["commentRkey"])]
    assert reply["value"]["text"] == COMMENT
    refs = reply["value"]["reply"]
    assert [(refs[k]["uri"], refs[k]["cid"]) for k in ("root", "parent")] == [(d["recordUri"], d["recordCid"])] * 2
    assert d["commentUri"] == f"at://{DID}/{POST}/{d['commentRkey']}" and d["status"] == "commented"
    assert reply["value"]["facets"][0]["features"][0]["uri"] == "https://shop.example.org"


def test_bluesky_a_reply_written_but_unanswered_is_read_back_under_its_key(env):
    doc_id = published(env, "bsky", "lost")

    def write_then_time_out(request, pds):
        pds.com_atproto_repo_createRecord(request)  # the record is written...
        return httpx.ReadTimeout("timed out", request=request)  # ...and the answer is lost

    env.pds.fail["com.atproto.repo.createRecord"] = [write_then_time_out]
    outcome = env.tick()
    assert outcome in ({"commented": 1}, {"retry-later": 1})  # the adapter reads the key back at once, or the next run does
    env.clock.advance(MINUTE)
    env.tick()
    d = env.doc(doc_id)
    replies = [r for r in env.pds.records.values() if r["value"].get("text") == COMMENT]
    assert d["status"] == "commented" and len(replies) == 1


def test_bluesky_a_reply_that_failed_with_a_5xx_is_posted_once_later(env):
    doc_id = published(env, "bsky", "five")
    env.pds.fail["com.atproto.repo.createRecord"] = [httpx.Response(502, json={"error": "UpstreamFailure"})]
    assert env.tick() == {"retry-later": 1}
    rkey = env.doc(doc_id)["commentRkey"]
    env.clock.advance(MINUTE)
    assert env.tick() == {"commented": 1}
    assert env.doc(doc_id)["commentRkey"] == rkey  # the key was fixed before the first call
    assert len([r for r in env.pds.records.values() if r["value"].get("text") == COMMENT]) == 1
