"""Bulk import (``publishers.importer``, ``skyhub publish import``): a content calendar of ten rows,
two of them wrong, each wrong row said with its row number and column and nothing written for
it; a dry run writes nothing; importing again is a no-op; a fixed file queues only what is new
or changed. The CLI runs as a subprocess, as a manager runs it."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from publishers.errors import ImportInvalid
from publishers.importer import import_rows, read_rows
from tests.publishers.test_posts import SETTINGS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JPG = "https://cdn.example.org/p/{}.jpg"
HEADER = "slug,to,caption,caption_bsky,images,alts,first_comment,at,timezone,draft"


def rows(bad=True, **captions):
    """Ten posts of a calendar, as a spreadsheet saves them (``captions``: row slug -> another caption)."""
    out = [HEADER.split(",")]
    for n in range(1, 11):
        images = f"{JPG.format(n)}|{JPG.format(n + 100)}" if n % 3 == 0 else JPG.format(n)
        alts = "A box|The box, open" if n % 3 == 0 else "A box"
        to = "ig threads bsky:shop.test" if n % 2 else "ig"
        caption = captions.get(f"day-{n}", f"Day {n} of the calendar")
        out.append([f"day-{n}", to, caption, f"Day {n} on Bluesky", images, alts, "Link in bio", f"2099-12-{n:02d} 09:00",
                    "Europe/Paris", ""])
    if bad:
        out[4] = ["day-4", "ig", "No image", "", "", "", "", "2099-12-04 09:00", "Europe/Paris", ""]  # row 5: no image for Instagram
        out[8] = ["day-8", "ig tiktok", "Day 8", "", JPG.format(8), "A box", "", "2099-12-08T09:00", "", ""]  # row 9: two mistakes
    text = io.StringIO()
    csv.writer(text).writerows(out)
    return text.getvalue()


@pytest.fixture
def cli(tmp_path):
    env = {**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "SKYHUB_ACTOR": "user:maya", "PYTHONPATH": ROOT,
           "SKYHUB_PUBLISH__ACCOUNTS__IG": "17841400000000000", "SKYHUB_PUBLISH__ACCOUNTS__THREADS": "2900000000000001"}

    def run(*args, check=None):
        proc = subprocess.run([sys.executable, "-m", "hub", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
        if check is not None:
            assert proc.returncode == check, (proc.returncode, proc.stdout, proc.stderr)
        return proc

    run.folder = tmp_path
    return run


def variants(cli):
    return json.loads(cli("publish", "ls", "--json", check=0).stdout)


def test_a_calendar_with_two_bad_rows_queues_the_eight_good_ones_and_says_why_for_the_others(cli):
    calendar = cli.folder / "week.csv"
    calendar.write_text(rows())
    dry = cli("publish", "import", str(calendar), "--dry-run", "--json", check=2)
    report = json.loads(dry.stdout)
    assert report["dryRun"] is True and report["counts"] == {"new": 8, "updated": 0, "unchanged": 0, "invalid": 2}
    assert variants(cli) == []  # a dry run writes nothing
    done = cli("publish", "import", str(calendar), "--json", check=2)
    report = json.loads(done.stdout)
    assert report["counts"] == {"new": 8, "updated": 0, "unchanged": 0, "invalid": 2}
    problems = {r["row"]: r["problems"] for r in report["rows"] if r["problems"]}
    assert problems == {
        5: ["row 5, images: ig:17841400000000000: an Instagram post needs an image (or 2 to 10 for a carousel), got none"],
        9: ["row 9, to: 'tiktok' is not a network: use ig, threads or bsky, optionally with :ACCOUNT (ig:17841400000000000, "
            "bsky:shop.bsky.social)",
            "row 9, at: '2099-12-08T09:00' has no time zone: add its offset (+01:00) or a timezone column (Europe/Paris)"],
    }
    assert "skyhub: row 5, images: ig:17841400000000000: an Instagram post needs an image" in done.stderr
    listed = variants(cli)
    assert sorted({d["post"] for d in listed}) == sorted(f"day-{n}" for n in range(1, 11) if n not in (4, 8))
    assert len(listed) == 5 * 3 + 3  # days 1, 3, 5, 7 and 9 go to three networks; days 2, 6 and 10 to one
    assert [d["post"] for d in listed][:3] == ["day-1"] * 3  # by time
    first = next(d for d in listed if d["_id"] == "bsky:shop.test:day-1")
    assert (first["caption"], first["at"], first["firstComment"]) == ("Day 1 on Bluesky", "2099-12-01T09:00:00+01:00", "Link in bio")
    carousel = next(d for d in listed if d["_id"] == "ig:17841400000000000:day-3")
    assert [i["alt"] for i in carousel["images"]] == ["A box", "The box, open"]

    again = json.loads(cli("publish", "import", str(calendar), "--json", check=2).stdout)
    assert again["counts"] == {"new": 0, "updated": 0, "unchanged": 8, "invalid": 2}
    assert all(len(json.loads(cli("db", "history", "--db", "requests", d["_id"], "--json", check=0).stdout)) == 1
               for d in listed[:3])  # nothing written again

    calendar.write_text(rows(bad=False, **{"day-2": "Day 2, fixed"}))
    table = cli("publish", "import", str(calendar), check=0)
    assert "2 new, 1 updated, 7 unchanged, 0 invalid" in table.stderr
    assert table.stdout.splitlines()[0].split() == ["row", "outcome", "post", "status", "problems"]
    assert json.loads(cli("db", "get", "--db", "requests", "ig:17841400000000000:day-2", check=0).stdout)["caption"] == "Day 2, fixed"


def test_a_file_that_is_not_a_calendar_is_one_sentence_and_writes_nothing(cli):
    for text, sentence in (
        ("to,colour\nig,red\n", "column 'colour' is not one: the columns are to, caption"),
        ("caption\nhello\n", "the header has no 'to' column"),
        ("[1, 2]", "row 1 is not an object"),
        ("{not json", "the file is not JSON"),
    ):
        path = cli.folder / "bad.csv"
        path.write_text(text)
        proc = cli("publish", "import", str(path), check=2)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and sentence in lines[0], proc.stderr
    assert variants(cli) == []


def test_rows_are_independent_and_a_json_calendar_reads_the_same(env):
    data = json.dumps({"posts": [
        {"to": ["bsky:skybot.test"], "caption": "From JSON", "images": [{"url": "https://cdn.example.org/a.png", "alt": "A"}],
         "at": "2099-01-01T09:00:00Z"},
        {"to": "bsky:skybot.test", "caption": "x" * 301},
        {"to": "threads", "caption": "Draft", "draft": True, "slug": "later"},
    ]})
    report = import_rows(env.maya, SETTINGS, read_rows(data, "cal.json"), dry_run=False, now_ms=env.clock.now_ms())
    assert [r.outcome for r in report.rows] == ["new", "invalid", "new"]
    assert report.rows[1].problems == ["row 2, caption: bsky:skybot.test: a Bluesky post is at most 300 characters, got 301"]
    assert report.rows[2].status == "draft" and report.rows[2].post == "later"
    slug = report.rows[0].post
    assert env.doc(f"bsky:skybot.test:{slug}")["images"] == [{"url": "https://cdn.example.org/a.png", "alt": "A"}]
    with pytest.raises(ImportInvalid):
        read_rows(b"\xff\xfe not utf-8")
