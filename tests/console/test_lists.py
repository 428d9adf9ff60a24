"""A database's list in the console, over HTTP against a real `skyhub run`: the total and the
range shown, newest or oldest first by the last write (keyset pages), by id, a jump to page N,
and a clear sentence for a page that cannot be reached."""

from __future__ import annotations

import re

import pytest

from hub.app import build_rules
from hub.console.web import doc_url
from ledger import SYSTEM, FakeClock, open_store


def _ids(html: str, db: str = "tasks") -> list[str]:
    return [m for m in re.findall(r'<a href="/console/doc/' + db + r'/([^"]+)">', html)]


@pytest.fixture
def tasks(hub):
    """120 failed tasks written a second apart, t119 first, t000 last (their ids run against their times),
    and one done; written to the hub's database on a clock of their own, so no two share a millisecond."""
    clock = FakeClock(SYSTEM.now_ms() - 300_000)
    store = open_store(hub.database_url, build_rules(), clock)
    try:
        for i in reversed(range(120)):
            clock.advance(1000)
            store.put("tasks", {"kind": "task", "status": "failed", "lastError": f"boom {i}"}, f"t{i:03d}", actor="admin")
        store.put("tasks", {"kind": "task", "status": "done"}, "finished", actor="admin")
    finally:
        store.close()
    return [f"t{i:03d}" for i in range(120)]  # newest first


def test_a_list_has_its_total_sorts_by_time_and_jumps_to_a_page(hub, console, tasks):
    console.sign_in(hub.token("ana"))
    first = console.http.get("/console/db/tasks?status=failed").text
    assert "1–50 of 120" in re.sub(r"\s+", " ", first) and "page 1 of 3" in first
    assert _ids(first) == tasks[:50]  # newest first by default
    assert "<time datetime=" in first and "data-ago" in first
    nxt = re.search(r'<a href="([^"]+)" rel="next">', first).group(1).replace("&amp;", "&")
    second = console.http.get(nxt).text
    assert "51–100 of 120" in second and _ids(second) == tasks[50:100]
    third = console.http.get("/console/db/tasks?status=failed&sort=newest&page=3").text
    assert "101–120 of 120" in third and _ids(third) == tasks[100:] and 'rel="next"' not in third
    oldest = console.http.get("/console/db/tasks?status=failed&sort=oldest").text
    assert _ids(oldest) == list(reversed(tasks))[:50]
    by_id = console.http.get("/console/db/tasks?status=failed&sort=id").text
    assert _ids(by_id) == sorted(tasks)[:50]
    assert '<input type="number" id="jump-page" name="page" min="1" max="3"' in first
    assert doc_url("tasks", "t000") in first


def test_a_page_that_cannot_be_shown_says_why(hub, console, tasks):
    console.sign_in(hub.token("ana"))
    far = console.http.get("/console/db/tasks?status=failed&page=202")
    assert far.status_code == 400 and "page 202 is too far to jump to (at most page 201)" in far.text
    assert "sort the other way" in far.text
    bad = console.http.get("/console/db/tasks?status=failed&page=two")
    assert bad.status_code == 400 and "the page must be a whole number from 1" in bad.text
    assert console.http.get("/console/db/tasks?status=failed&sort=sideways").status_code == 400
    assert "needs a list by time" in console.http.get("/console/db/tasks?status=failed&sort=id&page=2").text
    empty = console.http.get("/console/db/tasks?status=failed&page=9").text
    assert "None of 120" in empty and "No documents." in empty
