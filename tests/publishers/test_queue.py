"""Queueing posts as a social media manager does: the CLI (a subprocess), a raw `db put`, and
every bad input refused with one sentence before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from publishers.validate import graphemes, problems

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JPG = "https://cdn.example.org/p/{}.jpg"


@pytest.fixture
def cli(tmp_path):
    env = {**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "SKYHUB_ACTOR": "user:maya", "PYTHONPATH": ROOT,
           "SKYHUB_PUBLISH__ACCOUNTS__IG": "17841400000000000"}

    def run(*args, check=None, stdin=None):
        proc = subprocess.run([sys.executable, "-m", "hub", *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=60, input=stdin)
        if check is not None:
            assert proc.returncode == check, (proc.returncode, proc.stdout, proc.stderr)
        return proc

    return run


def images(n):
    out = []
    for i in range(n):
        out += ["--image", JPG.format(i), "--alt", f"photo {i}"]
    return out


def test_a_carousel_is_queued_once_and_listed(cli):
    first = json.loads(cli("publish", "ig", "--slug", "launch", *images(3), "--caption", "It's here #new", check=0).stdout)
    assert first["id"] == "ig:17841400000000000:launch" and first["queued"] is True and first["status"] == "pending"
    again = cli("publish", "ig", "--slug", "launch", *images(3), "--caption", "It's here #new", check=0)
    assert json.loads(again.stdout)["queued"] is False and "already queued with the same content" in again.stderr
    other = cli("publish", "ig", "--slug", "launch", *images(2), "--caption", "Something else", check=3)
    assert other.stderr.startswith("skyhub: conflict: ig:17841400000000000:launch is already queued with different content")
    listed = json.loads(cli("publish", "ls", "--json", check=0).stdout)
    assert [(d["_id"], d["status"], d["nextStep"]) for d in listed] == [("ig:17841400000000000:launch", "pending", "create the container(s)")]
    doc = listed[0]
    assert [i["alt"] for i in doc["images"]] == ["photo 0", "photo 1", "photo 2"] and doc["caption"] == "It's here #new"
    shown = json.loads(cli("publish", "show", "ig:17841400000000000:launch", check=0).stdout)
    assert shown["request"]["_id"] == doc["_id"] and [s["status"] for s in shown["steps"]] == ["pending"]


def test_cancel_and_retry_follow_the_machine(cli):
    cli("publish", "bsky", "--slug", "hello", "--account", "shop.test", "--caption", "Hello", check=0)
    assert json.loads(cli("publish", "cancel", "bsky:shop.test:hello", check=0).stdout)["status"] == "cancelled"
    refused = cli("publish", "retry", "bsky:shop.test:hello", check=2)
    assert "only a post that is error can be moved to pending" in refused.stderr
    assert cli("publish", "show", "bsky:shop.test:nope", check=5).stderr.startswith("skyhub: not_found: no queued post")


IN_PAST = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
BAD = [
    (["ig", "--slug", "s", *images(11)], "an Instagram carousel needs 2 to 10 images, got 11"),
    (["ig", "--slug", "s"], "an Instagram post needs an image"),
    (["ig", "--slug", "s", "--image", "./local.jpg"], "image 1 must be a public https URL, not a path"),
    (["ig", "--slug", "s", "--image", "http://cdn.example.org/a.jpg"], "image 1 must be an https URL"),
    (["ig", "--slug", "s", "--image", "https://cdn.example.org/a.png"], "image 1 must be a JPEG"),
    (["ig", "--slug", "s", *images(1), "--caption", "x" * 2201], "an Instagram caption is at most 2,200 characters, got 2,201"),
    (["ig", "--slug", "s", *images(1), "--caption", " ".join(f"#t{i}" for i in range(31))], "at most 30 hashtags, got 31"),
    (["ig", "--slug", "s", *images(1), "--caption", " ".join(f"@u{i}" for i in range(21))], "at most 20 @mentions, got 21"),
    (["ig", "--slug", "s", "--image", JPG.format(1), "--alt", "a" * 1001], "image 1's alt text is 1,001 characters; the limit is 1,000"),
    (["threads", "--slug", "s", "--account", "1", "--caption", "x" * 501], "a Threads post is at most 500 characters, got 501"),
    (["threads", "--slug", "s", "--account", "1", *images(21)], "a Threads post has at most 20 images, got 21"),
    (["bsky", "--slug", "s", "--account", "a.test", "--caption", "é" * 301], "a Bluesky post is at most 300 characters, got 301"),
    (["bsky", "--slug", "s", "--account", "a.test", "--caption", "😀" * 299 + "x" * 0], None),
    (["bsky", "--slug", "s", "--account", "a.test", "--image", "https://x.test/1.png"], "image 1 needs alt text on Bluesky"),
    (["bsky", "--slug", "s", "--account", "a.test", *sum((["--image", f"https://x.test/{i}.png", "--alt", "a"] for i in range(5)), [])],
     "a Bluesky post has at most 4 images, got 5"),
    (["ig", "--slug", "s", *images(1), "--at", "2026-12-01T09:00:00"], "at must be a time with its time zone"),
    (["ig", "--slug", "s", *images(1), "--at", IN_PAST], "is in the past"),
    (["ig", "--slug", "bad slug!", *images(1)], "slug must be 1-100 letters"),
    (["threads", "--slug", "s", "--caption", "x"], "no account: pass --account, or set publish.accounts.threads"),
]


@pytest.mark.parametrize("args,sentence", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_one_sentence_exit_2_and_writes_nothing(cli, args, sentence):
    if sentence is None:  # 299 emoji are 299 characters on Bluesky (but 1,196 bytes): accepted
        cli("publish", *args, check=0)
        return
    proc = cli("publish", *args, check=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and sentence in lines[0], proc.stderr
    assert json.loads(cli("publish", "ls", "--json", check=0).stdout) == []


def test_a_raw_request_is_checked_by_the_machine_too(cli):
    raw = {"kind": "publish-request", "platform": "ig", "account": "1784", "slug": "raw", "status": "pending",
           "images": [{"url": JPG.format(i), "alt": ""} for i in range(11)], "caption": "", "createdAt": "2026-11-30T10:00:00Z"}
    proc = cli("db", "put", "--db", "requests", json.dumps(raw), check=4)
    assert "an Instagram carousel needs 2 to 10 images, got 11" in proc.stderr
    raw["images"] = raw["images"][:3]
    out = json.loads(cli("db", "put", "--db", "requests", json.dumps(raw), check=0).stdout)
    assert len(out["id"]) == 32  # no _id: the store names it; the tick finds duplicates by slug
    listed = json.loads(cli("publish", "ls", "--json", check=0).stdout)
    assert [d["slug"] for d in listed] == ["raw"]


def test_graphemes_count_what_people_see():
    assert graphemes("abc") == 3
    assert graphemes("e\u0301") == 1  # e + combining acute
    assert graphemes("👩‍👩‍👧") == 1  # a zero-width-joined family
    assert graphemes("🇫🇷🇩🇪") == 2  # two flags
    assert graphemes("👍🏽") == 1  # a skin tone
    assert problems({"platform": "bsky", "account": "a", "slug": "s", "caption": "👩‍👩‍👧" * 300}) == [
        "a Bluesky post is at most 3,000 bytes, got 5,400"]


def test_the_cli_the_api_and_the_console_share_one_way_into_the_queue():
    """publishers.queue.submit is the one way in: no door builds a request or writes one itself."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "publishers"
    for door in ("cli.py", "api.py", "pages.py"):
        text = (root / door).read_text()
        assert "submit(" in text and "new_request(" not in text and " queue(" not in text, door


