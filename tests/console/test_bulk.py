"""The operator acts from the console (a real `skyhub run`): ten jobs that failed the same way are one
group on the overview with its bulk action; the confirm page shows the count and a sample before
anything is written; a set that changed meanwhile is shown again, not acted on; the confirmed retry
moves every job through the person edge as the operator, is recorded in the audit view; a failed job
is retried from its own page through the same edge."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hub.console.web import doc_url
from skyhub_testkit.hub import Hub

from .conftest import Console, csrf_of


@pytest.fixture
def hub_ana(tmp_path: Path, key_text: str) -> Iterator[tuple[Hub, Console]]:
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False, env={"SKYHUB_VAULT_KEY": key_text})
    console = Console(hub.url)
    try:
        for i in range(10):
            hub.admin.put("jobs", {"type": "job", "status": "failed", "input": {"n": i}, "attempts": 3,
                                   "lastError": f"lease expired during attempt 3 of 3 (job {i:04x}abcd{i:04d})",
                                   "updatedAt": hub.clock.now_ms() - 60_000 * (i + 1)}, f"job-{i:02d}", actor="admin")
        hub.admin.put("jobs", {"type": "job", "status": "failed", "input": {}, "attempts": 3, "lastError": "disk full"},
                      "job-other", actor="admin")
        console.sign_in(hub.token("ana"))
        yield hub, console
    finally:
        console.close()
        hub.stop()


def _groups(page: str) -> list[str]:
    return re.findall(r'<li class="item group [^"]*".*?</li>', page, re.S)


def _bulk_link(group: str) -> str:
    found = re.search(r'<a class="action" href="([^"]+)">Retry all (\d+)</a>', group)
    assert found, group
    return html.unescape(found.group(1))


def test_ten_jobs_that_failed_alike_are_one_group_retried_after_a_confirm_that_shows_the_set(hub_ana):
    hub, console = hub_ana
    overview = console.http.get("/").text
    groups = _groups(overview)
    ten = [g for g in groups if "10 jobs failed" in g]
    assert len(ten) == 1 and not any("job-0" in g for g in groups if g not in ten)  # one line for the ten, one for disk full
    assert any("1 job failed: disk full" in g for g in groups)
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT[\d:.]+Z"[^>]*>\d+ min ago</time>', ten[0])
    link = _bulk_link(ten[0])

    confirm = console.http.get(link)
    assert confirm.status_code == 200
    assert '<span class="count" id="bulk-count">10</span>' in confirm.text
    assert confirm.text.count('href="/console/doc/jobs/job-') == 10  # the sample: the ten, with their errors
    assert "lease expired during attempt 3 of 3" in confirm.text and "disk full" not in confirm.text
    assert all(hub.admin.get("jobs", f"job-{i:02d}")["status"] == "failed" for i in range(10))  # nothing written yet

    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', confirm.text))
    form = {k: html.unescape(v) for k, v in form.items()}
    # another job fails the same way before the person confirms: the set is not the one they saw
    hub.admin.put("jobs", {"type": "job", "status": "failed", "input": {"n": 10}, "attempts": 3,
                           "lastError": "lease expired during attempt 3 of 3 (job 000aabcd0010)"}, "job-10", actor="admin")
    changed = console.http.post("/console/bulk", data=form)
    assert changed.status_code == 409 and 'id="bulk-changed"' in changed.text
    assert '<span class="count" id="bulk-count">11</span>' in changed.text
    assert hub.admin.get("jobs", "job-00")["status"] == "failed"  # not acted on

    again = {k: html.unescape(v) for k, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', changed.text)}
    done = console.http.post("/console/bulk", data=again)
    assert done.status_code == 200 and "11 retried" in done.text
    for i in range(11):
        job = hub.admin.get("jobs", f"job-{i:02d}")
        assert (job["status"], job["attempts"], job["retries"]) == ("pending", 0, 1)
        assert hub.admin.history("jobs", f"job-{i:02d}")[-1].actor == "user:ana"
    assert hub.admin.get("jobs", "job-other")["status"] == "failed"
    audit_id = html.unescape(re.search(r'href="/console/doc/audit/([^"]+)" id="bulk-audit"', done.text).group(1))

    audit = console.http.get("/console/audit").text
    assert "user:ana" in audit and "11 of 11 done" in audit and f'href="{doc_url("jobs", "job-00")}"' in audit
    assert audit_id.replace(":", "%3A") in audit
    assert "Retry all" not in "".join(g for g in _groups(console.http.get("/").text) if "jobs failed" in g)


def test_a_bad_filter_or_an_unknown_action_is_one_sentence_and_writes_nothing(hub_ana):
    hub, console = hub_ana
    bad = console.http.get("/console/bulk?db=jobs&action=retry&field=platform")
    assert bad.status_code == 400 and "a field filter needs both --field and --key" in html.unescape(bad.text)
    unknown = console.http.get("/console/bulk?db=jobs&action=explode&status=failed")
    assert unknown.status_code == 400 and "no bulk action 'explode'" in html.unescape(unknown.text)
    no_csrf = console.http.post("/console/bulk", data={"db": "jobs", "action": "retry", "status": "failed"})
    assert no_csrf.status_code == 403
    assert hub.admin.get("jobs", "job-00")["status"] == "failed"


def test_a_failed_job_is_retried_from_its_page_through_the_person_edge(hub_ana):
    hub, console = hub_ana
    page = console.http.get(doc_url("jobs", "job-03")).text
    assert re.search(r'name="to" value="pending">\s*<button type="submit">Retry</button>', page)
    rev = re.search(r'name="rev" value="([^"]+)"', page).group(1)
    moved = console.http.post("/console/move", data={"csrf": csrf_of(page), "db": "jobs", "id": "job-03", "rev": rev, "to": "pending"})
    assert moved.status_code == 303
    job = hub.admin.get("jobs", "job-03")
    assert (job["status"], job["attempts"], job["retries"]) == ("pending", 0, 1) and "retriedAt" in job
    assert hub.admin.history("jobs", "job-03")[-1].actor == "user:ana"


def test_the_confirm_page_warns_that_retrying_a_publish_that_may_have_gone_out_repeats_it(hub_ana):
    hub, console = hub_ana
    hub.admin.put("requests", {"kind": "publish-request", "platform": "ig", "status": "error", "lastError": "the publish call timed out",
                               "intent": {"step": "publish"}}, "ig:17841400000000000:gone", actor="admin")
    page = console.http.get("/console/bulk?db=requests&action=retry&status=error&kind=publish-request")
    assert page.status_code == 200 and 'id="bulk-warnings"' in page.text
    warning = html.unescape(re.search(r'<div class="warning" role="alert" id="bulk-warnings">.*?</div>', page.text, re.S).group(0))
    assert "This repeats a side effect for 1 of them" in warning and "may have gone out" in warning and "ig:17841400000000000:gone" in warning
    assert hub.admin.get("requests", "ig:17841400000000000:gone")["status"] == "error"
