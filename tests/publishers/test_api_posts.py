"""The post routes (``publishers/api_posts.py``) on the hub's API: a post for several networks, its
listing by time, its review, edits, comments and duplicate, and the import, with their answers'
shapes; bad input refused with its sentences and nothing written; the CLI's ``--hub`` helpers."""

from __future__ import annotations

import httpx
import pytest

from hub.app import build_app
from hub.auth import add_user
from hub.remote import RemoteStore, TokenAuth
from hub.settings import load_settings
from hub.webapp import create_api
from ledger import SYSTEM
from publishers.remote import post_act, post_get, post_queue, posts_import, posts_list
from skyhub_testkit.hub import serving

IG = "17841400000000000"
TH = "2900000000000001"
JPG = "https://cdn.example.org/p/{}.jpg"
AT = "2099-03-02T09:00:00+01:00"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    monkeypatch.setenv("SKYHUB_PUBLISH__ACCOUNTS__IG", IG)
    monkeypatch.setenv("SKYHUB_PUBLISH__ACCOUNTS__THREADS", TH)
    app = build_app(load_settings(database_url=f"sqlite:///{tmp_path}/hub.db"), clock=SYSTEM)
    with serving(create_api(app)) as url:
        client = httpx.Client(base_url=url, timeout=30)
        client.token = add_user(app.store, "maya", clock=app.clock)  # type: ignore[attr-defined]
        client.headers["Authorization"] = f"Bearer {client.token}"  # type: ignore[attr-defined]
        client.app_state = app  # type: ignore[attr-defined]
        yield client
        client.close()
    app.stop()


def launch(**extra):
    return {"slug": "launch", "caption": "It's here", "images": [{"url": JPG.format(1), "alt": "The box"}],
            "firstComment": "Shop: https://shop.example.org", "at": AT,
            "variants": [{"platform": "ig"}, {"platform": "threads", "caption": "On Threads"},
                         {"platform": "bsky", "account": "shop.test", "images": [{"url": "https://cdn.example.org/b.png", "alt": "B"}]}],
            **extra}


def test_a_post_for_three_networks_and_its_shape(hub):
    out = hub.post("/v1/posts", json=launch())
    assert out.status_code == 200, out.text
    body = out.json()
    assert {k: body[k] for k in ("id", "queued", "updated", "status", "dryRun")} == {
        "id": "launch", "queued": True, "updated": False, "status": "pending", "dryRun": False}
    assert [(v["id"], v["outcome"], v["status"]) for v in body["variants"]] == [
        (f"ig:{IG}:launch", "new", "pending"), (f"threads:{TH}:launch", "new", "pending"), ("bsky:shop.test:launch", "new", "pending")]
    again = hub.post("/v1/posts", json=launch()).json()
    assert again["queued"] is False and again["updated"] is False
    post = hub.get("/v1/posts/launch").json()
    assert post["id"] == "launch" and post["time"] == "2099-03-02T08:00:00.000Z" and post["published"] is False
    assert [v["caption"] for v in post["variants"]] == ["It's here", "On Threads", "It's here"]
    assert post["variants"][2]["images"] == [{"url": "https://cdn.example.org/b.png", "alt": "B"}]
    assert all(v["nextStep"] and v["time"] == "2099-03-02T08:00:00.000Z" for v in post["variants"])
    one = hub.get(f"/v1/posts/ig:{IG}:launch").json()
    assert [v["_id"] for v in one["variants"]] == [f"ig:{IG}:launch"]
    assert hub.get("/v1/posts/nope").status_code == 404


def test_bad_posts_are_refused_with_every_sentence_and_nothing_written(hub):
    bad = hub.post("/v1/posts", json=launch(images=[], firstComment="x" * 501))
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_post"
    reason = bad.json()["reason"]
    assert f"ig:{IG}: an Instagram post needs an image" in reason and f"threads:{TH}: a first comment on Threads is at most 500" in reason
    assert hub.post("/v1/posts", json={**launch(), "colour": "red"}).status_code == 422
    assert hub.post("/v1/posts", json={**launch(), "variants": []}).status_code == 422
    dry = hub.post("/v1/posts", json=launch(dryRun=True)).json()
    assert dry["dryRun"] is True and [v["outcome"] for v in dry["variants"]] == ["new"] * 3
    assert hub.get("/v1/posts").json() == {"posts": []}


