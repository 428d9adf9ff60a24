"""People's roles through every door of a real hub (``skyhub run``), on SQLite and PostgreSQL, with
``publish.require_review`` on: the API, a raw write through the documents API, the CLI over
``--hub`` and the console all meet the machine, which reads the role in the write. An editor's
token cannot approve or queue directly; a device cannot create a post; a token made before
roles (no role) keeps every power; a role changed on the database holds for the next write of
every hub process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from hub.auth import add_user, set_role
from ledger import Forbidden, NotFound
from skyhub_testkit.hub import ROOT, Hub
from tests.conftest import database
from tests.console.conftest import Console

IG = "17841400000000000"
JPG = "https://cdn.example.org/p/1.jpg"
ENV = {"SKYHUB_PUBLISH__REQUIRE_REVIEW": "true", "SKYHUB_PUBLISH__ACCOUNTS__IG": IG}


@pytest.fixture(params=["sqlite", "postgres"])
def hub(request, tmp_path):
    with database(request.param, tmp_path) as url:
        h = Hub(url, tmp_path, jobs=False, env=ENV)
        h.kind = request.param
        yield h
        h.stop()


def client(hub: Hub, token: str) -> httpx.Client:
    return httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def post_body(slug: str, **extra):
    return {"slug": slug, "caption": "It's here", "images": [{"url": JPG, "alt": "The box"}], "variants": [{"platform": "ig"}],
            **extra}


def test_an_editor_writes_and_submits_an_approver_approves_at_every_door(hub, tmp_path):
    ed = client(hub, add_user(hub.admin, "ed", "editor", clock=hub.clock))
    ann = client(hub, add_user(hub.admin, "ann", "approver", clock=hub.clock))
    old = client(hub, add_user(hub.admin, "old", clock=hub.clock))  # a token without a role: today's powers (admin)
    try:
        # the API: an editor's post waits for an approver
        made = ed.post("/v1/posts", json=post_body("launch"))
        assert made.status_code == 200 and made.json()["status"] == "in-review", made.text
        refused = ed.post("/v1/posts/launch/approve")
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
        assert "user:ed as editor may not move a publish-request from in-review to approved" in refused.json()["reason"]
        assert ed.post("/v1/posts/launch/queue").status_code == 403  # nor queue it past the review
        assert ed.post("/v1/posts/launch/reject", json={"reason": "no"}).status_code == 403
        # a raw write through the documents API: the same machine, the same refusal
        doc_id = f"ig:{IG}:launch"
        head = ed.get(f"/v1/db/requests/docs/{doc_id}").json()
        forged = {**head, "status": "approved", "review": {"by": "user:ed", "at": head["review"]["at"], "verdict": "approved"}}
        raw = ed.put(f"/v1/db/requests/docs/{doc_id}", params={"if_rev": head["_rev"]}, json=forged)
        assert raw.status_code == 403 and "as editor may not move" in raw.json()["reason"], raw.text
        assert hub.admin.get("requests", doc_id)["status"] == "in-review"
        # the CLI over --hub, with the editor's token
        cli_env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_HUB_URL": hub.url,
                   "SKYHUB_TOKEN": ed.headers["Authorization"].removeprefix("Bearer ")}
        proc = subprocess.run([sys.executable, "-m", "hub", "publish", "approve", "launch"], capture_output=True, text=True,
                              env=cli_env, cwd=tmp_path, timeout=120)
        assert proc.returncode == 4 and "as editor may not move" in proc.stderr, proc.stderr
        # an approver approves; so does a token made before roles
        assert ann.post("/v1/posts/launch/approve").json()["status"] == "approved"
        assert old.post("/v1/posts", json=post_body("direct")).json()["status"] == "pending"  # and queues directly
        assert [c.actor for c in hub.admin.history("requests", doc_id)] == ["user:ed", "user:ann"]
    finally:
        for c in (ed, ann, old):
            c.close()


def test_a_device_cannot_create_a_post_at_any_door(hub):
    from hub.remote import RemoteStore

    device = RemoteStore(hub.url, hub.device("ci", "device:ci"))
    try:
        with pytest.raises(Forbidden) as err:
            device.request("POST", "/v1/posts", json=post_body("by-device", draft=True))
        assert "device:ci may not queue a post" in err.value.reason
        with pytest.raises(Forbidden):
            device.put("requests", {"kind": "publish-request", "status": "draft", "platform": "ig", "account": IG, "slug": "raw",
                                    "caption": "x", "images": [{"url": JPG, "alt": ""}], "attempts": 0}, actor="device:ci")
    finally:
        device.close()


def test_the_console_holds_an_editor_to_the_review(hub):
    token = add_user(hub.admin, "ed", "editor", clock=hub.clock)
    console = Console(hub.url)
    try:
        console.sign_in(token)
        answer = console.post("/console/publish", {"platform": "ig", "slug": "from-console", "caption": "Hi", "image-1": JPG,
                                                   "alt-1": "A box"}, form_page="/console/publish")
        assert answer.status_code == 403 and "requires review (publish.require_review)" in answer.text
        with pytest.raises(NotFound):  # nothing was written
            hub.admin.get("requests", f"ig:{IG}:from-console")
    finally:
        console.close()


def test_a_role_changed_on_the_database_holds_for_the_next_write_of_every_hub_process(hub, tmp_path):
    """Two hub processes on one database (PostgreSQL: the scale-out setting; SQLite: two processes on one file)."""
    other = Hub(hub.database_url, tmp_path, jobs=False, env=ENV)
    ann_token = add_user(hub.admin, "ann", "approver", clock=hub.clock)
    ed = client(hub, add_user(hub.admin, "ed", "editor", clock=hub.clock))
    first, second = client(hub, ann_token), client(other, ann_token)
    try:
        for slug in ("one", "two", "three"):
            assert ed.post("/v1/posts", json=post_body(slug)).json()["status"] == "in-review"
        assert first.post("/v1/posts/one/approve").status_code == 200
        assert second.post("/v1/posts/two/approve").status_code == 200  # both processes have read her role
        set_role(hub.admin, "ann", "editor", clock=hub.clock)  # changed on the database, by a third process
        for c in (first, second):
            refused = c.post("/v1/posts/three/approve")
            assert refused.status_code == 403 and "user:ann as editor" in refused.json()["reason"]
        set_role(hub.admin, "ann", "approver", clock=hub.clock)
        assert second.post("/v1/posts/three/approve").status_code == 200
    finally:
        for c in (ed, first, second):
            c.close()
        other.stop()


def test_user_add_with_a_role_and_user_role(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db"}

    def run(*args, check=0):
        proc = subprocess.run([sys.executable, "-m", "hub", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
        assert proc.returncode == check, proc.stderr
        return proc

    assert "(editor)" in run("user", "add", "ed", "--role", "editor").stderr
    assert "(admin)" in run("user", "add", "old").stderr  # no role given: today's powers
    assert "(editor)" in run("user", "add", "ed").stderr  # another token: the person keeps their role
    assert json.loads(run("user", "role", "ed", "approver").stdout) == {"user": "user:ed", "role": "approver"}
    listed = json.loads(run("user", "list", "--json").stdout)
    assert sorted((t["name"], t["role"]) for t in listed) == [("ed", "approver"), ("ed", "approver"), ("old", "admin")]
    assert "'boss' is not one of 'editor', 'approver', 'admin'" in run("user", "role", "ed", "boss", check=2).stderr
