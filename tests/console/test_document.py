"""The document page over HTTP against a real `skyhub run`: every time as a ``<time>`` (no raw
epoch milliseconds in what a person reads), ``lastError`` and tracebacks as blocks, a post's
images as thumbnails the hub serves, the history with actor and time, and a destructive move
that asks to be confirmed, also without a script (refused by the server until it is)."""

from __future__ import annotations

import re

from hub.console.routes import is_destructive, is_time_field
from hub.console.web import doc_url, when
from ledger import Ledger
from publishers.queue import new_request, queue
from skyhub_testkit.hub import Hub

from .conftest import Console

AT = 1_764_680_400_123  # 2025-12-02 13:00:00.123 UTC


def _visible(html: str) -> str:
    """The page's text as a person reads it: no tags, so no attribute (a title, data-ms) counts."""
    return re.sub(r"<[^>]+>", " ", html)


def test_a_time_is_a_time_element_with_its_utc_text_and_its_epoch_kept():
    html = str(when(AT, ago=True))
    assert html == ('<time datetime="2025-12-02T13:00:00.123Z" data-ms="1764680400123" '
                    'title="2025-12-02 13:00:00 UTC (1764680400123)" data-ago>2025-12-02 13:00:00 UTC</time>')
    assert str(when(AT, brief=True)).endswith(' data-ago="only">13:00:00 UTC</time>')
    assert str(when(None)) == str(when(0)) == str(when(True)) == str(when("soon")) == ""
    assert str(when(10**20)) == str(10**20)  # not a date: the number, never a crash


def test_which_fields_are_times_and_which_moves_are_destructive():
    assert is_time_field("carouselAt", AT) and is_time_field("leaseUntil", AT) and is_time_field("notBefore", AT)
    assert not is_time_field("attempts", AT) and not is_time_field("updatedAt", "yesterday") and not is_time_field("updatedAt", 3)
    assert is_destructive("cancelled", "Move to cancelled") and is_destructive("x", "Dismiss") and is_destructive("gone", "Delete")
    assert not is_destructive("pending", "Retry") and not is_destructive("done", "Move to done")


def test_the_document_page_shows_times_blocks_and_thumbnails(hub, console):
    console.sign_in(hub.token("ana"))
    ana = Ledger(hub.admin, "user:ana", hub.clock)
    post, _ = queue(ana, new_request("bsky", account="shop.test", slug="beach", caption="Look",
                                     images=[{"url": "https://cdn.example.org/a.jpg", "alt": "The beach at noon"},
                                             {"url": "https://cdn.example.org/b.jpg", "alt": "The beach at dusk"}], now_ms=hub.clock.now_ms()))
    trace = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: no"
    hub.admin.put("requests", {**post, "lastError": "Bluesky said 500\nsecond line", "traceback": trace, "carouselAt": AT,
                               "intent": {"step": "carousel", "at": AT + 1000, "tries": [{"sentAt": AT}]}}, actor="admin")

    page = console.http.get(doc_url("requests", post["_id"])).text
    text = _visible(re.sub(r"<details>.*?</details>", "", page, flags=re.S))  # what is shown before a person opens "as stored"
    assert not re.search(r"\b1[67]\d{11}\b", text), "an epoch in ms is shown as a number"
    assert "&#34;at&#34;: &#34;2025-12-02 13:00:01 UTC&#34;" in page and "&#34;sentAt&#34;: &#34;2025-12-02 13:00:00 UTC&#34;" in page
    assert "intent as stored" in page and "1764680401123" in page  # the stored value, a click away
    assert '<time datetime="2025-12-02T13:00:00.123Z" data-ms="1764680400123"' in page and "data-ago" in page
    assert '<pre class="block" tabindex="0">Bluesky said 500\nsecond line</pre>' in page
    assert "ValueError: no</pre>" in page
    assert f'<img src="/console/publish/thumbnail?id={post["_id"].replace(":", "%3A")}&amp;n=1&amp;px=192" alt="The beach at noon"' in page
    assert '&amp;n=2&amp;px=192" alt="The beach at dusk"' in page
    assert "images as JSON" in page and "https://cdn.example.org/a.jpg" in page  # the raw value is still there
    assert re.search(r'by <span class="actor">admin</span> at <time datetime="[^"]+Z"', page)


def test_a_destructive_move_asks_first_and_the_server_refuses_it_unconfirmed(tmp_path, key_text):
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, jobs=False, env={"SKYHUB_VAULT_KEY": key_text})  # no worker takes the job
    console = Console(hub.url)
    try:
        _cancel_asks_first(hub, console)
    finally:
        console.close()
        hub.stop()


def _cancel_asks_first(hub: Hub, console: Console) -> None:
    console.sign_in(hub.token("ana"))
    hub.admin.put("jobs", {"type": "job", "status": "pending", "input": {"n": 1}, "attempts": 0}, "nightly", actor="admin")
    url = doc_url("jobs", "nightly")
    page = console.http.get(url).text
    form = re.search(r'<form method="post" action="/console/move" class="inline confirm" data-confirm="([^"]+)">(.*?)</form>', page, re.S)
    assert form, "the cancel form is not a confirming one"
    assert form.group(1) == "Cancel nightly? This cannot be undone."  # the move by its name in the machine
    assert 'name="confirm" value="yes" required' in form.group(2) and 'class="danger"' in form.group(2)
    rev = hub.admin.get("jobs", "nightly")["_rev"]
    fields = {"db": "jobs", "id": "nightly", "rev": rev, "to": "cancelled"}
    refused = console.post("/console/move", fields, form_page=url)
    assert refused.status_code == 400 and "needs confirming" in refused.text
    assert hub.admin.get("jobs", "nightly")["status"] == "pending"
    done = console.post("/console/move", {**fields, "confirm": "yes"}, form_page=url)
    assert done.status_code == 303
    assert hub.admin.get("jobs", "nightly")["status"] == "cancelled"
    assert hub.admin.history("jobs", "nightly")[-1].actor == "user:ana"