def test_the_post_doors_go_through_the_queue_and_the_posts_functions_too():
    """The post commands, routes and the import build nothing and write nothing themselves: they call
    ``queue.submit_post`` and ``publishers.posts`` (whose writes the machine judges)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "publishers"
    for door in ("cli_posts.py", "api_posts.py", "importer.py"):
        text = (root / door).read_text()
        assert "submit_post(" in text or "import_rows(" in text, door
        assert "new_request(" not in text and ".put(" not in text and " queue(" not in text, door


def test_a_manager_s_day_on_the_command_line(cli, tmp_path):
    """The guide's day, as a subprocess: one post for three networks as a draft, its review, an edit, a
    reschedule, a duplicate, the week listed by time, and the single-network commands unchanged beside it."""
    maya = cli
    post = ["publish", "post", "--to", "ig", "--to", "threads:2900000000000001", "--to", "bsky:shop.test", "--slug", "box",
            "--caption", "The box is here", "--caption-bsky", "The box is here, on Bluesky", "--image", JPG.format(1),
            "--alt", "The box", "--first-comment", "Made in Lyon", "--at", "2099-12-03T09:00:00+01:00", "--draft"]
    made = json.loads(maya(*post, check=0).stdout)
    assert made["id"] == "box" and made["status"] == "draft" and [v["outcome"] for v in made["variants"]] == ["new"] * 3
    again = maya(*post, check=0)
    assert json.loads(again.stdout)["queued"] is False and "already queued with the same content" in again.stderr
    assert json.loads(maya("publish", "submit", "box", check=0).stdout)["status"] == "in-review"
    assert json.loads(maya("publish", "comment", "box", "Is 'here' right?", check=0).stdout)["status"] == "in-review"
    edited = json.loads(maya("publish", "edit", "box", "--caption-threads", "On Threads too", check=0).stdout)
    assert [v["outcome"] for v in edited["variants"]] == ["unchanged", "edited", "unchanged"]
    assert maya("publish", "edit", "box", check=2).stderr.startswith("skyhub: usage: nothing to change")
    assert json.loads(maya("publish", "approve", "box", check=0).stdout)["status"] == "approved"
    maya("publish", "reschedule", "box", "--at", "2099-12-04T09:00:00+01:00", check=0)
    refused = maya("publish", "reschedule", "box", "--at", "2000-01-01T09:00:00+01:00", check=2)
    assert "is in the past" in refused.stderr
    copy = json.loads(maya("publish", "duplicate", "box", check=0).stdout)
    assert copy["id"] == "box-copy" and copy["status"] == "draft"
    maya("publish", "ig", "--slug", "solo", *images(1), "--caption", "Just Instagram", "--at", "2099-12-01T09:00:00+01:00", check=0)
    week = maya("publish", "ls", "--from", "2099-12-01", "--to", "2099-12-08", check=0).stdout.splitlines()
    assert week[0].split()[:4] == ["time", "id", "status", "caption"]
    assert [line.split()[1] for line in week[1:]][:4] == ["ig:17841400000000000:solo", "bsky:shop.test:box",
                                                          "ig:17841400000000000:box", "threads:2900000000000001:box"]
    posts = json.loads(maya("publish", "ls", "--posts", "--json", check=0).stdout)
    assert [p["id"] for p in posts] == ["ig:17841400000000000:solo", "box", "box-copy"]
    assert posts[1]["time"] == "2099-12-04T08:00:00.000Z" and [c["text"] for c in posts[1]["comments"]] == ["Is 'here' right?"]
    shown = json.loads(maya("publish", "show", "box", check=0).stdout)
    assert shown["review"]["verdict"] == "approved" and len(shown["steps"]["bsky:shop.test:box"]) == 5
    assert json.loads(maya("publish", "cancel", "box", check=0).stdout)["status"] == "cancelled"
    assert maya("publish", "approve", "nope", check=5).stderr.startswith("skyhub: not_found: no post 'nope'")
    assert "--to 'tiktok' is not a network" in maya("publish", "post", "--to", "tiktok", "--caption", "x", check=2).stderr
