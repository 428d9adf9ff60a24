"""An operator in real headless Chromium finds a mention by a word of its text, pauses the publish
tick and sees its runs recorded as paused, then resumes it and sees it run again (a real `skyhub run`)."""

from __future__ import annotations

import time

import pytest

from hub.console.web import doc_url

from .test_browser import Page, _hub

pytestmark = pytest.mark.browser


def _outcome(p, hub, want: str, timeout: float = 60) -> str:
    """Reload the overview until the publish tick's last outcome reads ``want`` (tick runs are not changes: no live update)."""
    deadline = time.monotonic() + timeout
    while True:
        p.goto(hub.url + "/")
        row = p.locator("#ticks tbody tr", has_text="publish")
        text = str(row.locator('td[data-label="outcome"]').text_content()).strip()
        if text == want or time.monotonic() > deadline:
            return text
        time.sleep(0.5)


def test_find_a_mention_by_a_word_then_pause_and_resume_the_publish_tick(browser, tmp_path, key_text):
    hub = _hub(tmp_path, key_text, SKYHUB_JOBS__ENABLED="false", SKYHUB_PUBLISH__EVERY="1s")
    tab = Page(browser, hub, "find-pause")
    try:
        p = tab.page
        found_id = "did:plc:aaaa:3lpomodoro"
        hub.admin.put("requests", {"kind": "mention", "status": "build-failed", "text": "@ourbot make me a Pomodoro timer",
                                   "uri": "at://x", "cid": "c", "lastError": "codegen timed out"}, found_id, actor="admin")
        hub.admin.put("requests", {"kind": "mention", "status": "built", "text": "@ourbot a weather widget", "uri": "at://y",
                                   "cid": "c"}, "did:plc:aaaa:3lweather", actor="admin")
        tab.sign_in(hub.token("ana"))

        p.get_by_role("link", name="Search").click()
        p.wait_for_url(hub.url + "/console/search")
        p.focus("#q")
        p.keyboard.type("pomodoro")
        p.keyboard.press("Enter")
        p.locator("#results").wait_for()
        results = p.locator("#results")
        assert "requests: 1 found" in str(results.text_content())
        assert results.get_by_role("link", name=found_id).count() == 1 and "weather" not in str(results.text_content())
        tab.check("search")
        results.get_by_role("link", name=found_id).click()
        p.wait_for_url(hub.url + doc_url("requests", found_id))

        assert _outcome(p, hub, "ok") == "ok"
        p.select_option("#pause-what", "tick:publish")
        p.fill("#pause-reason", "Meta's API is down")
        p.get_by_role("button", name="Pause", exact=True).click()
        p.locator("#flash").wait_for()
        assert p.locator("#flash").text_content() == "tick:publish paused"
        paused_row = p.locator("#paused tbody tr")
        assert paused_row.count() == 1 and "Meta's API is down" in str(paused_row.text_content())
        tab.check("overview-paused")
        assert _outcome(p, hub, "paused") == "paused"
        assert "(paused)" in str(p.locator("#ticks tbody tr", has_text="publish").text_content())

        p.get_by_role("button", name="Resume tick:publish").click()
        p.locator("#flash").wait_for()
        assert p.locator("#flash").text_content() == "tick:publish resumed"
        assert p.locator("#paused tbody tr").count() == 0
        assert _outcome(p, hub, "ok") == "ok"
        outcomes = [r.outcome for r in hub.admin.tick_runs("publish", limit=200)]
        assert "paused" in outcomes and outcomes[0] == "ok"
    finally:
        tab.close()
        hub.stop()
