"""The vault tick against the platforms' APIs (respx): verify, refresh, fall back, flag."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
import respx

from tests.vault.conftest import DAY
from vault import DB

HOUR = 3_600_000


def jwt(exp_s):
    payload = base64.urlsafe_b64encode(json.dumps({"exp": exp_s}).encode()).decode().rstrip("=")
    return f"h.{payload}.s"


def doc(env, cred_id):
    return env.store.get(DB, cred_id)


def secret_of(env, cred_id):
    from ledger import Ledger
    from vault import Vault

    return Vault(Ledger(env.store, "tick:test", env.clock), env.key).reveal(cred_id)


def paste_ok(env, platform, account, secret, route):
    env.person.put(platform, account, secret)
    route.mock(return_value=httpx.Response(200, json={"id": "1", "username": "x"}))
    env.maintainer.run()
    assert doc(env, f"{platform}:{account}")["status"] == "ok"


@respx.mock
def test_a_paste_is_verified_by_the_next_tick(env):
    me = respx.get("https://ig.test/me").mock(return_value=httpx.Response(200, json={"user_id": "1", "username": "shop"}))
    env.person.put("instagram", "1784", "IGTOKEN-1")
    assert doc(env, "instagram:1784")["status"] == "unverified"
    env.maintainer.run()
    d = doc(env, "instagram:1784")
    assert (d["status"], d["needsReauth"], d["verifiedAt"]) == ("ok", False, env.clock.now_ms())
    assert me.calls.last.request.headers["Authorization"] == "Bearer IGTOKEN-1"
    assert "IGTOKEN" not in str(me.calls.last.request.url)
    env.maintainer.run()  # a doubled tick changes nothing
    assert me.call_count == 1 and len(env.store.history(DB, "instagram:1784")) == 3


@respx.mock
@pytest.mark.parametrize("platform,url", [("threads", "https://threads.test/me"), ("facebook", "https://graph.test/v21.0/me")])
def test_a_refused_paste_flips_needs_reauth(env, platform, url):
    respx.get(url).mock(return_value=httpx.Response(400, json={"error": {"message": "Error validating access token", "code": 190, "error_subcode": 463}}))
    env.person.put(platform, "42", "DEADTOKEN")
    env.maintainer.run()
    d = doc(env, f"{platform}:42")
    assert d["status"] == "needs-reauth" and d["needsReauth"] is True
    assert "code 190, subcode 463" in d["lastError"] and "DEADTOKEN" not in d["lastError"]


@respx.mock
def test_meta_refresh_succeeds_after_seven_days_and_stores_the_next_version(env):
    paste_ok(env, "instagram", "1784", "OLD", respx.get("https://ig.test/me"))
    refresh = respx.get("https://ig.test/refresh_access_token").mock(
        return_value=httpx.Response(200, json={"access_token": "NEW", "token_type": "bearer", "expires_in": 5_184_000}))
    env.clock.advance(7 * DAY - 1)
    env.maintainer.run()
    assert refresh.call_count == 0
    env.clock.advance(1)
    env.maintainer.run()
    d = doc(env, "instagram:1784")
    assert refresh.call_count == 1 and refresh.calls.last.request.url.params["grant_type"] == "ig_refresh_token"
    assert (d["status"], d["version"], d["refreshedAt"], d["expiresAt"]) == ("ok", 2, env.clock.now_ms(), env.clock.now_ms() + 5_184_000_000)
    assert secret_of(env, "instagram:1784") == {"accessToken": "NEW"}
    env.maintainer.run()
    assert refresh.call_count == 1  # idempotent: nothing due any more


@respx.mock
def test_threads_and_facebook_refresh_with_their_own_grants(env):
    paste_ok(env, "threads", "9", "T-OLD", respx.get("https://threads.test/me"))
    paste_ok(env, "facebook", "7", json.dumps({"accessToken": "F-OLD", "appId": "app", "appSecret": "APPSECRET"}), respx.get("https://graph.test/v21.0/me"))
    th = respx.get("https://threads.test/refresh_access_token").mock(return_value=httpx.Response(200, json={"access_token": "T-NEW", "expires_in": 100}))
    fb = respx.post("https://graph.test/v21.0/oauth/access_token").mock(return_value=httpx.Response(200, json={"access_token": "F-NEW", "expires_in": 200}))
    env.clock.advance(8 * DAY)
    env.maintainer.run()
    assert th.calls.last.request.url.params["grant_type"] == "th_refresh_token"
    form = dict(x.split("=") for x in fb.calls.last.request.content.decode().split("&"))
    assert form == {"grant_type": "fb_exchange_token", "client_id": "app", "client_secret": "APPSECRET", "fb_exchange_token": "F-OLD"}
    assert "F-OLD" not in str(fb.calls.last.request.url)
    assert secret_of(env, "threads:9")["accessToken"] == "T-NEW" and secret_of(env, "facebook:7")["accessToken"] == "F-NEW"


@respx.mock
def test_a_token_younger_than_a_day_is_never_refreshed(env):
    env.maintainer.policy.refresh_after_ms = HOUR  # even when configured lower
    paste_ok(env, "instagram", "1", "TOK", respx.get("https://ig.test/me"))
    refresh = respx.get("https://ig.test/refresh_access_token").mock(return_value=httpx.Response(200, json={"access_token": "N", "expires_in": 1}))
    env.clock.advance(DAY - 1)
    env.maintainer.run()
    assert refresh.call_count == 0
    env.clock.advance(1)
    env.maintainer.run()
    assert refresh.call_count == 1


@respx.mock
def test_refresh_refused_with_190_flips_needs_reauth(env):
    paste_ok(env, "instagram", "1", "TOK", respx.get("https://ig.test/me"))
    respx.get("https://ig.test/refresh_access_token").mock(
        return_value=httpx.Response(400, json={"error": {"message": "Session has expired", "type": "OAuthException", "code": 190}}))
    env.clock.advance(8 * DAY)
    env.maintainer.run()
    d = doc(env, "instagram:1")
    assert d["needsReauth"] is True and "Session has expired" in d["lastError"]
    assert secret_of(env, "instagram:1") == {"accessToken": "TOK"}


@respx.mock
@pytest.mark.parametrize("failure,calls", [
    (httpx.Response(500, json={"error": {"message": "An unexpected error has occurred", "code": 2}}), 3),
    # a rate limit is not retried within the tick (that only makes it worse): recorded, tried at the next
    (httpx.Response(429, json={"error": {"message": "Application request limit reached", "code": 4}}), 1),
    (httpx.ConnectTimeout("timed out"), 3),
])
def test_transient_failures_are_retried_recorded_and_never_flag(env, failure, calls):
    paste_ok(env, "instagram", "1", "TOK", respx.get("https://ig.test/me"))
    route = respx.get("https://ig.test/refresh_access_token")
    route.mock(side_effect=failure) if isinstance(failure, Exception) else route.mock(return_value=failure)
    env.clock.advance(8 * DAY)
    env.maintainer.run()
    d = doc(env, "instagram:1")
    assert route.call_count == calls  # the configured bound
    assert (d["status"], d["needsReauth"]) == ("ok", False) and d["lastError"]
    # the next tick tries again, and a success clears the error
    route.mock(return_value=httpx.Response(200, json={"access_token": "N", "expires_in": 10}), side_effect=None)
    env.maintainer.run()
    assert doc(env, "instagram:1")["lastError"] is None and secret_of(env, "instagram:1")["accessToken"] == "N"


@respx.mock
def test_bluesky_refresh_revoked_falls_back_to_create_session_until_the_budget_runs_out(env):
    env.maintainer.policy.create_session_budget = 2
    create = respx.post("https://pds.test/xrpc/com.atproto.server.createSession")
    create.mock(side_effect=lambda request: httpx.Response(200, json={
        "accessJwt": jwt(env.clock.now_ms() // 1000 + 7200), "refreshJwt": f"R{create.call_count}", "did": "did:plc:bot", "handle": "bot.test"}))
    refresh = respx.post("https://pds.test/xrpc/com.atproto.server.refreshSession")
    env.person.put("bluesky", "bot.test", "app-pass-word")
    env.maintainer.run()  # verify = createSession #1
    d = doc(env, "bluesky:bot.test")
    assert d["status"] == "ok" and d["createSessions"]["count"] == 1
    assert json.loads(create.calls.last.request.content) == {"identifier": "bot.test", "password": "app-pass-word"}
    assert d["expiresAt"] == env.clock.now_ms() // 1000 * 1000 + 7_200_000
    # near expiry: refreshSession with the refresh JWT
    refresh.mock(return_value=httpx.Response(200, json={"accessJwt": jwt(env.clock.now_ms() // 1000 + 9000), "refreshJwt": "R-rotated", "did": "did:plc:bot", "handle": "bot.test"}))
    env.clock.advance(7_200_000 - 10 * 60_000)
    env.maintainer.run()
    assert refresh.calls.last.request.headers["Authorization"] == "Bearer R0"  # from createSession #1
    assert secret_of(env, "bluesky:bot.test")["session"]["refreshJwt"] == "R-rotated"
    # the refresh token is revoked: createSession #2 (within budget)
    refresh.mock(return_value=httpx.Response(400, json={"error": "ExpiredToken", "message": "Token has been revoked"}))
    env.clock.advance(9_000_000)
    env.maintainer.run()
    d = doc(env, "bluesky:bot.test")
    assert d["status"] == "ok" and d["createSessions"]["count"] == 2 and create.call_count == 2
    # revoked again, budget used up: a person must act
    env.clock.advance(9_000_000)
    env.maintainer.run()
    d = doc(env, "bluesky:bot.test")
    assert d["needsReauth"] is True and "budget (2) is used up" in d["lastError"] and create.call_count == 2


@respx.mock
def test_a_refused_app_password_flags_the_credential(env):
    respx.post("https://pds.test/xrpc/com.atproto.server.createSession").mock(
        return_value=httpx.Response(401, json={"error": "AuthenticationRequired", "message": "Invalid identifier or password"}))
    env.person.put("bluesky", "bot.test", "wrong-pass")
    env.maintainer.run()
    d = doc(env, "bluesky:bot.test")
    assert d["needsReauth"] is True and "Invalid identifier or password" in d["lastError"] and d["createSessions"]["count"] == 1


@respx.mock
def test_exactly_one_writer_rotates_a_session(env):
    """Two vault ticks at once (two processes): one claims the credential, the other leaves it."""
    from ledger import Ledger
    from vault import Maintainer

    create = respx.post("https://pds.test/xrpc/com.atproto.server.createSession").mock(
        return_value=httpx.Response(200, json={"accessJwt": jwt(1), "refreshJwt": "R", "did": "did:plc:bot", "handle": "bot.test"}))
    env.person.put("bluesky", "bot.test", "pw")
    stale = env.store.get(DB, "bluesky:bot.test")
    other = Maintainer(Ledger(env.store, "tick:vault", env.clock), env.key, env.platforms)
    assert env.maintainer.maintain(stale) == "ok"
    assert other.maintain(stale) is None  # its read is stale: the claim conflicts, nothing is called
    assert create.call_count == 1


@respx.mock
def test_a_paste_during_a_rotation_wins(env):
    paste_ok(env, "instagram", "1", "OLD", respx.get("https://ig.test/me"))

    def refresh(request):
        env.person.put("instagram", "1", "PASTED-MEANWHILE")
        return httpx.Response(200, json={"access_token": "ROTATED", "expires_in": 10})

    respx.get("https://ig.test/refresh_access_token").mock(side_effect=refresh)
    env.clock.advance(8 * DAY)
    assert env.maintainer.run() == {"superseded": 1}
    assert secret_of(env, "instagram:1") == {"accessToken": "PASTED-MEANWHILE"}
    assert doc(env, "instagram:1")["status"] == "unverified"


@respx.mock
def test_a_network_failure_names_the_host_and_spends_no_create_session_budget(env):
    create = respx.post("https://pds.test/xrpc/com.atproto.server.createSession")
    create.mock(side_effect=httpx.ConnectError("[Errno 111] Connection refused"))
    env.person.put("bluesky", "bot.test", "app-pass-word")
    env.maintainer.run()
    d = doc(env, "bluesky:bot.test")
    assert d["status"] == "unverified" and d["needsReauth"] is False  # stored, checked again at the next tick
    assert "cannot reach pds.test" in d["lastError"] and "network" in d["lastError"]
    assert not d.get("createSessions")  # the PDS never saw an attempt: nothing spent
    create.mock(side_effect=None, return_value=httpx.Response(200, json={
        "accessJwt": jwt(env.clock.now_ms() // 1000 + 7200), "refreshJwt": "R", "did": "did:plc:bot", "handle": "bot.test",
        "didDoc": {"id": "did:plc:bot", "service": [{"id": "#atproto_pds", "type": "AtprotoPersonalDataServer", "serviceEndpoint": "https://home.pds.test"}]}}))
    env.maintainer.run()
    d = doc(env, "bluesky:bot.test")
    assert d["status"] == "ok" and d["createSessions"]["count"] == 1
    assert secret_of(env, "bluesky:bot.test")["session"]["pds"] == "https://home.pds.test"  # the account's own PDS, from its DID


@respx.mock
def test_the_vault_tick_runs_from_its_context(env):
    from datetime import UTC, datetime

    from ledger import Ledger, Services, TickEvent
    from ledger.context import make_context
    from platforms.settings import PlatformSettings
    from vault import Vault
    from vault.rotation import maintain
    from vault.settings import VaultSettings

    me = respx.get("https://ig.test/me").mock(return_value=httpx.Response(200, json={"user_id": "1", "username": "shop"}))
    env.person.put("instagram", "1784", "IGTOKEN-1")
    platforms = PlatformSettings(instagram_url="https://ig.test", threads_url="https://threads.test", facebook_url="https://graph.test",
                                 bluesky_pds="https://pds.test")
    services = Services(vault=lambda db: Vault(db, env.key), http=httpx.Client(), platforms=platforms)
    ctx = make_context(Ledger(env.store, "tick:vault", env.clock), "vault", services, settings=VaultSettings(retry_wait="1ms"))
    assert maintain(TickEvent("vault", datetime.fromtimestamp(env.clock.now_ms() / 1000, tz=UTC)), ctx) == {"ok": 1}
    assert me.call_count == 1 and doc(env, "instagram:1784")["verifiedAt"] == env.clock.now_ms()
