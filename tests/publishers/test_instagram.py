"""The publish tick on Instagram against a stateful fake of Meta's documented API (FakeMeta),
on a fake clock, counting calls: never twice, whatever the answers."""

from __future__ import annotations

import pytest

from skyhub_testkit.fakemeta import (
    CAROUSEL_INVALID_2207028,
    FETCH_FAILED_2207052,
    NOT_READY_9007,
    RATE_LIMIT_4,
    SERVER_ERROR_2,
    SPAM_4_2207051,
    USER_RATE_LIMIT_17,
)
from tests.publishers.conftest import FB_HOST, IG, IG_HOST

MINUTE = 60_000


@pytest.fixture
def ig(env):
    env.credential("instagram", IG, {"accessToken": "good-token"})
    return env


def run_until_done(env, doc_id, ticks=10, step_ms=MINUTE):
    for _ in range(ticks):
        env.tick()
        if env.doc(doc_id)["status"] in ("done", "error"):
            return env.doc(doc_id)
        env.clock.advance(step_ms)
    return env.doc(doc_id)


@pytest.mark.parametrize("login", ["instagram", "facebook"])
def test_a_carousel_is_published_once_on_either_host(env, login):
    env.credential(login, IG, {"accessToken": "good-token"})
    doc_id = env.queue("ig", "launch", images=3, caption="It's here #new")
    assert env.tick() == {"items-created": 1}
    d = env.doc(doc_id)
    assert d["status"] == "items-created" and [c["n"] for c in d["containers"]] == [0, 1, 2] and "intent" not in d
    assert all(c["at"] == env.clock.now_ms() for c in d["containers"])
    children = [env.meta.containers[c["id"]] for c in d["containers"]]
    assert [(c.carousel_item, c.alt, c.caption) for c in children] == [(True, f"photo {i}", None) for i in range(3)]
    assert env.tick() == {"carousel-created": 1}
    parent = env.meta.containers[env.doc(doc_id)["carouselId"]]
    assert parent.media_type == "CAROUSEL" and parent.children == [c["id"] for c in d["containers"]]
    assert parent.caption == "It's here #new"
    assert env.tick() == {"done": 1}
    d = env.doc(doc_id)
    assert d["status"] == "done" and d["permalink"].startswith("https://www.instagram.com/p/") and d["mediaId"]
    assert env.meta.calls == {"create": 3, "carousel": 1, "status": 1, "limit": 1, "publish": 1, "permalink": 1}
    host = (IG_HOST if login == "instagram" else FB_HOST).removeprefix("https://")
    assert set(env.meta.hosts) == {host} and set(env.meta.versions) == {"v21.0"}
    assert all(path.startswith(IG) for endpoint, path, _ in env.meta.requests if endpoint != "status" and endpoint != "permalink")
    assert env.statuses(doc_id) == ["pending", "pending", "items-created", "items-created", "carousel-created",
                                    "carousel-created", "done"]  # each step: the intent, then the result
    account = env.store.get("publish", f"ig:{IG}")
    assert len(account["containers"]) == 4 and not account.get("blockedUntil")
    assert env.tick() == {} and sum(env.meta.calls.values()) == 8  # done: nothing more


def test_a_single_image_is_one_container(ig):
    doc_id = ig.queue("ig", "one", images=1, caption="Just one")
    assert ig.tick() == {"carousel-created": 1}
    assert ig.tick() == {"done": 1}
    assert ig.meta.calls["create"] == 1 and ig.meta.calls["carousel"] == 0 and ig.meta.calls["publish"] == 1
    c = next(iter(ig.meta.containers.values()))
    assert (c.caption, c.alt, c.carousel_item) == ("Just one", "photo 0", False)
    assert ig.doc(doc_id)["status"] == "done"


