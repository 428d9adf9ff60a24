"""The Bluesky adapter against a fake PDS behind the transport seam (an ``httpx.Client`` with a
``MockTransport``): sessions, notifications, writes under a fixed key, blobs and posts, and
every failure translated into the platform errors."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import httpx
import pytest

from platforms import AuthFailure, Failed, NetworkError, RateLimited, Rejected, Transient
from platforms.bluesky import POST, Bluesky, BlueskySession, Image, jwt_exp_ms, new_rkey
from platforms.richtext import facets
from skyhub_testkit.fakepds import DID, HANDLE, NOW_S, PASSWORD, PDS, FakePDS, iso, jwt, post_view, xrpc_error  # noqa: F401


def notification(n: int) -> dict:
    uri = f"at://did:plc:alice/app.bsky.feed.post/3kpost{n:05d}"
    return {"uri": uri, "cid": f"bafycid{n}", "reason": "mention", "isRead": False, "indexedAt": iso(NOW_S - n),
            "author": {"did": "did:plc:alice", "handle": "alice.test"},
            "record": {"$type": POST, "text": "@skybot.test make me a timer", "createdAt": iso(NOW_S - n)}}


@pytest.fixture
def pds():
    return FakePDS()


@pytest.fixture
def shared(pds):
    client = httpx.Client(transport=httpx.MockTransport(pds))
    yield client
    client.close()


@pytest.fixture
def bsky(shared, pds):
    return Bluesky(shared, PDS, pds.session())


# ---- sessions ---------------------------------------------------------------------------------------

def test_create_and_refresh_a_session_for_the_vault(shared, pds):
    anon = Bluesky(shared, PDS)
    session = anon.create_session(HANDLE, PASSWORD)
    assert (session.did, session.handle, session.access_jwt) == (DID, HANDLE, pds.access)
    assert session.expires_at == jwt_exp_ms(pds.access) == (NOW_S + 7200 + pds.generation) * 1000
    assert json.loads(pds.requests[-1].content) == {"identifier": HANDLE, "password": PASSWORD}
    assert "Authorization" not in pds.requests[-1].headers
    assert PASSWORD not in repr(session) and session.access_jwt not in repr(session) and session.refresh_jwt not in repr(session)

    old_refresh = session.refresh_jwt
    refreshed = anon.refresh_session(old_refresh)
    assert pds.requests[-1].headers["Authorization"] == f"Bearer {old_refresh}"
    assert refreshed.as_dict() == pds.session() and refreshed.refresh_jwt != old_refresh
    with pytest.raises(AuthFailure) as caught:  # single use: the old one is revoked
        anon.refresh_session(old_refresh)
    assert caught.value.error_code == "ExpiredToken" and old_refresh not in caught.value.reason
    assert pds.calls == ["com.atproto.server.createSession", "com.atproto.server.refreshSession", "com.atproto.server.refreshSession"]


def test_a_wrong_password_is_an_auth_failure_without_the_password(shared):
    with pytest.raises(AuthFailure) as caught:
        Bluesky(shared, PDS).create_session(HANDLE, "wrong-password-1")
    err = caught.value
    assert (err.platform, err.http_status, err.error_code) == ("bluesky", 401, "AuthenticationRequired")
    assert err.reason.startswith('Bluesky createSession: Bluesky answered "Invalid identifier or password" (HTTP 401, code AuthenticationRequired)')
    assert "wrong-password-1" not in err.reason and "wrong-password-1" not in repr(err)


def test_the_adapter_uses_the_vaults_session_and_never_refreshes_it(shared, pds):
    expired = {**pds.session(), "accessJwt": jwt(NOW_S - 3600, "com.atproto.appPass")}  # long expired: the SDK would refresh
    bsky = Bluesky(shared, PDS, expired)
    with pytest.raises(AuthFailure) as caught:
        bsky.notifications()
    assert caught.value.error_code == "ExpiredToken" and caught.value.http_status == 400
    assert "com.atproto.server.refreshSession" not in pds.calls  # the vault is the only writer of a session
    assert pds.requests[-1].headers["Authorization"] == f"Bearer {expired['accessJwt']}"
    assert expired["accessJwt"] not in caught.value.reason and expired["accessJwt"] not in repr(bsky)
    assert repr(bsky) == f"<Bluesky {HANDLE} on {PDS}>"


def test_closing_the_adapter_leaves_the_shared_client_open(bsky, shared):
    bsky.close()
    assert not shared.is_closed
    bsky.notifications()  # and still works


def test_import_platforms_does_not_load_atproto():
    code = ("import sys, platforms, platforms.meta, platforms.richtext, platforms.errors;"
            "loaded = [m for m in sys.modules if m.startswith('atproto')];"
            "assert not loaded, loaded;"
            "import platforms.bluesky; loaded = [m for m in sys.modules if m.startswith('atproto')]; assert not loaded, loaded")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---- reads ------------------------------------------------------------------------------------------

def test_notifications_follow_short_and_empty_pages(bsky, pds):
    notes = [notification(n) for n in range(6)]
    pds.pages = [notes[0:2], [], notes[2:5], notes[5:6]]
    assert [n["uri"] for n in bsky.walk_notifications()] == [n["uri"] for n in notes]
    listed = [r for r in pds.requests if r.url.path.endswith("listNotifications")]
    assert [r.url.params.get("cursor") for r in listed] == [None, "1", "2", "3"]
    assert all(r.url.params.get_list("reasons") == ["mention"] for r in listed)
    page, cursor = bsky.notifications(limit=2)
    assert len(page) == 2 and cursor == "1" and page[0]["author"]["handle"] == "alice.test"


def test_update_seen_and_get_posts(bsky, pds):
    bsky.update_seen(datetime(2027, 1, 15, 8, 30, tzinfo=UTC))
    assert pds.seen == ["2027-01-15T08:30:00Z"]
    uris = [f"at://did:plc:alice/app.bsky.feed.post/3k{n}" for n in range(30)] + ["at://did:plc:alice/app.bsky.feed.post/deleted"]
    posts = bsky.get_posts(uris)
    assert len(posts) == 30 and posts[uris[0]]["viewer"]["threadMuted"] is False
    assert [len(r.url.params.get_list("uris")) for r in pds.requests if r.url.path.endswith("getPosts")] == [25, 6]


def test_get_record_and_resolve_handle(bsky, pds):
    assert bsky.get_record(POST, "3kmissing") is None
    thing = {"$type": "com.example.thing", "name": "a thing", "nested": {"count": 2}}
    pds.records[("com.example.thing", "self")] = {"uri": f"at://{DID}/com.example.thing/self", "cid": "bafything", "value": thing}
    assert bsky.get_record("com.example.thing", "self") == {"uri": f"at://{DID}/com.example.thing/self", "cid": "bafything", "value": thing}
    bsky.post("3kpost", "hello")
    assert bsky.get_record(POST, "3kpost")["value"]["text"] == "hello"
    assert bsky.resolve_handle("ana.test") == "did:plc:ana" and bsky.resolve_handle("nobody.test") is None


# ---- writes under a fixed key -------------------------------------------------------------------------

ROOT = {"uri": "at://did:plc:alice/app.bsky.feed.post/3kroot", "cid": "bafyroot"}


def test_a_reply_is_posted_once_under_its_fixed_key(bsky, pds):
    rkey = new_rkey(NOW_S * 1000)
    text = "Your build is ready: https://skyhub.example/b/1"
    first = bsky.reply(rkey, text, facets(text), ROOT, ROOT, iso(NOW_S))
    assert first == {"uri": f"at://{DID}/{POST}/{rkey}", "cid": "bafyrei0"}
    again = bsky.reply(rkey, text, facets(text), ROOT, ROOT, iso(NOW_S))
    assert again == first and pds.calls.count("com.atproto.repo.createRecord") == 1
    record = pds.records[(POST, rkey)]["value"]
    for part in ("root", "parent"):
        assert {k: record["reply"][part][k] for k in ("uri", "cid")} == ROOT
    assert record["facets"][0]["features"][0]["uri"] == "https://skyhub.example/b/1"


@pytest.mark.parametrize("lost", ["already exists", "answer lost (502)", "read timeout after the write"])
def test_a_write_whose_answer_is_lost_is_resolved_by_reading_the_key(bsky, pds, lost):
    rkey = new_rkey(NOW_S * 1000)

    def write_then_fail(request, server):
        server.com_atproto_repo_createRecord(request)  # the write happened...
        if lost == "already exists":
            return server.com_atproto_repo_createRecord(request)  # ...and a racing retry is refused
        if lost == "answer lost (502)":
            return httpx.Response(502, text="bad gateway")
        raise httpx.ReadTimeout("timed out", request=request)

    pds.fail["com.atproto.repo.createRecord"] = [write_then_fail]
    ref = bsky.post(rkey, "hello")
    assert ref == {"uri": f"at://{DID}/{POST}/{rkey}", "cid": "bafyrei0"}
    assert pds.calls.count("com.atproto.repo.createRecord") == 1
    assert pds.calls[-1] == "com.atproto.repo.getRecord"


def test_a_failed_write_that_left_nothing_is_raised(bsky, pds):
    pds.fail["com.atproto.repo.createRecord"] = [httpx.Response(503, text="unavailable")]
    with pytest.raises(Transient):
        bsky.post(new_rkey(NOW_S * 1000), "hello")
    assert pds.records == {}


def test_upload_a_blob_and_post_it_with_alt_text_aspect_ratio_facets_and_langs(bsky, pds):
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    blob = bsky.upload_blob(png, "image/png")
    assert blob == {"$type": "blob", "ref": {"$link": "bafkrei1"}, "mimeType": "image/png", "size": len(png)}
    assert pds.blobs == [("image/png", png)]
    text = "Été 🌞 with @ana.test #summer https://shop.example/s"
    ref = bsky.post("3kabcdefghij2", text, facets=facets(text, bsky.resolve_handle),
                    images=[Image(blob, "A beach at noon", 1200, 800), Image(blob, "")], langs=["fr", "en"], created_at=iso(NOW_S))
    record = pds.records[(POST, "3kabcdefghij2")]["value"]
    assert ref["uri"].endswith("/3kabcdefghij2")
    assert record["text"] == text and record["langs"] == ["fr", "en"] and record["createdAt"] == iso(NOW_S)
    images = record["embed"]["images"]
    assert record["embed"]["$type"] == "app.bsky.embed.images" and len(images) == 2
    assert images[0]["alt"] == "A beach at noon" and images[0]["image"]["ref"] == {"$link": "bafkrei1"}
    assert (images[0]["aspectRatio"]["width"], images[0]["aspectRatio"]["height"]) == (1200, 800)
    assert "aspectRatio" not in images[1] and images[1]["alt"] == ""
    raw = text.encode()
    marked = {f["features"][0]["$type"].split("#")[1]: raw[f["index"]["byteStart"]:f["index"]["byteEnd"]].decode() for f in record["facets"]}
    assert marked == {"mention": "@ana.test", "tag": "#summer", "link": "https://shop.example/s"}


def test_a_post_too_long_or_with_too_many_images_is_rejected_without_a_call(bsky, pds):
    with pytest.raises(Rejected) as caught:
        bsky.post("3k", "é" * 301)
    assert "301 graphemes" in caught.value.reason
    bsky.post("3kfits", "👍🏽" * 300)  # 300 graphemes, 600 code points: fits
    with pytest.raises(Rejected):
        bsky.post("3k", "five", images=[Image({"$type": "blob"})] * 5)
    assert pds.calls.count("com.atproto.repo.createRecord") == 1


# ---- failures ----------------------------------------------------------------------------------------

def test_a_rate_limit_carries_its_reset_time(bsky, pds):
    pds.fail["app.bsky.notification.listNotifications"] = [xrpc_error(
        429, "RateLimitExceeded", "Rate Limit Exceeded", **{"ratelimit-limit": "3000", "ratelimit-remaining": "0",
                                                            "ratelimit-reset": str(NOW_S + 300), "ratelimit-policy": "3000;w=300"})]
    with pytest.raises(RateLimited) as caught:
        bsky.notifications()
    err = caught.value
    assert err.reset_at == (NOW_S + 300) * 1000 and err.blocked == "3000;w=300" and err.http_status == 429
    assert "resets at 2027-01-15T08:05:00+00:00" in err.reason


@pytest.mark.parametrize("answer,expected", [
    (xrpc_error(400, "ExpiredToken", "Token has expired"), AuthFailure),
    (xrpc_error(400, "InvalidToken", "Token could not be verified"), AuthFailure),
    (xrpc_error(401, "AuthenticationRequired", "Authentication Required"), AuthFailure),
    (xrpc_error(400, "AccountTakedown", "Account has been taken down"), AuthFailure),
    (xrpc_error(400, "AccountDeactivated", "Account is deactivated"), AuthFailure),
    (httpx.Response(401, text=""), AuthFailure),
    (httpx.Response(500, text="internal"), Transient),
    (xrpc_error(502, "UpstreamFailure", "AppView unreachable"), Transient),
    (httpx.Response(503, text=""), Transient),
    (xrpc_error(413, "PayloadTooLarge", "request entity too large"), Rejected),
    (xrpc_error(400, "InvalidRequest", "Input/limit must be <= 100"), Failed),
], ids=lambda v: getattr(v, "__name__", None) or str(getattr(v, "status_code", "")))
def test_every_answer_is_translated_once(bsky, pds, answer, expected):
    pds.fail["app.bsky.notification.listNotifications"] = [answer]
    with pytest.raises(expected) as caught:
        bsky.notifications()
    assert type(caught.value) is expected and caught.value.platform == "bluesky"
    assert caught.value.http_status == answer.status_code
    assert pds.access not in caught.value.reason


def test_a_pds_that_cannot_be_reached_is_named(bsky, pds):
    def refuse(request, server):
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    pds.fail["app.bsky.notification.listNotifications"] = [refuse]
    with pytest.raises(NetworkError) as caught:
        bsky.notifications()
    err = caught.value
    assert err.host == "pds.test" and err.reason.startswith("cannot reach pds.test: the network refused the connection (ConnectError)")


def test_a_pds_that_does_not_answer_in_time_is_transient(bsky, pds):
    pds.fail["app.bsky.feed.getPosts"] = [lambda request, server: httpx.ReadTimeout("timed out", request=request)]
    with pytest.raises(Transient) as caught:
        bsky.get_posts(["at://did:plc:alice/app.bsky.feed.post/3k"])
    assert type(caught.value) is Transient and "pds.test did not answer in time (ReadTimeout)" in caught.value.reason


def test_a_session_is_needed_for_account_calls(shared):
    with pytest.raises(AuthFailure):
        Bluesky(shared, PDS).notifications()


def test_record_keys_are_sortable_tids():
    first, later = new_rkey(NOW_S * 1000), new_rkey(NOW_S * 1000 + 1)
    assert len(first) == 13 and first < later and set(first) <= set("234567abcdefghijklmnopqrstuvwxyz")


def test_a_session_round_trips_through_as_dict():
    s = BlueskySession(did=DID, handle=HANDLE, access_jwt="a" * 20, refresh_jwt="r" * 20, expires_at=1)
    assert s.as_dict() == {"accessJwt": "a" * 20, "refreshJwt": "r" * 20, "did": DID, "handle": HANDLE}
