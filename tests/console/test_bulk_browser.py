"""An operator in real headless Chromium (Debian's, through Playwright), on a phone (390 x 844) and a
desktop (1366 x 768): finds the ten jobs that failed the same way as ONE group on the overview, opens
its bulk action, sees the count 10 and the sample, confirms, and the ten jobs are pending with the
operator in their history; the audit view lists the action. No sideways scroll, axe-core clean."""

from __future__ import annotations

import pytest

from .test_browser import Page, _hub

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("size", [(390, 844), (1366, 768)], ids=["phone", "desktop"])
def test_the_operator_retries_ten_failed_jobs_as_one_group(browser, tmp_path, key_text, size):
    hub = _hub(tmp_path, key_text, SKYHUB_JOBS__ENABLED="false")
    tab = Page(browser, hub, f"bulk-{size[0]}", width=size[0], height=size[1])
    try:
        p = tab.page
        now = hub.clock.now_ms()
        for i in range(10):
            hub.admin.put("jobs", {"type": "job", "status": "failed", "input": {"n": i}, "attempts": 3, "updatedAt": now - 90_000 * (i + 1),
                                   "lastError": f"lease expired during attempt 3 of 3 (job {i:04x}beef{i:04d})"}, f"nightly-{i:02d}",
                          actor="admin")
        tab.sign_in(hub.token("ana"))
        groups = p.locator("#attention li.group", has_text="10 jobs failed")
        assert groups.count() == 1
        assert p.evaluate("() => document.documentElement.scrollWidth") <= size[0]
        tab.check(f"bulk-overview-{size[0]}")

        groups.get_by_role("link", name="Retry all 10").click()
        p.wait_for_url("**/console/bulk?**")
        assert p.locator("#bulk-count").text_content() == "10"
        assert p.locator("#bulk-sample tbody tr").count() == 10
        assert "lease expired during attempt 3 of 3" in str(p.locator("#bulk-sample").text_content())
        assert p.evaluate("() => document.documentElement.scrollWidth") <= size[0]
        tab.check(f"bulk-confirm-{size[0]}")
        assert all(hub.admin.get("jobs", f"nightly-{i:02d}")["status"] == "failed" for i in range(10))

        p.get_by_role("button", name="Retry 10 documents").click()
        p.locator("#bulk-done").wait_for()
        assert p.locator("#bulk-done").text_content() == "10 retried."
        tab.check(f"bulk-done-{size[0]}")
        for i in range(10):
            assert hub.admin.get("jobs", f"nightly-{i:02d}")["status"] == "pending"
            assert hub.admin.history("jobs", f"nightly-{i:02d}")[-1].actor == "user:ana"

        p.goto(hub.url + "/console/audit")
        assert "user:ana" in str(p.locator("#audit").text_content()) and "10 of 10 done" in str(p.locator("#audit").text_content())
        assert p.evaluate("() => document.documentElement.scrollWidth") <= size[0]
        tab.check(f"audit-{size[0]}")
    finally:
        tab.close()
        hub.stop()
