"""``POST /v1/publish`` and ``GET /v1/publish`` (publishers/api.py) on the hub's API, mounted
by the hub from the product's declaration, every bad input refused with its sentence and nothing written, the
CLI over ``--hub`` through ``publishers.remote.publish_queue``, and raw ``db put`` requests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from hub.app import build_app
from hub.auth import add_user
from hub.remote import RemoteStore, TokenAuth
from hub.settings import load_settings
from hub.webapp import create_api
from ledger import SYSTEM, Ledger
from publishers.remote import publish_queue
from skyhub_testkit.hub import serving

JPG = "https://cdn.example.org/p/{}.jpg"
IG = "17841400000000000"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    monkeypatch.setenv("SKYHUB_PUBLISH__ACCOUNTS__IG", IG)
    app = build_app(load_settings(database_url=f"sqlite:///{tmp_path}/hub.db"), clock=SYSTEM)
    with serving(create_api(app)) as url:
        client = httpx.Client(base_url=url, timeout=30)
        client.headers["Authorization"] = f"Bearer {add_user(app.store, 'maya', clock=SYSTEM)}"
        client.app_state = app  # type: ignore[attr-defined]
        yield client
        client.close()
    app.stop()


def images(n):
    return [{"url": JPG.format(i), "alt": f"photo {i}"} for i in range(n)]


def test_queue_list_and_queue_again(hub):
    body = {"platform": "ig", "slug": "launch", "caption": "It's here", "images": images(3)}
    first = hub.post("/v1/publish", json=body)
    assert first.status_code == 200 and first.json() == {"id": f"ig:{IG}:launch", "queued": True, "status": "pending", "warnings": []}
    assert hub.post("/v1/publish", json=body).json()["queued"] is False
    changed = hub.post("/v1/publish", json={**body, "caption": "Other"})
    assert changed.status_code == 409 and changed.json()["error"] == "conflict"
    hub.post("/v1/publish", json={"platform": "bsky", "account": "shop.test", "slug": "hi", "caption": "Hi"})
    listed = hub.get("/v1/publish", params={"platform": "ig"}).json()
    assert [(d["_id"], d["nextStep"]) for d in listed["docs"]] == [(f"ig:{IG}:launch", "create the container(s)")]
    assert listed["next"] is None
    paged = hub.get("/v1/publish", params={"limit": 1}).json()
    assert len(paged["docs"]) == 1 and paged["next"]
    rest = hub.get("/v1/publish", params={"limit": 1, "after": paged["next"]}).json()
    assert rest["docs"][0]["_id"] != paged["docs"][0]["_id"]
    doc = hub.app_state.store.get("requests", f"ig:{IG}:launch")
    assert [c.actor for c in hub.app_state.store.history("requests", doc["_id"])] == ["user:maya"]
    assert hub.get("/v1/publish", params={"status": "pending"}).json()["docs"][0]["status"] == "pending"


def test_the_api_needs_a_credential(hub):
    hub.headers.pop("Authorization")
    assert hub.post("/v1/publish", json={"platform": "ig", "slug": "x"}).status_code == 401
    assert hub.get("/v1/publish").status_code == 401


IN_PAST = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
BAD = [
    ({"platform": "ig", "slug": "s", "images": images(11)}, "an Instagram carousel needs 2 to 10 images, got 11"),
    ({"platform": "ig", "slug": "s"}, "an Instagram post needs an image"),
    ({"platform": "ig", "slug": "s", "images": [{"url": "./local.jpg", "alt": ""}]},
     "image 1 must be a public https URL, not a path"),
    ({"platform": "ig", "slug": "s", "images": [{"url": "http://cdn.example.org/a.jpg"}]}, "image 1 must be an https URL"),
    ({"platform": "ig", "slug": "s", "images": [{"url": "https://cdn.example.org/a.png"}]}, "image 1 must be a JPEG"),
    ({"platform": "ig", "slug": "s", "images": images(1), "caption": "x" * 2201}, "at most 2,200 characters, got 2,201"),
    ({"platform": "ig", "slug": "s", "images": images(1), "caption": " ".join(f"#t{i}" for i in range(31))}, "at most 30 hashtags"),
    ({"platform": "ig", "slug": "s", "images": images(1), "caption": " ".join(f"@u{i}" for i in range(21))}, "at most 20 @mentions"),
    ({"platform": "ig", "slug": "s", "images": [{"url": JPG.format(1), "alt": "a" * 1001}]}, "alt text is 1,001 characters"),
    ({"platform": "threads", "account": "1", "slug": "s", "caption": "x" * 501}, "a Threads post is at most 500 characters"),
    ({"platform": "threads", "account": "1", "slug": "s", "images": images(21)}, "a Threads post has at most 20 images, got 21"),
    ({"platform": "threads", "slug": "s", "caption": "x"}, "no account: give one, or set publish.accounts.threads"),
    ({"platform": "bsky", "account": "a.test", "slug": "s", "caption": "é" * 301}, "a Bluesky post is at most 300 characters"),
    ({"platform": "bsky", "account": "a.test", "slug": "s", "images": [{"url": "https://x.test/1.png"}]}, "needs alt text on Bluesky"),
    ({"platform": "bsky", "account": "a.test", "slug": "s", "images": [{"url": "/tmp/x.png", "alt": "x"}]},
     "image 1 must be a public https URL, not a path or another kind of address; to post a file from your machine, upload it first"),
    ({"platform": "bsky", "account": "a.test", "slug": "s", "caption": "x", "replyTo": "https://bsky.app/x"}, "replyTo must be the at:// URI"),
    ({"platform": "ig", "slug": "s", "images": images(1), "at": "2026-12-01T09:00:00"}, "at must be a time with its time zone"),
    ({"platform": "ig", "slug": "s", "images": images(1), "at": IN_PAST}, "is in the past"),
    ({"platform": "ig", "slug": "bad slug!", "images": images(1)}, "slug must be 1-100 letters"),
]


@pytest.mark.parametrize("body,sentence", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_422_with_the_sentence_and_writes_nothing(hub, body, sentence):
    answer = hub.post("/v1/publish", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "invalid_post" and sentence in answer.json()["reason"]
    assert hub.get("/v1/publish").json()["docs"] == []


def test_unknown_fields_and_platforms_are_422(hub):
    assert hub.post("/v1/publish", json={"platform": "ig", "slug": "s", "status": "done"}).status_code == 422
    assert hub.post("/v1/publish", json={"platform": "tiktok", "slug": "s"}).status_code == 422


def test_the_cli_over_a_hub_queues_through_publish_queue(hub):
    remote = RemoteStore(str(hub.base_url), TokenAuth(hub.headers["Authorization"].removeprefix("Bearer ")))
    out = publish_queue(remote, {"platform": "bsky", "account": "shop.test", "slug": "over", "caption": "Over the hub"})
    assert out == {"id": "bsky:shop.test:over", "queued": True, "status": "pending", "warnings": []}
    from publishers.errors import PostInvalid

    with pytest.raises(PostInvalid) as refused:  # the same class as locally: exit 2
        publish_queue(remote, {"platform": "bsky", "account": "shop.test", "slug": "s", "caption": "é" * 301})
    assert "a Bluesky post is at most 300 characters" in refused.value.reason
    remote.close()


RAW = {"kind": "publish-request", "platform": "ig", "account": IG, "slug": "raw", "status": "pending", "attempts": 0,
       "images": images(2), "caption": "Raw", "createdAt": "2026-11-30T10:00:00Z"}
RAW_BAD = [
    ({"images": images(11)}, "an Instagram carousel needs 2 to 10 images, got 11"),
    ({"images": [{"url": "./a.jpg", "alt": ""}]}, "image 1 must be a public https URL, not a path"),
    ({"platform": "x"}, "platform must be one of ig, threads, bsky"),
    ({"caption": "x" * 2201}, "at most 2,200 characters"),
    ({"attempts": 2}, "starts with no attempts"),
    ({"at": "tomorrow"}, "at must be a time with its time zone"),
]


@pytest.mark.parametrize("change,sentence", RAW_BAD, ids=[str(i) for i in range(len(RAW_BAD))])
def test_a_raw_db_put_is_checked_by_the_machine(hub, change, sentence):
    answer = hub.post("/v1/db/requests/docs", json={**RAW, **change})
    assert answer.status_code == 403 and sentence in answer.json()["reason"]
    assert hub.get("/v1/publish").json()["docs"] == []


def test_a_raw_duplicate_ends_skipped_with_the_reason(hub):
    from ledger import Services, TickEvent
    from ledger.context import make_context
    from publishers.settings import PublishSettings
    from publishers.tick import publish

    app = hub.app_state
    queued = hub.post("/v1/publish", json={"platform": "ig", "slug": "raw", "caption": "Raw", "images": images(2)}).json()
    raw = hub.post("/v1/db/requests/docs", json=RAW).json()
    later = hub.post("/v1/db/requests/docs", json={**RAW, "slug": "raw2", "createdAt": "2026-11-30T11:00:00Z"}).json()
    again = hub.post("/v1/db/requests/docs", json={**RAW, "slug": "raw2", "createdAt": "2026-11-30T12:00:00Z"}).json()

    class NoVault:
        def usable(self, cred):
            from ledger import NotFound

            raise NotFound(cred)

    ctx = make_context(Ledger(app.store, "tick:publish", app.clock), "publish", Services(platforms=app.settings.platforms),
                       settings=PublishSettings())
    ctx.vault = NoVault()  # type: ignore[assignment]
    counts = publish(TickEvent("publish", datetime.now(UTC)), ctx)
    assert counts == {"skipped": 2, "held": 2}
    skipped = app.store.get("requests", raw["id"])
    assert skipped["status"] == "skipped" and skipped["skipReason"].startswith(f"duplicate: {queued['id']} already has")
    assert app.store.get("requests", later["id"])["status"] == "pending"
    assert app.store.get("requests", again["id"])["skipReason"].startswith(f"duplicate: {later['id']}")
    listed = {d["_id"]: d["nextStep"] for d in hub.get("/v1/publish").json()["docs"]}
    assert listed[queued["id"]].startswith("held: no credential")
    assert json.dumps(listed)  # plain JSON
