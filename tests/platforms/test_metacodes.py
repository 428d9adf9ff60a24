"""The classification table: every Meta code and subcode we know ends in its error class,
through a real client call on a mocked transport (the documented error body shape)."""

from __future__ import annotations

import httpx
import pytest

from platforms import AuthFailure, Failed, NotReady, QuotaExceeded, RateLimited, Rejected, Transient
from platforms.meta import Instagram, RetryPolicy, Threads

TOKEN = "IGQVJ-secret-token-1234567890"


def meta_error(code=None, subcode=None, message="An error", status=400, **extra):
    """Meta's documented refusal: {"error": {message, type, code, error_subcode, fbtrace_id, ...}}."""
    error = {"message": message, "type": "OAuthException", "fbtrace_id": "AbCdEfGh123", **extra}
    if code is not None:
        error["code"] = code
    if subcode is not None:
        error["error_subcode"] = subcode
    return httpx.Response(status, json={"error": error})


CASES = [
    # (fixture name, response, expected class)
    ("code 1 API Unknown", meta_error(1, message="An unknown error has occurred.", status=500), Transient),
    ("code 2 API Service", meta_error(2, message="An unexpected error has occurred. Please retry your request later."), Transient),
    ("code -1 subcode 2207001 Instagram server error", meta_error(-1, 2207001, "Instagram server error. Try again."), Transient),
    ("code -2 subcode 2207003 download timeout", meta_error(-2, 2207003, "It takes too long to download the media."), Transient),
    ("code -1 subcode 2207032 create media fail", meta_error(-1, 2207032, "Create media fail, please try to re-create media"), Transient),
    ("HTTP 500 without a body", httpx.Response(500, text="<html>oops</html>"), Transient),
    ("HTTP 503 without a code", httpx.Response(503, json={"error": {"message": "Service unavailable"}}), Transient),
    ("is_transient true, unknown code", meta_error(12345, message="Something", is_transient=True), Transient),
    ("code 9007 subcode 2207027 media not ready", meta_error(9007, 2207027, "Media ID is not available"), NotReady),
    ("code 9007 without subcode", meta_error(9007, message="The media is not ready for publishing, please wait for a moment"), NotReady),
    ("Threads code 24 subcode 4279009 media not found", meta_error(24, 4279009, "Media Not Found"), NotReady),
    ("code 9 subcode 2207042 publishing limit", meta_error(9, 2207042, "You reached maximum number of posts"), QuotaExceeded),
    ("code 4 application request limit", meta_error(4, message="Application request limit reached"), RateLimited),
    ("code 17 user request limit", meta_error(17, message="User request limit reached"), RateLimited),
    ("code 32 page request limit", meta_error(32, message="Page request limit reached"), RateLimited),
    ("code 613 custom rate limit", meta_error(613, message="Calls to this api have exceeded the rate limit."), RateLimited),
    ("code 80001 BUC pages", meta_error(80001, message="There have been too many calls to this Page account."), RateLimited),
    ("code 80002 BUC instagram", meta_error(80002, message="There have been too many calls to this Instagram account."), RateLimited),
    ("code 80014 BUC", meta_error(80014, message="Too many calls"), RateLimited),
    ("HTTP 429 without a code", httpx.Response(429, json={"error": {"message": "Too many requests"}}), RateLimited),
    ("code 190 subcode 463 expired", meta_error(190, 463, "Error validating access token: Session has expired"), AuthFailure),
    ("code 190 subcode 460 password changed", meta_error(190, 460, "The session has been invalidated because the user changed their password"), AuthFailure),
    ("code 190 without subcode", meta_error(190, message="Invalid OAuth access token - Cannot parse access token"), AuthFailure),
    ("code 102 API session", meta_error(102, message="Session key invalid or no longer valid"), AuthFailure),
    ("subcode 2207050 inactive account", meta_error(400, 2207050, "The user is inactive"), AuthFailure),
    ("subcode 459 checkpointed", meta_error(190, 459, "The user must log in to clear a checkpoint"), AuthFailure),
    ("subcode 464 unconfirmed", meta_error(190, 464, "Sessions for the user are not allowed because the user is not a confirmed user."), AuthFailure),
    ("checkpoint message, other code", meta_error(368, message="checkpoint_required"), AuthFailure),
    ("checkpoint_url in the body", meta_error(100, message="Please verify your account", checkpoint_url="https://www.instagram.com/challenge/"), AuthFailure),
    ("code 36000 subcode 2207004 image too large", meta_error(36000, 2207004, "The image size is too large."), Rejected),
    ("code 36001 invalid image format", meta_error(36001, 2207005, "The image format is not supported."), Rejected),
    ("code 36003 aspect ratio", meta_error(36003, 2207009, "The submitted image with aspect ratio cannot be published."), Rejected),
    ("code 36004 caption too long", meta_error(36004, 2207010, "The caption was too long."), Rejected),
    ("subcode 2207026 unsupported media", meta_error(400, 2207026, "The video format is not supported."), Rejected),
    ("subcode 2207028 carousel validation", meta_error(400, 2207028, "Your post won't be shared as a carousel."), Rejected),
    ("code 4 subcode 2207051 spam", meta_error(4, 2207051, "We restrict certain activity to protect our community."), Rejected),
    ("subcode 2207052 media fetch failed", meta_error(400, 2207052, "The media could not be fetched from this uri"), Rejected),
    ("code -2 subcode 2207020 container expired", meta_error(-2, 2207020, "The media you are trying to access has expired."), Failed),
    ("code 100 invalid parameter", meta_error(100, 33, "Unsupported get request."), Failed),
    ("code 10 permission", meta_error(10, message="Application does not have permission for this action"), Failed),
    ("HTTP 404 without a body", httpx.Response(404, text="not found"), Failed),
    ("HTTP 200 that is not a JSON object", httpx.Response(200, text="[]"), Failed),
]


