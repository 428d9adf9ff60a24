"""The platform errors join the ledger's one tree: a stable code, an HTTP status and an exit
code per class, attributes that survive a trip through the hub's API, no secret in a reason."""

from __future__ import annotations

import inspect

import pytest

import platforms.errors as errors_module
from ledger.errors import EXIT_ERROR, LedgerError, error_class, error_classes
from platforms import AuthFailure, NetworkError, PlatformError, RateLimited, Transient, scrub
from platforms.errors import Answer

PLATFORM_CLASSES = [cls for _, cls in inspect.getmembers(errors_module, inspect.isclass)
                    if issubclass(cls, PlatformError)]


def test_the_tree_is_drawn_and_every_class_is_in_it():
    assert {c.__name__ for c in PLATFORM_CLASSES} == {
        "PlatformError", "AuthFailure", "Transient", "NetworkError", "RateLimited", "NotReady", "QuotaExceeded", "Rejected", "Failed",
        "FetchRefused"}
    for cls in PLATFORM_CLASSES:
        assert cls.__name__ in errors_module.__doc__
        assert cls.__doc__ and "\n" not in cls.__doc__.strip(), cls  # one line
        assert issubclass(cls, LedgerError) and cls in error_classes()
        assert error_class(cls.code) is cls, f"{cls.__name__}.code {cls.code!r} is not its own"
        assert cls.code.startswith("platform") and 400 <= cls.status < 600 and cls.exit_code == EXIT_ERROR
        assert cls.advice.strip()  # every reason ends with what to do
    codes = [c.code for c in error_classes()]
    assert len(codes) == len(set(codes)), "two classes share a code"
    assert issubclass(NetworkError, Transient) and issubclass(RateLimited, Transient)


@pytest.mark.parametrize("cls", PLATFORM_CLASSES)
def test_an_error_rebuilt_from_code_and_reason_still_answers_its_attributes(cls):
    # hub.remote rebuilds an error from the API's {"error": code, "reason": ...} this way
    error = cls.__new__(cls)
    LedgerError.__init__(error, "some reason")
    assert (error.platform, error.http_status, error.error_code, error.error_subcode, error.fbtrace_id, error.platform_message) == (
        "", None, None, None, None, "")
    if cls is RateLimited:
        assert (error.reset_at, error.blocked) == (None, None)
    if cls is NetworkError:
        assert error.host == ""


def test_the_reason_names_what_was_done_what_the_platform_said_and_what_to_do():
    answer = Answer("instagram", http_status=400, error_code=190, error_subcode=463, fbtrace_id="AbC", message="Session has expired")
    reason = AuthFailure.describe("Instagram verify the token (/me)", answer)
    assert reason == ('Instagram verify the token (/me): Instagram answered "Session has expired" '
                      f"(HTTP 400, code 190, subcode 463, fbtrace_id AbC); {AuthFailure.advice}")
    assert Transient.describe("Bluesky getPosts", Answer("bluesky")) == f"Bluesky getPosts: Bluesky answered; {Transient.advice}"


def test_secrets_are_scrubbed_from_reason_message_and_repr():
    secret = "hunter2-app-password"
    err = AuthFailure(f"login with {secret} refused", Answer("bluesky", message=f"bad password {secret}"), secrets=[secret, None, "ab"])
    assert secret not in err.reason and secret not in err.platform_message and secret not in repr(err) and secret not in str(err)
    assert err.reason == "login with *** refused"


def test_scrub_replaces_longer_secrets_first_and_ignores_short_ones():
    assert scrub("token abcdef and abcdefgh", ["abcdef", "abcdefgh", "ab", ""]) == "token *** and ***"
