"""Sign-in, sessions, CSRF and the forms over HTTP against a real `skyhub run`: what a browser
sees, byte for byte, without a browser (tests/console/test_browser.py drives Chromium)."""

from __future__ import annotations

import json
import threading

import httpx

from hub.auth import AUTH_DB, revoke_token
from ledger import SYSTEM, Ledger
from publishers.queue import new_request, queue

from .conftest import Console


def test_pages_need_a_session_and_a_token_opens_one(hub, console):
    first = console.http.get("/console/publish?status=error")
    assert first.status_code == 303 and first.headers["location"] == "/console/sign-in?next=/console/publish%3Fstatus%3Derror"
    bad = console.sign_in("skh_000000000000_" + "x" * 30)
    assert bad.status_code == 401 and "Not signed in: unknown token." in bad.text and "skyhub_session" not in console.http.cookies
    token = hub.token("ana")
    signed = console.sign_in(token)
    assert signed.status_code == 303 and signed.headers["location"] == "/"
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie and "Secure" not in cookie  # plain http here
    page = console.http.get("/")
    assert page.status_code == 200 and "signed in as <strong>user:ana</strong>" in page.text
    assert token not in page.text and token not in signed.text
    session_id = console.http.cookies["skyhub_session"]
    sessions = hub.admin.query(AUTH_DB, "kind", "session").docs
    assert len(sessions) == 1 and sessions[0]["actor"] == "user:ana"
    assert session_id not in json.dumps(sessions) and token.split("_", 2)[2] not in json.dumps(sessions)  # only hashes and ids are kept