def test_posts_are_listed_by_time_in_a_window(hub):
    for slug, at in (("b", "2099-03-05T09:00:00+00:00"), ("a", "2099-03-01T09:00:00+00:00"), ("c", "2099-04-01T09:00:00+00:00")):
        assert hub.post("/v1/posts", json={"slug": slug, "caption": slug, "at": at, "variants": [
            {"platform": "bsky", "account": "shop.test"}]}).status_code == 200
    assert [p["id"] for p in hub.get("/v1/posts").json()["posts"]] == ["a", "b", "c"]
    march = hub.get("/v1/posts", params={"from": "2099-03-01", "to": "2099-04-01"}).json()["posts"]
    assert [(p["id"], p["time"]) for p in march] == [("a", "2099-03-01T09:00:00.000Z"), ("b", "2099-03-05T09:00:00.000Z")]
    assert hub.get("/v1/posts", params={"from": "March"}).status_code == 400


def test_review_edit_comment_reschedule_duplicate_and_cancel(hub):
    hub.post("/v1/posts", json=launch(draft=True))
    assert hub.post("/v1/posts/launch/submit").json()["status"] == "in-review"
    said = hub.post("/v1/posts/launch/comments", json={"text": "Is 9:00 right?"}).json()
    assert [v["outcome"] for v in said["variants"]] == ["commented"] * 3
    rejected = hub.post("/v1/posts/launch/reject", json={"reason": "Make it 10:00"}).json()
    assert rejected["status"] == "draft"
    edited = hub.patch("/v1/posts/launch", json={"captions": {"bsky": "On Bluesky"}})
    assert edited.status_code == 200 and [v["outcome"] for v in edited.json()["variants"]] == ["unchanged", "unchanged", "edited"]
    moved = hub.post("/v1/posts/launch/reschedule", json={"at": "2099-03-02T10:00:00+01:00"}).json()
    assert [v["outcome"] for v in moved["variants"]] == ["edited"] * 3
    assert hub.patch("/v1/posts/launch", json={"caption": "x" * 2201}).status_code == 422
    assert hub.post("/v1/posts/launch/approve").json()["status"] == "approved"
    post = hub.get("/v1/posts/launch").json()
    assert post["review"]["verdict"] == "approved" and post["review"]["by"] == "user:maya"
    assert [c["text"] for c in post["comments"]] == ["Is 9:00 right?"] and post["time"] == "2099-03-02T09:00:00.000Z"
    copy = hub.post("/v1/posts/launch/duplicate", json={}).json()
    assert copy["id"] == "launch-copy" and copy["status"] == "draft"
    assert hub.post("/v1/posts/launch/cancel").json()["status"] == "cancelled"
    again = hub.post("/v1/posts/launch/cancel")
    assert again.status_code == 422 and again.json()["reason"].startswith("nothing to cancel")
    history = hub.app_state.store.history("requests", "bsky:shop.test:launch")
    assert [c.doc["status"] for c in history] == ["draft", "in-review", "in-review", "draft", "draft", "draft", "approved", "cancelled"]


def test_an_import_through_the_api(hub):
    csv_text = ("to,caption,images,alts,at\n"
                f"ig threads,Monday's post,{JPG.format(1)},The box,2099-03-02T09:00:00+01:00\n"
                "bsky:shop.test,,,,\n")
    dry = hub.post("/v1/posts/import", params={"dryRun": "true"}, content=csv_text, headers={"content-type": "text/csv"}).json()
    assert dry["dryRun"] is True and dry["counts"] == {"new": 1, "updated": 0, "unchanged": 0, "invalid": 1}
    assert dry["rows"][1]["problems"] == ["row 3, caption: bsky:shop.test: a Bluesky post needs text or an image"]
    assert hub.get("/v1/posts").json() == {"posts": []}
    done = hub.post("/v1/posts/import", content=csv_text, headers={"content-type": "text/csv"}).json()
    assert done["counts"]["new"] == 1 and len(hub.get("/v1/posts").json()["posts"]) == 1
    wrong = hub.post("/v1/posts/import", content="to,colour\nig,red\n", headers={"content-type": "text/csv"})
    assert wrong.status_code == 422 and wrong.json()["reason"].startswith("column 'colour' is not one")


def test_the_cli_helpers_over_a_hub(hub):
    remote = RemoteStore(str(hub.base_url), TokenAuth(hub.token))  # type: ignore[attr-defined]
    try:
        out = post_queue(remote, launch(slug="remote"))
        assert out["id"] == "remote" and out["queued"] is True
        assert post_get(remote, "remote")["status"] == "pending"
        assert [p["id"] for p in posts_list(remote, {"status": "pending"})] == ["remote"]
        assert post_act(remote, "remote", "cancel")["status"] == "cancelled"
        report = posts_import(remote, b'[{"to": "bsky:shop.test", "caption": "From JSON"}]', json_file=True, dry_run=False)
        assert report["counts"]["new"] == 1
    finally:
        remote.close()
