"""The Meta Graph clients against a mocked transport: the documented request and answer
shapes, tokens only in headers or form bodies, retries on reads and never on a call that
creates something, the usage headers, and a network failure that names its host."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import httpx
import pytest

from platforms import NetworkError, RateLimited, Transient
from platforms.meta import FACEBOOK_LOGIN, Facebook, Instagram, RetryPolicy, Threads

TOKEN = "IGQVJ-secret-token-1234567890"
APP_SECRET = "app-secret-abcdef123456"
IG_USER = "17841400000000001"
NOW_MS = 1_800_000_000_000


def ok(body, **headers):
    return httpx.Response(200, json=body, headers=headers)


def form(request: httpx.Request) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(request.content.decode()).items()}


class Sleeps:
    def __init__(self):
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps():
    return Sleeps()


def no_token_anywhere(recorder):
    for request in recorder.requests:
        assert TOKEN not in str(request.url) and APP_SECRET not in str(request.url)


# ---- vault: verify, refresh, exchange ---------------------------------------------------------------

def test_instagram_verify_sends_the_token_as_a_bearer_header(http, recorder):
    recorder.serve(ok({"user_id": "17841400000000001", "username": "shop", "id": "7"}))
    profile = Instagram(http, TOKEN).verify()
    assert (profile.id, profile.username) == ("17841400000000001", "shop")
    request = recorder.last
    assert str(request.url) == "https://graph.instagram.com/me?fields=user_id%2Cusername"
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    no_token_anywhere(recorder)


@pytest.mark.parametrize("version,path", [("v21.0", "/v21.0/me"), ("", "/me"), ("/v1.0/", "/v1.0/me")])
def test_the_version_is_a_path_prefix_or_nothing(http, recorder, version, path):
    recorder.serve(ok({"id": "1", "username": "t"}))
    Threads(http, TOKEN, version=version).verify()
    assert recorder.last.url.host == "graph.threads.net" and recorder.last.url.path == path
    assert recorder.last.url.params["fields"] == "id,username"


def test_facebook_verify_is_plain_me(http, recorder):
    recorder.serve(ok({"id": "42", "name": "Ana"}))
    profile = Facebook(http, TOKEN, version="v21.0").verify()
    assert (profile.id, profile.username) == ("42", "Ana")
    assert str(recorder.last.url) == "https://graph.facebook.com/v21.0/me"


@pytest.mark.parametrize("client,grant", [(Instagram, "ig_refresh_token"), (Threads, "th_refresh_token")])
def test_refresh_returns_the_new_token_and_its_lifetime(http, recorder, client, grant):
    recorder.serve(ok({"access_token": "NEW-TOKEN-123", "token_type": "bearer", "expires_in": 5_184_000}))
    token = client(http, TOKEN).refresh()
    assert (token.access_token, token.expires_in, token.token_type) == ("NEW-TOKEN-123", 5_184_000, "bearer")
    assert "NEW-TOKEN-123" not in repr(token)
    assert recorder.last.url.path == "/refresh_access_token" and recorder.last.url.params["grant_type"] == grant
    assert recorder.last.headers["Authorization"] == f"Bearer {TOKEN}"
    no_token_anywhere(recorder)


def test_facebook_exchange_sends_credentials_in_the_form_body_only(http, recorder):
    recorder.serve(ok({"access_token": "LONG-LIVED", "token_type": "bearer", "expires_in": 5_183_944}))
    token = Facebook(http, TOKEN, version="v21.0").exchange_token("app-1", APP_SECRET)
    assert (token.access_token, token.expires_in) == ("LONG-LIVED", 5_183_944)
    request = recorder.last
    assert (request.method, str(request.url)) == ("POST", "https://graph.facebook.com/v21.0/oauth/access_token")
    assert form(request) == {"grant_type": "fb_exchange_token", "client_id": "app-1", "client_secret": APP_SECRET,
                             "fb_exchange_token": TOKEN}
    assert "Authorization" not in request.headers
    no_token_anywhere(recorder)


def test_the_app_secret_never_reaches_a_reason(http, recorder):
    recorder.serve(httpx.Response(400, json={"error": {"message": f"Error validating client secret {APP_SECRET}", "code": 1, "type": "OAuthException"}}))
    with pytest.raises(Transient) as caught:
        Facebook(http, TOKEN, retry=RetryPolicy(attempts=1)).exchange_token("app-1", APP_SECRET)
    assert APP_SECRET not in caught.value.reason and TOKEN not in caught.value.reason


def test_a_refresh_without_an_access_token_fails_clearly(http, recorder):
    recorder.serve(ok({"token_type": "bearer"}))
    with pytest.raises(Exception) as caught:
        Instagram(http, TOKEN).refresh()
    assert "no access_token" in caught.value.reason


# ---- Instagram publishing -------------------------------------------------------------------------

def test_image_containers_for_a_carousel_and_for_a_single_image(http, recorder):
    recorder.serve(ok({"id": "17889000000000001"}))
    ig = Instagram(http, TOKEN, base_url=FACEBOOK_LOGIN, version="v21.0")
    assert ig.create_image(IG_USER, "https://cdn.example/1.jpg", alt_text="a red bike", carousel_item=True, caption="ignored") == "17889000000000001"
    child = recorder.last
    assert (child.method, str(child.url)) == ("POST", f"https://graph.facebook.com/v21.0/{IG_USER}/media")
    assert form(child) == {"image_url": "https://cdn.example/1.jpg", "is_carousel_item": "true", "alt_text": "a red bike"}
    ig.create_image(IG_USER, "https://cdn.example/2.jpg", caption="Spring is here 🌷")
    assert form(recorder.last) == {"image_url": "https://cdn.example/2.jpg", "caption": "Spring is here 🌷"}
    no_token_anywhere(recorder)


def test_a_carousel_container_lists_its_children(http, recorder):
    recorder.serve(ok({"id": "17889000000000099"}))
    carousel = Instagram(http, TOKEN).create_carousel(IG_USER, ["101", "102", "103"], caption="Three of them #new")
    assert carousel == "17889000000000099"
    assert form(recorder.last) == {"media_type": "CAROUSEL", "children": "101,102,103", "caption": "Three of them #new"}


@pytest.mark.parametrize("status", ["EXPIRED", "ERROR", "FINISHED", "IN_PROGRESS", "PUBLISHED"])
def test_container_status(http, recorder, status):
    detail = "2207052" if status == "ERROR" else status.title()
    recorder.serve(ok({"status_code": status, "status": detail, "id": "17889000000000001"}))
    got = Instagram(http, TOKEN).container_status("17889000000000001")
    assert (got.id, got.status, got.detail) == ("17889000000000001", status, detail)
    assert got.ready == (status == "FINISHED") and got.published == (status == "PUBLISHED")
    assert got.dead == (status in ("ERROR", "EXPIRED"))
    assert recorder.last.url.path == "/17889000000000001" and recorder.last.url.params["fields"] == "status_code,status"


def test_publishing_limit(http, recorder):
    recorder.serve(ok({"data": [{"quota_usage": 48, "config": {"quota_total": 50, "quota_duration": 86400}}]}))
    limit = Instagram(http, TOKEN).publishing_limit(IG_USER)
    assert (limit.quota_usage, limit.quota_total, limit.quota_duration, limit.remaining) == (48, 50, 86400, 2)
    assert recorder.last.url.path == f"/{IG_USER}/content_publishing_limit"
    assert recorder.last.url.params["fields"] == "quota_usage,config"


def test_publish_and_permalink(http, recorder):
    recorder.serve(ok({"id": "17920000000000001"}))
    ig = Instagram(http, TOKEN)
    assert ig.publish(IG_USER, "17889000000000099") == "17920000000000001"
    assert str(recorder.last.url) == f"https://graph.instagram.com/{IG_USER}/media_publish"
    assert form(recorder.last) == {"creation_id": "17889000000000099"}
    recorder.serve(ok({"permalink": "https://www.instagram.com/p/C0dE/", "id": "17920000000000001"}))
    assert ig.permalink("17920000000000001") == "https://www.instagram.com/p/C0dE/"
    assert recorder.last.url.params["fields"] == "permalink"


def test_recent_media_pages_by_cursor_and_never_follows_next(http, recorder):
    first = {"data": [{"id": "3", "permalink": "https://www.instagram.com/p/c/", "timestamp": "2027-01-15T08:00:00+0000", "caption": "c"},
                      {"id": "2", "permalink": "https://www.instagram.com/p/b/", "timestamp": "2027-01-15T07:00:00+0000"}],
             "paging": {"cursors": {"before": "B1", "after": "A1"},
                        "next": f"https://graph.instagram.com/{IG_USER}/media?access_token={TOKEN}&after=A1"}}
    last = {"data": [{"id": "1", "permalink": "https://www.instagram.com/p/a/", "timestamp": "2027-01-14T07:00:00+0000", "caption": "a"}],
            "paging": {"cursors": {"before": "B2", "after": "A2"}}}
    recorder.serve(ok(first), ok(last))
    ig = Instagram(http, TOKEN)
    page = ig.recent_media(IG_USER, limit=2)
    assert [(m.id, m.text) for m in page.items] == [("3", "c"), ("2", None)] and page.after == "A1"
    assert recorder.last.url.params["fields"] == "id,permalink,timestamp,caption" and recorder.last.url.params["limit"] == "2"
    page = ig.recent_media(IG_USER, limit=2, after=page.after)
    assert [m.id for m in page.items] == ["1"] and page.after is None  # no "next": the last page
    assert recorder.last.url.params["after"] == "A1"
    no_token_anywhere(recorder)


# ---- Threads publishing ---------------------------------------------------------------------------

def test_threads_containers_publish_and_reads(http, recorder):
    recorder.serve(ok({"id": "c1"}))
    th = Threads(http, TOKEN, version="v1.0")
    th.create_container("99", "TEXT", text="Hello, Threads")
    assert str(recorder.last.url) == "https://graph.threads.net/v1.0/99/threads"
    assert form(recorder.last) == {"media_type": "TEXT", "text": "Hello, Threads"}
    th.create_image("99", "https://cdn.example/1.jpg", alt_text="a bike", carousel_item=True, caption="dropped")
    assert form(recorder.last) == {"media_type": "IMAGE", "image_url": "https://cdn.example/1.jpg", "alt_text": "a bike", "is_carousel_item": "true"}
    th.create_carousel("99", ["c1", "c2"], caption="Two pictures")
    assert form(recorder.last) == {"media_type": "CAROUSEL", "children": "c1,c2", "text": "Two pictures"}

    recorder.serve(ok({"status": "ERROR", "id": "c3", "error_message": "FAILED_DOWNLOADING_VIDEO"}))
    status = th.container_status("c3")
    assert (status.status, status.detail, status.dead) == ("ERROR", "FAILED_DOWNLOADING_VIDEO", True)
    assert recorder.last.url.params["fields"] == "status,error_message"

    recorder.serve(ok({"data": [{"quota_usage": 4, "config": {"quota_total": 250, "quota_duration": 86400}}]}))
    assert th.publishing_limit("99").remaining == 246
    assert recorder.last.url.path == "/v1.0/99/threads_publishing_limit"

    recorder.serve(ok({"id": "t1"}))
    assert th.publish("99", "c3") == "t1"
    assert str(recorder.last.url) == "https://graph.threads.net/v1.0/99/threads_publish" and form(recorder.last) == {"creation_id": "c3"}

    recorder.serve(ok({"data": [{"id": "t1", "permalink": "https://www.threads.net/@shop/post/Cx", "timestamp": "2027-01-15T08:00:00+0000",
                                 "text": "Two pictures"}]}))
    page = th.recent_threads("99")
    assert page.items[0].text == "Two pictures" and page.after is None
    assert recorder.last.url.params["fields"] == "id,permalink,timestamp,text"
    no_token_anywhere(recorder)


# ---- retries ----------------------------------------------------------------------------------------

def test_a_transient_read_is_retried_with_growing_waits(http, recorder, sleeps):
    down = httpx.Response(500, json={"error": {"message": "An unexpected error has occurred.", "code": 2, "is_transient": True}})
    recorder.serve(down, down, ok({"status_code": "FINISHED", "id": "1"}))
    ig = Instagram(http, TOKEN, retry=RetryPolicy(attempts=3, wait=0.5, sleep=sleeps))
    assert ig.container_status("1").ready
    assert len(recorder.requests) == 3 and sleeps.waits == [0.5, 1.0]


def test_a_read_gives_up_after_its_attempts(http, recorder, sleeps):
    recorder.serve(httpx.Response(503, text="upstream down"))
    with pytest.raises(Transient):
        Instagram(http, TOKEN, retry=RetryPolicy(attempts=4, sleep=sleeps)).permalink("1")
    assert len(recorder.requests) == 4 and len(sleeps.waits) == 3


def test_a_read_timeout_is_retried_then_transient(http, recorder, sleeps):
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    recorder.answer = slow
    with pytest.raises(Transient) as caught:
        Threads(http, TOKEN, retry=RetryPolicy(attempts=3, sleep=sleeps)).verify()
    assert type(caught.value) is Transient and len(recorder.requests) == 3
    assert "graph.threads.net did not answer in time (ReadTimeout)" in caught.value.reason


def test_a_rate_limit_is_not_retried(http, recorder, sleeps):
    recorder.serve(httpx.Response(400, json={"error": {"message": "Application request limit reached", "code": 4}}))
    with pytest.raises(RateLimited):
        Instagram(http, TOKEN, retry=RetryPolicy(attempts=5, sleep=sleeps)).verify()
    assert len(recorder.requests) == 1 and sleeps.waits == []


CREATES = [
    ("media_publish", lambda c: Instagram(c, TOKEN, retry=RetryPolicy(attempts=5, sleep=lambda s: None)).publish(IG_USER, "1")),
    ("image container", lambda c: Instagram(c, TOKEN, retry=RetryPolicy(attempts=5, sleep=lambda s: None)).create_image(IG_USER, "https://x/1.jpg")),
    ("carousel container", lambda c: Instagram(c, TOKEN, retry=RetryPolicy(attempts=5, sleep=lambda s: None)).create_carousel(IG_USER, ["1"])),
    ("threads_publish", lambda c: Threads(c, TOKEN, retry=RetryPolicy(attempts=5, sleep=lambda s: None)).publish("9", "1")),
    ("threads container", lambda c: Threads(c, TOKEN, retry=RetryPolicy(attempts=5, sleep=lambda s: None)).create_container("9", "TEXT", text="hi")),
]


@pytest.mark.parametrize("name,call", CREATES, ids=[c[0] for c in CREATES])
@pytest.mark.parametrize("failure", ["500", "code 2", "read timeout", "connection refused"])
def test_a_call_that_creates_is_made_exactly_once(http, recorder, name, call, failure):
    def answer(request):
        if failure == "read timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        if failure == "connection refused":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if failure == "500":
            return httpx.Response(500, text="")
        return httpx.Response(400, json={"error": {"message": "An unexpected error has occurred.", "code": 2, "is_transient": True}})

    recorder.answer = answer
    with pytest.raises(Transient):
        call(http)
    assert len(recorder.requests) == 1


# ---- usage headers and rate limits -------------------------------------------------------------------

def test_usage_headers_of_the_last_answer(http, recorder):
    buc = {IG_USER: [{"type": "instagram", "call_count": 91, "total_cputime": 12, "total_time": 15, "estimated_time_to_regain_access": 0}]}
    recorder.serve(ok({"id": "1", "username": "x"}, **{"X-App-Usage": json.dumps({"call_count": 28, "total_time": 25, "total_cputime": 25}),
                                                       "X-Business-Use-Case-Usage": json.dumps(buc)}))
    ig = Instagram(http, TOKEN)
    assert ig.usage.percent == 0
    ig.verify()
    assert ig.usage.app == {"call_count": 28, "total_time": 25, "total_cputime": 25}
    assert ig.usage.percent == 91 and ig.usage.near_limit() and not ig.usage.near_limit(95)
    recorder.serve(ok({"id": "1"}))
    ig.verify()
    assert ig.usage.percent == 0  # the last answer's headers, not a sum


def test_a_rate_limit_says_when_it_resets_and_which_limit(http, recorder):
    buc = {IG_USER: [{"type": "instagram", "call_count": 100, "total_cputime": 20, "total_time": 20, "estimated_time_to_regain_access": 15}]}
    recorder.serve(httpx.Response(400, headers={"X-Business-Use-Case-Usage": json.dumps(buc)},
                                  json={"error": {"message": "There have been too many calls to this Instagram account.", "code": 80002,
                                                  "type": "OAuthException", "fbtrace_id": "Xyz"}}))
    ig = Instagram(http, TOKEN, now_ms=lambda: NOW_MS)
    with pytest.raises(RateLimited) as caught:
        ig.verify()
    err = caught.value
    assert err.reset_at == NOW_MS + 15 * 60_000 and err.blocked == "business use case"
    assert "code 80002" in err.reason and "fbtrace_id Xyz" in err.reason


# ---- the network ----------------------------------------------------------------------------------

@pytest.mark.parametrize("message,how", [
    ("[Errno 111] Connection refused", "the network refused the connection"),
    ("[Errno -2] Name or service not known", "the network could not resolve the host name"),
])
def test_a_network_failure_names_the_host(http, recorder, sleeps, message, how):
    def refuse(request):
        raise httpx.ConnectError(message, request=request)

    recorder.answer = refuse
    with pytest.raises(NetworkError) as caught:
        Instagram(http, TOKEN, retry=RetryPolicy(attempts=2, sleep=sleeps)).verify()
    err = caught.value
    assert err.host == "graph.instagram.com" and err.platform == "instagram"
    assert err.reason.startswith(f"cannot reach graph.instagram.com: {how} (ConnectError)")
    assert len(recorder.requests) == 2  # a read: retried like any transient failure
    assert isinstance(err.__cause__, httpx.ConnectError)


def test_a_client_repr_shows_no_token(http):
    assert TOKEN not in repr(Instagram(http, TOKEN)) and repr(Threads(http, TOKEN, version="v1.0")) == "<Threads https://graph.threads.net/v1.0>"
