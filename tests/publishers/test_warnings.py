"""An Instagram or Threads post with an image and no alt text is queued, with a warning, on every
surface: the CLI says it on stderr as one `skyhub:` line (locally and over a hub), the API
answers it in ``warnings``, the console shows it after the form and in the queue's row. The
alt-text sentences carry no CLI flag: only the CLI adds its own hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import unquote_plus

import pytest

from hub.app import build_app
from hub.auth import add_user
from hub.settings import load_settings
from hub.webapp import create_api
from ledger import SYSTEM
from publishers.validate import warnings
from skyhub_testkit.hub import serving
from tests.console.conftest import Console
from tests.publishers.test_queue import ROOT, cli  # noqa: F401 - the fixture: the CLI as a subprocess on a local ledger

IG = "17841400000000000"
JPG = "https://cdn.example.org/p/{}.jpg"
ONE = ("image 1 has no alt text: Instagram publishes it without, but people who use a screen reader will not know what it "
       "shows; add alt text")


def test_the_warning_names_every_image_without_alt_text_on_instagram_and_threads():
    def post(platform, alts):
        return {"platform": platform, "images": [{"url": JPG.format(i), "alt": a} for i, a in enumerate(alts)]}

    assert warnings(post("ig", [""])) == [ONE]
    assert warnings(post("threads", ["A box", " ", "", "Open"])) == [
        "images 2 and 3 have no alt text: Threads publishes them without, but people who use a screen reader will not know "
        "what they show; add alt text"]
    assert warnings(post("ig", ["", "", ""]))[0].startswith("images 1, 2 and 3 have no alt text")
    assert warnings(post("ig", ["A box"])) == [] and warnings(post("threads", [])) == []
    assert warnings(post("bsky", [""])) == []  # on Bluesky it is not a warning: the post is refused


def test_the_cli_queues_the_post_and_says_the_warning_on_stderr(cli):  # noqa: F811
    out = cli("publish", "ig", "--slug", "bare", "--image", JPG.format(1), "--caption", "Look", check=0)
    assert json.loads(out.stdout)["queued"] is True and json.loads(out.stdout)["warnings"] == [ONE]
    assert out.stderr == f"skyhub: {ONE}\n"
    fine = cli("publish", "ig", "--slug", "alt", "--image", JPG.format(1), "--alt", "A box", check=0)
    assert fine.stderr == ""


def test_the_cli_adds_its_own_flag_to_the_alt_text_sentence(cli):  # noqa: F811
    out = cli("publish", "bsky", "--slug", "s", "--account", "shop.test", "--image", "https://cdn.example.org/a.png", check=2)
    assert out.stderr == "skyhub: invalid_post: image 1 needs alt text on Bluesky (give it with --alt right after its --image)\n"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    monkeypatch.setenv("SKYHUB_PUBLISH__ACCOUNTS__IG", IG)
    app = build_app(load_settings(database_url=f"sqlite:///{tmp_path}/hub.db"), clock=SYSTEM)
    with serving(create_api(app)) as url:
        yield app, url
    app.stop()


def test_the_api_answers_the_warnings_and_its_sentences_name_no_flag(hub):
    import httpx

    app, url = hub
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {add_user(app.store, 'maya', clock=app.clock)}"}, timeout=30) as api:
        r = api.post("/v1/publish", json={"platform": "ig", "slug": "bare", "caption": "Look", "images": [{"url": JPG.format(1)}]})
        assert r.status_code == 200 and r.json()["warnings"] == [ONE] and r.json()["queued"] is True
        again = api.post("/v1/publish", json={"platform": "ig", "slug": "bare", "caption": "Look", "images": [{"url": JPG.format(1)}]})
        assert again.json()["queued"] is False and again.json()["warnings"] == [ONE]
        refused = api.post("/v1/publish", json={"platform": "bsky", "account": "shop.test", "slug": "s",
                                                "images": [{"url": "https://cdn.example.org/a.png"}]})
        assert refused.status_code == 422 and refused.json()["reason"] == "image 1 needs alt text on Bluesky"


def test_the_cli_over_a_hub_says_the_hubs_warning(hub, tmp_path):
    app, url = hub
    env = {**os.environ, "PYTHONPATH": ROOT, "SKYHUB_HUB_URL": url, "SKYHUB_TOKEN": add_user(app.store, "maya", clock=app.clock)}
    out = subprocess.run([sys.executable, "-m", "hub", "publish", "ig", "--slug", "far", "--image", JPG.format(2)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stderr == f"skyhub: {ONE}\n"


def test_the_console_shows_the_warning_after_queueing_and_in_the_queue(hub):
    app, url = hub
    console = Console(url)
    try:
        console.sign_in(add_user(app.store, "maya", clock=app.clock))
        done = console.post("/console/publish", {"platform": "ig", "account": IG, "slug": "bare", "caption": "Look",
                                                 "image-1": JPG.format(1)}, form_page="/console/publish")
        assert done.status_code == 303
        assert unquote_plus(done.headers["location"]) == f"/console/publish?done=ig:{IG}:bare queued (pending); warning: {ONE}"
        page = console.http.get(done.headers["location"])
        assert page.text.count(ONE) == 2  # the flash, and the post's row
        assert f'<p class="warning">{ONE}</p>' in page.text
        refused = console.post("/console/publish", {"platform": "bsky", "account": "shop.test", "slug": "s",
                                                    "image-1": "https://cdn.example.org/a.png"}, form_page="/console/publish")
        assert refused.status_code == 422 and "image 1 needs alt text on Bluesky" in refused.text and "--alt" not in refused.text
    finally:
        console.close()