@pytest.mark.parametrize("name,response,expected", CASES, ids=[c[0] for c in CASES])
def test_every_known_code_maps_to_its_class(name, response, expected, http, recorder):
    recorder.serve(response)
    ig = Instagram(http, TOKEN, retry=RetryPolicy(attempts=1))
    with pytest.raises(expected) as caught:
        ig.permalink("17895695668004550")
    err = caught.value
    assert type(err) is expected, f"{name}: {type(err).__name__}"
    assert err.platform == "instagram" and err.http_status == response.status_code
    assert TOKEN not in err.reason and TOKEN not in repr(err)


def test_a_refusal_carries_every_detail_a_person_needs(http, recorder):
    recorder.serve(meta_error(9, 2207042, "You reached maximum number of posts that is allowed to be published by Content Publishing API.",
                              error_user_msg="The account reached its daily publishing limit."))
    th = Threads(http, TOKEN)
    with pytest.raises(QuotaExceeded) as caught:
        th.publish("1234", "9876")
    err = caught.value
    assert (err.platform, err.http_status, err.error_code, err.error_subcode, err.fbtrace_id) == ("threads", 400, 9, 2207042, "AbCdEfGh123")
    assert "maximum number of posts" in err.platform_message and "daily publishing limit" in err.platform_message
    assert err.reason.startswith('Threads publish (threads_publish): Threads answered "You reached maximum number of posts')
    assert "(HTTP 400, code 9, subcode 2207042, fbtrace_id AbCdEfGh123)" in err.reason
    assert err.reason.endswith(QuotaExceeded.advice)


def test_a_token_echoed_by_meta_never_reaches_the_reason(http, recorder):
    recorder.serve(meta_error(190, 467, f"Invalid access token {TOKEN} for this app"))
    with pytest.raises(AuthFailure) as caught:
        Instagram(http, TOKEN).verify()
    assert TOKEN not in caught.value.reason and TOKEN not in caught.value.platform_message
    assert "Invalid access token *** for this app" in caught.value.reason