def test_in_progress_three_times_then_finished_is_not_an_attempt(ig):
    ig.meta.statuses = ["IN_PROGRESS"] * 3 + ["FINISHED"]
    doc_id = ig.queue("ig", "slow", images=1, caption="Slow one")
    ig.tick()
    for n in (1, 2, 3):
        assert ig.tick() == {"in-progress": 1}
        d = ig.doc(doc_id)
        assert d["checks"] == n and d["notBefore"] == ig.clock.now_ms() + MINUTE and f"check {n} of 5" in d["lastError"]
        assert ig.tick() == {"not-yet": 1}  # a minute apart
        ig.clock.advance(MINUTE)
    assert ig.tick() == {"done": 1}
    d = ig.doc(doc_id)
    assert d["attempts"] == 0 and ig.meta.calls["status"] == 4 and ig.meta.calls["publish"] == 1 and ig.meta.calls["create"] == 1


def test_in_progress_too_long_recreates_the_containers(ig):
    ig.meta.statuses = ["IN_PROGRESS"] * 5
    doc_id = ig.queue("ig", "stuck", images=1, caption="Stuck")
    ig.tick()
    ig.meta.statuses = []
    outcomes = []
    for _ in range(5):
        outcomes.append(ig.tick())
        ig.clock.advance(MINUTE)
    assert outcomes == [{"in-progress": 1}] * 4 + [{"recreate": 1}]
    d = ig.doc(doc_id)
    assert d["status"] == "pending" and d["recreates"] == 1 and "after 5 checks" in d["lastError"] and d["attempts"] == 0
    d = run_until_done(ig, doc_id)
    assert d["status"] == "done" and ig.meta.calls["create"] == 2 and ig.meta.calls["publish"] == 1


def test_an_expired_container_is_recreated_then_published(ig):
    doc_id = ig.queue("ig", "late", images=2, caption="Late")
    ig.tick()
    ig.tick()
    ig.meta.containers[ig.doc(doc_id)["carouselId"]].statuses = ["EXPIRED"]
    assert ig.tick() == {"recreate": 1}
    d = ig.doc(doc_id)
    assert d["status"] == "pending" and d["recreates"] == 1 and "is EXPIRED" in d["lastError"] and "containers" not in d
    assert run_until_done(ig, doc_id)["status"] == "done"
    assert ig.meta.calls["create"] == 4 and ig.meta.calls["carousel"] == 2 and ig.meta.calls["publish"] == 1
    assert ig.doc(doc_id)["attempts"] == 0
    assert len(ig.store.get("publish", f"ig:{IG}")["containers"]) == 6  # every container counts


def test_not_ready_9007_waits_for_the_next_tick(ig):
    doc_id = ig.queue("ig", "ready", images=1, caption="Ready?")
    ig.tick()
    ig.meta.fail["publish"] = [NOT_READY_9007]
    assert ig.tick() == {"unknown": 1}  # a publish's failure is read back, even a clear one
    d = ig.doc(doc_id)
    assert d["intent"]["failed"]["code"] == "platform_not_ready" and "code 9007, subcode 2207027" in d["lastError"]
    assert ig.tick() == {"done": 1}  # the next tick: FINISHED, published; not an attempt
    assert ig.doc(doc_id)["attempts"] == 0 and ig.meta.calls["publish"] == 2 and len(ig.meta.live()) == 1


def test_a_full_quota_publishes_a_day_later(ig):
    ig.meta.published_before = [ig.clock.now_ms() - 3_600_000] * 100  # 100 posts in the last hour, made elsewhere
    doc_id = ig.queue("ig", "quota", images=1, caption="Tomorrow")
    ig.tick()
    assert ig.tick() == {"waiting": 1}
    d = ig.doc(doc_id)
    assert "publishing limit is full: 100 of 100 posts in the last 24 hours" in d["lastError"]
    assert d["notBefore"] == ig.clock.now_ms() + 3_600_000 and ig.meta.calls["publish"] == 0
    for _ in range(22):
        ig.clock.advance(3_600_000)
        assert ig.tick() == {"waiting": 1}
    ig.clock.advance(3_600_000)
    assert ig.tick() == {"done": 1}
    assert ig.doc(doc_id)["attempts"] == 0 and ig.meta.calls["publish"] == 1 and ig.meta.calls["limit"] == 24