def test_a_post_without_the_csrf_value_or_from_another_site_is_refused_and_writes_nothing(hub, console):
    console.sign_in(hub.token("ana"))
    post = {"platform": "threads", "account": "2900000000000001", "slug": "forged", "caption": "Hello"}
    assert console.http.post("/console/publish", data=post).status_code == 403
    assert console.http.post("/console/publish", data={**post, "csrf": "0" * 64}).status_code == 403
    csrf = console.csrf("/console/publish")
    assert console.http.post("/console/publish", data={**post, "csrf": csrf}, headers={"Origin": "http://evil.example"}).status_code == 403
    assert console.http.post("/console/publish", data={**post, "csrf": csrf}, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    other = Console(hub.url)  # another person's valid CSRF value is not this session's
    other.sign_in(hub.token("bob"))
    assert console.http.post("/console/publish", data={**post, "csrf": other.csrf("/console/publish")}).status_code == 403
    other.close()
    assert hub.admin.query("requests", "kind", "publish-request").docs == []
    ok = console.http.post("/console/publish", data={**post, "csrf": csrf}, headers={"Origin": hub.url, "Sec-Fetch-Site": "same-origin"})
    assert ok.status_code == 303
    assert [c.actor for c in hub.admin.history("requests", "threads:2900000000000001:forged")] == ["user:ana"]


def test_a_revoked_token_ends_its_sessions_and_sign_out_ends_one(hub, console):
    console.sign_in(hub.token("ana"))
    assert console.http.get("/").status_code == 200
    revoke_token(hub.admin, "ana", clock=hub.clock)
    assert console.http.get("/").headers["location"].startswith("/console/sign-in")
    assert console.http.post("/console/publish", data={"csrf": "x"}).status_code in (401, 403)
    console.sign_in(hub.token("ana"))
    csrf = console.csrf()
    cookie = console.http.cookies["skyhub_session"]
    out = console.http.post("/console/sign-out", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/console/sign-in"
    assert console.http.get("/").status_code == 303
    again = httpx.Client(base_url=hub.url, cookies={"skyhub_session": cookie}, follow_redirects=False)
    assert again.get("/").headers["location"].startswith("/console/sign-in")  # the old cookie opens nothing
    again.close()


def test_a_bad_post_shows_each_sentence_next_to_its_field_and_writes_nothing(hub, console):
    console.sign_in(hub.token("ana"))
    form = {"platform": "ig", "account": "17841400000000000", "slug": "launch", "caption": "#a " * 31,
            "image-1": "http://cdn.example.org/a.png", "alt-1": "A box", "alt-2": "orphan"}
    page = console.post("/console/publish", form, form_page="/console/publish")
    assert page.status_code == 422
    html = page.text
    for field, sentence in [
        ("image-1", "image 1 must be an https URL (Instagram fetches it), got http://"),
        ("image-1", "image 1 must be a JPEG (Instagram takes JPEG only): its URL should end in .jpg or .jpeg"),
        ("caption", "an Instagram caption has at most 30 hashtags, got 31"),
        ("image-2", "image 2 has alt text but no URL"),
    ]:
        block = html[html.index(f'<ul class="field-errors" id="{field}-error">'):]
        assert sentence in block[: block.index("</ul>")], (field, sentence)
        assert f'aria-describedby="{field}-error"' in html or f'{field}-error"' in html
    assert 'value="launch"' in html  # what was typed comes back
    assert hub.admin.query("requests", "kind", "publish-request").docs == []
    late = console.post("/console/publish", {"platform": "threads", "account": "2900000000000001", "slug": "s", "caption": "Hi",
                                             "at": "2020-01-01T09:00", "tz": "Europe/Paris"}, form_page="/console/publish")
    assert late.status_code == 422 and "at (2020-01-01T09:00:00+01:00) is in the past" in late.text
    zone = console.post("/console/publish", {"platform": "threads", "account": "2900000000000001", "slug": "s", "caption": "Hi",
                                             "at": "2030-01-01T09:00", "tz": "Mars/Olympus"}, form_page="/console/publish")
    assert zone.status_code == 422 and "time zone &#39;Mars/Olympus&#39; is not known" in zone.text
    assert hub.admin.query("requests", "kind", "publish-request").docs == []
    good = console.post("/console/publish", {"platform": "threads", "account": "2900000000000001", "slug": "s", "caption": "Hi",
                                             "at": "2030-01-01T09:00", "tz": "Europe/Paris"}, form_page="/console/publish")
    assert good.status_code == 303
    doc = hub.admin.get("requests", "threads:2900000000000001:s")
    assert doc["at"] == "2030-01-01T09:00:00+01:00" and doc["notBefore"] == 1893484800000


def test_retry_and_cancel_where_the_machine_allows(hub, console):
    console.sign_in(hub.token("ana"))
    ana = Ledger(hub.admin, "user:ana", hub.clock)
    failed, _ = queue(ana, new_request("threads", account="29", slug="f", caption="x", now_ms=hub.clock.now_ms()))
    hub.admin.put("requests", {**failed, "status": "error", "lastError": "Threads refused it", "attempts": 3}, actor="admin")
    waiting, _ = queue(ana, new_request("threads", account="29", slug="w", caption="y", now_ms=hub.clock.now_ms()))
    page = console.http.get("/console/publish").text
    assert 'aria-label="Retry threads:29:f"' in page and 'aria-label="Cancel threads:29:w"' in page
    assert 'aria-label="Cancel threads:29:f"' not in page and 'aria-label="Retry threads:29:w"' not in page
    assert console.post("/console/publish/retry", {"id": "threads:29:f"}, form_page="/console/publish").status_code == 303
    retried = hub.admin.get("requests", "threads:29:f")
    assert retried["status"] == "pending" and retried["attempts"] == 0 and "lastError" not in retried
    unasked = console.post("/console/publish/cancel", {"id": "threads:29:w"}, form_page="/console/publish")
    assert unasked.status_code == 400 and "cancelling threads:29:w needs confirming" in unasked.text
    assert hub.admin.get("requests", "threads:29:w")["status"] == "pending"  # a cancel not confirmed writes nothing
    assert 'data-confirm="Cancel threads:29:w? This cannot be undone."' in page
    assert console.post("/console/publish/cancel", {"id": "threads:29:w", "confirm": "yes"}, form_page="/console/publish").status_code == 303
    assert hub.admin.get("requests", "threads:29:w")["status"] == "cancelled"
    again = console.post("/console/publish/cancel", {"id": "threads:29:w", "confirm": "yes"}, form_page="/console/publish")
    assert again.status_code == 422 and "only a post that is draft, in-review, approved or pending can be moved to cancelled" in again.text
    assert hub.admin.history("requests", "threads:29:f")[-1].actor == "user:ana"


def test_a_post_that_needs_a_person_is_shown_first_and_resolved_from_its_page(hub, console):
    console.sign_in(hub.token("ana"))
    ana = Ledger(hub.admin, "user:ana", hub.clock)
    doc, _ = queue(ana, new_request("threads", account="29", slug="same", caption="Same", now_ms=hub.clock.now_ms()))
    candidates = [{"mediaId": "17900001", "permalink": "https://www.threads.net/@shop/post/A/", "timestamp": "2026-12-01T09:00:00+0000"},
                  {"mediaId": "17900002", "permalink": "https://www.threads.net/@shop/post/B/", "timestamp": "2026-12-01T09:00:01+0000"}]
    hub.admin.put("requests", {**doc, "status": "needs-person", "candidates": candidates, "carouselId": "c1",
                               "lastError": "Threads published this post, but 2 recent post(s) have its caption"}, actor="admin")
    overview = console.http.get("/").text
    assert "needs a person" in overview and "threads:29:same needs a person" in overview
    page = console.http.get("/console/doc/requests/threads%3A29%3Asame").text
    assert "It became 17900001" in page and "It became 17900002" in page
    wrong = console.post("/console/publish/resolve", {"id": "threads:29:same", "to": "1234"}, form_page="/console/doc/requests/threads%3A29%3Asame")
    assert wrong.status_code == 422 and "is not a candidate" in wrong.text
    ok = console.post("/console/publish/resolve", {"id": "threads:29:same", "to": "17900002"}, form_page="/console/doc/requests/threads%3A29%3Asame")
    assert ok.status_code == 303
    d = hub.admin.get("requests", "threads:29:same")
    assert d["status"] == "done" and d["mediaId"] == "17900002" and d["permalink"] == "https://www.threads.net/@shop/post/B/"
    assert hub.admin.history("requests", "threads:29:same")[-1].actor == "user:ana"


def test_a_pasted_secret_never_comes_back(hub, console):
    console.sign_in(hub.token("ana"))
    canary = "CANARY-" + "s3cr3t" * 5
    bad = console.post("/console/credentials", {"platform": "bluesky", "account": "shop.bsky.social", "secret": "{" + canary},
                       form_page="/console/credentials")
    assert bad.status_code == 422 and "looks like JSON but does not parse" in bad.text and canary not in bad.text
    ok = console.post("/console/credentials", {"platform": "instagram", "account": "17841400000000000", "secret": canary},
                      form_page="/console/credentials")
    assert ok.status_code == 303 and canary not in ok.text and canary not in ok.headers.get("location", "")
    doc = hub.admin.get("vault", "instagram:17841400000000000")
    assert doc["status"] == "unverified" and doc["sealed"] and [c.actor for c in hub.admin.history("vault", doc["_id"])] == ["user:ana"]
    seen = [console.http.get(p).text for p in ("/", "/console/credentials", "/console/doc/vault/instagram%3A17841400000000000",
                                               "/console/db/vault?status=unverified")]
    token = hub.token("reader")
    seen.append(httpx.get(f"{hub.url}/v1/overview", headers={"Authorization": f"Bearer {token}"}).text)
    for text in seen:
        assert canary not in text and json.dumps(doc["sealed"])[1:40] not in text
    assert "Never shown here: sealed" in seen[2] and "(a new sealed: never shown)" in seen[2]


def test_a_document_page_shows_every_revision_with_actor_and_what_changed(hub, console):
    console.sign_in(hub.token("ana"))
    doc = hub.admin.put("notes", {"status": "open", "text": "first"}, "n1", actor="user:ana")
    hub.admin.put("notes", {"status": "closed", "text": "first"}, "n1", actor="user:bob", if_rev=doc["_rev"])
    html = console.http.get("/console/doc/notes/n1").text
    history = html[html.index('id="history"'):]
    assert history.index("user:bob") < history.index("user:ana")  # newest first
    assert "<del>open</del> → <ins>closed</ins>" in html
    assert console.http.get("/console/doc/auth/token%3Aabc").status_code == 404


def test_the_event_stream_resumes_from_the_last_event_id(hub, console):
    console.sign_in(hub.token("ana"))
    head = hub.admin.head_seq()
    seen: list[dict] = []
    got = threading.Event()

    def read(since_header: str | None, want: int) -> None:
        headers = {"Last-Event-ID": since_header} if since_header else {}
        with console.http.stream("GET", f"/console/events?since={head}", headers=headers, timeout=30) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if len(seen) >= want:
                        got.set()
                        return

    t = threading.Thread(target=read, args=(None, 2), daemon=True)
    t.start()
    first = hub.admin.put("notes", {"status": "a"}, "x1", actor="user:ana")
    hub.admin.put("notes", {"status": "b"}, "x2", actor="user:ana")
    assert got.wait(10) and [e["id"] for e in seen] == ["x1", "x2"]
    assert set(seen[0]) == {"seq", "db", "id", "status", "deleted"}  # never a document body
    seen.clear()
    got.clear()
    read(str(hub.admin.history("notes", "x1")[0].seq), 1)  # a reconnect names the last event it got
    assert [e["id"] for e in seen] == ["x2"] and first["_id"] == "x1"


def test_an_open_stream_ends_when_its_token_is_revoked(hub, console):
    console.sign_in(hub.token("ana"))
    ended, opened = threading.Event(), threading.Event()
    lines: list[str] = []

    def read() -> None:
        with console.http.stream("GET", "/console/events", timeout=30) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                opened.set()
                lines.append(line)
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    assert opened.wait(10)
    revoke_token(hub.admin, "ana", clock=hub.clock)
    assert ended.wait(20), "the stream stayed open after its token was revoked"
    assert "event: signed-out" in lines
    assert console.http.get("/console/events").status_code == 401  # and it does not open again


def test_the_cookie_is_secure_when_the_console_is_served_over_https(tmp_path):
    from starlette.requests import Request
    from starlette.responses import Response

    from hub.app import build_app
    from hub.console.web import Console as Web
    from hub.settings import load_settings

    app = build_app(load_settings(None, database_url=f"sqlite:///{tmp_path}/x.db"), clock=SYSTEM)
    try:
        web = Web.make(app)
        for scheme, secure in (("https", True), ("http", False)):
            request = Request({"type": "http", "method": "GET", "path": "/", "headers": [], "scheme": scheme,
                               "server": ("hub.example.org", 443), "query_string": b""})
            response = Response()
            web.set_session_cookie(response, request, "sid", 60)
            cookie = response.headers["set-cookie"]
            assert ("Secure" in cookie) is secure and "HttpOnly" in cookie and "SameSite=strict" in cookie
    finally:
        app.stop()


def test_mention_builds_show_author_text_reason_log_page_and_reply(hub, console):
    console.sign_in(hub.token("ana"))
    base = {"kind": "mention", "uri": "at://did:plc:a/app.bsky.feed.post/1", "cid": "c", "authorDid": "did:plc:a",
            "authorHandle": "ana.bsky.social", "text": "@ourbot make me a pomodoro timer", "attempts": 1}
    hub.admin.put("requests", {**base, "status": "build-failed", "lastError": "npm ERR! line one\nthe tail of the log"}, "m1", actor="admin")
    hub.admin.put("requests", {**base, "status": "replied", "result": {"url": "https://pages.example.org/m2/"},
                               "permalink": "https://bsky.app/profile/ourbot/post/3k"}, "m2", actor="admin")
    hub.admin.put("requests", {**base, "status": "skipped", "skipReason": "daily cap"}, "m3", actor="admin")
    failed = console.http.get("/console/mentions?status=build-failed").text
    assert "ana.bsky.social" in failed and "make me a pomodoro timer" in failed and "the tail of the log" in failed
    replied = console.http.get("/console/mentions?status=replied").text
    assert 'href="https://pages.example.org/m2/"' in replied and 'href="https://bsky.app/profile/ourbot/post/3k"' in replied
    assert "daily cap" in console.http.get("/console/mentions?status=skipped").text
    first = console.http.get("/console/mentions").text  # the first state with documents
    assert "<caption>skipped</caption>" in first or "<caption>build-failed</caption>" in first


def test_sessions_that_ended_over_a_week_ago_are_forgotten_at_a_sign_in(tmp_path):
    from hub.app import build_rules
    from hub.auth import add_user
    from hub.console.sessions import Sessions
    from ledger import FakeClock, open_store

    clock = FakeClock()
    store = open_store(f"sqlite:///{tmp_path}/s.db", build_rules(), clock)
    try:
        sessions = Sessions(store, clock=clock)
        token = add_user(store, "ana", clock=clock)
        first, session = sessions.sign_in(token)
        sessions.sign_out(session)
        kept = [d["_id"] for d in store.query("auth", "kind", "session").docs]
        assert len(kept) == 1
        clock.advance(6 * 86_400_000)
        sessions.sign_in(token)
        assert kept[0] in [d["_id"] for d in store.query("auth", "kind", "session").docs]  # less than a week: kept
        clock.advance(2 * 86_400_000)
        sessions.sign_in(token)
        left = [d["_id"] for d in store.query("auth", "kind", "session").docs]
        assert kept[0] not in left and len(left) == 2 and sessions.check(first) is None
    finally:
        store.close()
