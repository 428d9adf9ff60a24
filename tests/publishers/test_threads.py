"""The publish tick on Threads against the stateful fake (graph.threads.net's shapes): text, one
image, carousels, the 30 s wait before publishing, 4279009 and the 250-post quota."""

from __future__ import annotations

import pytest

from skyhub_testkit.fakemeta import THREADS_NOT_READY_4279009
from tests.publishers.conftest import TH

SETTLE = 30_000


@pytest.fixture
def th(env):
    env.credential("threads", TH, {"accessToken": "good-token"})
    return env


def test_a_text_post_is_one_container_published_30_s_later(th):
    doc_id = th.queue("threads", "hello", caption="Hello, Threads")
    assert th.tick() == {"carousel-created": 1}
    (container,) = th.threads.containers.values()
    assert (container.media_type, container.caption) == ("TEXT", "Hello, Threads")
    assert th.tick() == {"not-yet": 1}  # no sooner than 30 s after creation
    th.clock.advance(SETTLE)
    assert th.tick() == {"done": 1}
    d = th.doc(doc_id)
    assert d["permalink"].startswith("https://www.threads.net/") and th.threads.calls["publish"] == 1
    (endpoint, path, args) = next(r for r in th.threads.requests if r[0] == "status")
    assert args["fields"] == "status,error_message"
    assert set(th.threads.versions) == {"v1.0"}  # platforms.threads_version


def test_a_carousel_of_three_images(th):
    doc_id = th.queue("threads", "three", images=3, caption="Three")
    assert th.tick() == {"items-created": 1}
    assert th.tick() == {"carousel-created": 1}
    th.clock.advance(SETTLE)
    assert th.tick() == {"done": 1}
    children = [c for c in th.threads.containers.values() if c.carousel_item]
    assert [c.alt for c in children] == ["photo 0", "photo 1", "photo 2"] and all(c.caption is None for c in children)
    parent = next(c for c in th.threads.containers.values() if c.media_type == "CAROUSEL")
    assert parent.caption == "Three" and len(parent.children) == 3
    assert th.threads.calls == {"create": 3, "carousel": 1, "status": 1, "limit": 1, "publish": 1, "permalink": 1}
    assert th.doc(doc_id)["attempts"] == 0


def test_4279009_waits_and_is_not_an_attempt(th):
    doc_id = th.queue("threads", "wait", images=1, caption="Wait")
    th.tick()
    th.clock.advance(SETTLE)
    th.threads.fail["publish"] = [THREADS_NOT_READY_4279009]
    assert th.tick() == {"unknown": 1}
    assert "subcode 4279009" in th.doc(doc_id)["lastError"]
    assert th.tick() == {"done": 1}
    assert th.doc(doc_id)["attempts"] == 0 and len(th.threads.live()) == 1 and th.threads.calls["publish"] == 2


def test_the_250_post_quota_waits_for_the_window(th):
    th.threads.published_before = [th.clock.now_ms() - 1_000] * 250
    doc_id = th.queue("threads", "quota", caption="Over quota")
    th.tick()
    th.clock.advance(SETTLE)
    assert th.tick() == {"waiting": 1}
    assert "250 of 250 posts" in th.doc(doc_id)["lastError"] and th.threads.calls["publish"] == 0
    th.clock.advance(86_400_000)
    assert th.tick() == {"done": 1}
    assert th.threads.calls["publish"] == 1 and th.doc(doc_id)["attempts"] == 0


def test_a_crash_after_threads_publish_ends_done_once(th):
    class Killed(BaseException):
        pass

    def die():
        raise Killed

    doc_id = th.queue("threads", "crash", caption="Crash")
    th.tick()
    th.clock.advance(SETTLE)
    th.threads.on_publish = die
    with pytest.raises(Killed):
        th.tick()
    th.threads.on_publish = None
    assert th.tick() == {"done": 1}
    d = th.doc(doc_id)
    assert d["mediaId"] == th.threads.live()[0].id and th.threads.calls["publish"] == 1 and th.threads.calls["recent"] == 1