def test_a_rate_limit_blocks_only_its_own_account(ig):
    other = "17841499999999999"
    ig.credential("instagram", other, {"accessToken": "good-token"})
    mine = ig.queue("ig", "a", images=1, caption="A")
    theirs = ig.queue("ig", "b", images=1, caption="B", account=other)
    mine2 = ig.queue("ig", "c", images=1, caption="C")
    ig.meta.fail["create"] = [RATE_LIMIT_4]
    counts = ig.tick()
    assert counts == {"rate-limited": 1, "blocked": 1, "carousel-created": 1}
    account = ig.store.get("publish", f"ig:{IG}")
    assert account["blockedUntil"] == ig.clock.now_ms() + 900_000 and "code 4" in account["blockedReason"]
    assert ig.doc(theirs)["status"] == "carousel-created" and ig.doc(mine)["status"] == "pending"
    assert "code 4" in ig.doc(mine)["lastError"] and ig.doc(mine2).get("lastError") is None
    assert ig.tick() == {"blocked": 2, "done": 1}
    ig.clock.advance(900_001)
    assert ig.tick() == {"carousel-created": 2}
    assert ig.tick() == {"done": 2}
    assert ig.doc(mine)["attempts"] == 0


def test_usage_over_90_percent_blocks_the_account(ig):
    first = ig.queue("ig", "a", images=1, caption="A")
    second = ig.queue("ig", "b", images=1, caption="B")
    ig.meta.usage_header = {"call_count": 95, "total_time": 10, "total_cputime": 10}
    assert ig.tick() == {"carousel-created": 1, "blocked": 1}
    assert "95 % of a rate limit" in ig.store.get("publish", f"ig:{IG}")["blockedReason"]
    assert ig.doc(first)["status"] == "carousel-created" and ig.doc(second)["status"] == "pending"


def test_user_rate_limit_17_on_a_read_blocks_too(ig):
    doc_id = ig.queue("ig", "a", images=1, caption="A")
    ig.tick()
    ig.meta.fail["status"] = [USER_RATE_LIMIT_17]
    assert ig.tick() == {"rate-limited": 1}
    assert ig.tick() == {"blocked": 1}
    ig.clock.advance(900_001)
    assert ig.tick() == {"done": 1} and ig.doc(doc_id)["attempts"] == 0


def test_190_holds_without_calls_until_a_fresh_paste_is_verified(ig):
    import httpx

    from ledger import Ledger
    from vault import Vault
    from vault.rotation import maintain

    doc_id = ig.queue("ig", "auth", images=2, caption="Auth")
    ig.meta.tokens = {"new-token"}  # the pasted token was revoked
    assert ig.tick() == {"held": 1}
    d = ig.doc(doc_id)
    assert d["held"]["credential"] == f"instagram:{IG}" and "code 190, subcode 463" in d["held"]["reason"]
    assert d["held"]["fix"] == {"platform": "instagram", "account": IG}
    assert d["status"] == "pending" and d["attempts"] == 0
    cred = ig.store.get("vault", f"instagram:{IG}")
    assert cred["needsReauth"] is True and cred["status"] == "needs-reauth"
    calls = sum(ig.meta.calls.values())
    assert ig.tick() == {"held": 1} and sum(ig.meta.calls.values()) == calls  # no calls while held
    assert "skyhub vault put" in ig.doc(doc_id)["held"]["reason"]
    writes = len(ig.store.history("requests", doc_id))
    assert ig.tick() == {"held": 1} and sum(ig.meta.calls.values()) == calls
    assert len(ig.store.history("requests", doc_id)) == writes  # no write per tick while nothing changes
    # a person pastes a fresh token; the vault tick verifies it (GET /me)
    Vault(ig.maya, ig.key).put("instagram", IG, {"accessToken": "new-token"})
    assert ig.tick() == {"held": 1}  # not verified yet
    from hub.settings import load_settings
    from ledger import TickEvent
    from ledger.context import Services, make_context

    def verify(request):
        return httpx.Response(200, json={"user_id": IG, "username": "shop"})

    vault_http = httpx.Client(transport=httpx.MockTransport(verify))
    services = Services(vault=lambda db: Vault(db, ig.key), http=vault_http, platforms=ig.platforms)
    vctx = make_context(Ledger(ig.store, "tick:vault", ig.clock), "vault", services, settings=load_settings().section("vault"))
    maintain(TickEvent("vault", None), vctx)  # type: ignore[arg-type]
    assert ig.store.get("vault", f"instagram:{IG}")["status"] == "ok"
    assert ig.tick() == {"items-created": 1}
    d = ig.doc(doc_id)
    assert "held" not in d and d["status"] == "items-created"  # released in the same write as the step
    assert run_until_done(ig, doc_id)["status"] == "done"
    assert ig.doc(doc_id)["attempts"] == 0 and len(ig.meta.live()) == 1


def test_a_missing_credential_holds_with_the_commands_to_paste_one(env):
    doc_id = env.queue("ig", "nocred", images=1, caption="x")
    assert env.tick() == {"held": 1}
    held = env.doc(doc_id)["held"]
    assert "skyhub vault put instagram 17841400000000000" in held["reason"] and "skyhub vault put facebook" in held["reason"]
    # for pages: the problem without the commands, and what to paste (the console links its paste form)
    assert held["problem"] == "no credential for this account in the vault"
    assert held["fix"] == {"platform": "instagram", "account": "17841400000000000"}
    assert sum(env.meta.calls.values()) == 0


class Killed(BaseException):
    """The process dies here (nothing after it runs, no except clause catches it)."""


def test_a_crash_between_media_publish_and_the_done_write_ends_done_once(ig):
    doc_id = ig.queue("ig", "crash", images=2, caption="Crash")
    ig.tick()
    ig.tick()

    def die():
        raise Killed

    ig.meta.on_publish = die
    with pytest.raises(Killed):
        ig.tick()
    ig.meta.on_publish = None
    d = ig.doc(doc_id)
    assert d["status"] == "carousel-created" and d["intent"]["step"] == "publish" and len(ig.meta.live()) == 1
    assert ig.tick() == {"done": 1}  # read back: PUBLISHED, found among recent media
    d = ig.doc(doc_id)
    assert d["mediaId"] == ig.meta.live()[0].id and d["permalink"] == ig.meta.live()[0].permalink
    assert ig.meta.calls["publish"] == 1 and ig.meta.calls["recent"] == 1 and d["attempts"] == 0


@pytest.mark.parametrize("answer", ["live-timeout", ("live", SPAM_4_2207051), ("live", SERVER_ERROR_2)],
                         ids=["timeout", "4/2207051", "2-500"])
def test_a_publish_that_went_live_but_answered_badly_ends_done_once(ig, answer):
    doc_id = ig.queue("ig", "live", images=1, caption="Live")
    ig.tick()
    ig.meta.fail["publish"] = [answer]
    assert ig.tick() == {"unknown": 1}
    d = ig.doc(doc_id)
    assert d["status"] == "carousel-created" and "may still have gone through" in d["lastError"]
    assert ig.tick() == {"done": 1}
    assert ig.meta.calls["publish"] == 1 and len(ig.meta.live()) == 1 and ig.doc(doc_id)["attempts"] == 0


def test_a_publish_that_did_not_go_live_is_tried_again_after_a_minute_as_an_attempt(ig):
    doc_id = ig.queue("ig", "retry", images=1, caption="Again")
    ig.tick()
    ig.meta.fail["publish"] = ["timeout"]
    assert ig.tick() == {"unknown": 1}
    assert ig.tick() == {"busy": 1}  # FINISHED, but the call may still be under way somewhere
    ig.clock.advance(MINUTE)
    assert ig.tick() == {"done": 1}
    assert ig.meta.calls["publish"] == 2 and len(ig.meta.live()) == 1 and ig.doc(doc_id)["attempts"] == 1


def test_spam_4_2207051_that_did_not_go_live_ends_in_error(ig):
    doc_id = ig.queue("ig", "spam", images=1, caption="Buy now")
    ig.tick()
    ig.meta.fail["publish"] = [SPAM_4_2207051]
    ig.tick()
    assert ig.tick() == {"error": 1}
    d = ig.doc(doc_id)
    assert d["status"] == "error" and "code 4, subcode 2207051" in d["lastError"] and "fbtrace_id Atrace4x2207051" in d["lastError"]
    assert ig.meta.calls["publish"] == 1


def test_publishing_gives_up_after_three_attempts(ig):
    doc_id = ig.queue("ig", "flaky", images=1, caption="Flaky")
    ig.tick()
    ig.meta.fail["publish"] = ["timeout"] * 4
    d = run_until_done(ig, doc_id, ticks=12)
    assert d["status"] == "error" and "gave up after 3 attempts" in d["lastError"] and ig.meta.calls["publish"] == 4
    assert len(ig.meta.live()) == 0


def test_content_errors_end_in_error_and_2207052_is_tried_once_more(ig):
    bad = ig.queue("ig", "bad", images=2, caption="Bad")
    ig.meta.fail["create"] = [CAROUSEL_INVALID_2207028]
    assert ig.tick() == {"error": 1}
    assert "subcode 2207028" in ig.doc(bad)["lastError"]
    fetch = ig.queue("ig", "fetch", images=1, caption="Fetch")
    ig.meta.fail["create"] = [FETCH_FAILED_2207052, FETCH_FAILED_2207052]
    assert ig.tick() == {"retry": 1}
    assert ig.doc(fetch)["attempts"] == 1
    assert ig.tick() == {"error": 1}
    d = ig.doc(fetch)
    assert d["status"] == "error" and "subcode 2207052" in d["lastError"] and ig.meta.calls["create"] == 3


def test_a_transient_error_on_a_read_is_retried_within_the_tick(ig):
    doc_id = ig.queue("ig", "five", images=1, caption="5xx")
    ig.tick()
    ig.meta.fail["status"] = [SERVER_ERROR_2, "timeout"]
    assert ig.tick() == {"done": 1}
    assert ig.meta.calls["status"] == 3 and ig.doc(doc_id)["attempts"] == 0


def test_a_crash_during_container_creation_creates_again_and_counts_both(ig):
    doc_id = ig.queue("ig", "orphan", images=1, caption="Orphan")

    def die():
        raise Killed

    ig.meta.before["create"] = die
    with pytest.raises(Killed):
        ig.tick()
    ig.meta.before.clear()
    assert ig.doc(doc_id)["intent"]["step"] == "container"
    assert ig.tick() == {"busy": 1}  # another process may be creating it right now
    ig.clock.advance(MINUTE)
    assert ig.tick() == {"carousel-created": 1}
    assert len(ig.store.get("publish", f"ig:{IG}")["containers"]) == 2  # the orphan counts too


def test_400_containers_a_day_per_account(ig):
    from publishers.accounts import Account

    account = Account.load(ig.store and __import__("ledger").Ledger(ig.store, "tick:publish", ig.clock), "ig", IG)
    account.created(399, ig.clock.now_ms() - 3_600_000)
    account.save(__import__("ledger").Ledger(ig.store, "tick:publish", ig.clock))
    doc_id = ig.queue("ig", "many", images=3, caption="Many")
    assert ig.tick() == {"waiting": 1}
    d = ig.doc(doc_id)
    assert "400 containers per account in 24 hours" in d["lastError"]
    assert d["notBefore"] == ig.clock.now_ms() - 3_600_000 + 86_400_000 and ig.meta.calls["create"] == 0
    ig.clock.advance(23 * 3_600_000)
    assert ig.tick() == {"items-created": 1}


def test_a_scheduled_post_waits_for_its_time(ig):
    from datetime import UTC, datetime

    at = datetime.fromtimestamp((ig.clock.now_ms() + 2 * 3_600_000) / 1000, tz=UTC).isoformat()
    doc_id = ig.queue("ig", "later", images=1, caption="Later", at=at)
    assert ig.tick() == {"not-yet": 1} and sum(ig.meta.calls.values()) == 0
    ig.clock.advance(2 * 3_600_000)
    assert ig.tick() == {"carousel-created": 1}
    assert ig.doc(doc_id)["status"] == "carousel-created"
