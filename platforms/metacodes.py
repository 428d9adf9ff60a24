"""What Meta's error codes mean for us: the one table that turns a Graph API refusal into a
platform error class (Instagram, Facebook and Threads share the code space).

A refusal looks like ``{"error": {"message", "type", "code", "error_subcode", "is_transient",
"error_user_title", "error_user_msg", "fbtrace_id"}}``. It is looked up in this order:

1. ``(code, subcode)`` in ``BY_CODE_AND_SUBCODE``  (a subcode that changes a code's meaning)
2. ``subcode`` in ``BY_SUBCODE``                   (Instagram's 22070xx subcodes, whatever the code)
3. ``code`` in ``BY_CODE``                         (any subcode not listed above)
4. a login checkpoint in the body                  -> AuthFailure
5. Meta's own ``is_transient: true``               -> Transient
6. the HTTP status: 429 -> RateLimited, 5xx -> Transient
7. anything else                                   -> Failed
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import AuthFailure, Failed, NotReady, PlatformError, QuotaExceeded, RateLimited, Rejected, Transient


@dataclass(frozen=True)
class Meaning:
    """One entry of the table: the class it maps to, and what Meta means by it."""

    kind: type[PlatformError]
    means: str
    blocked: str | None = None  # for rate limits: which limit


BY_CODE_AND_SUBCODE: dict[tuple[int, int], Meaning] = {
    # Meta: "We restrict certain activity to protect our community" (the publish looks like spam)
    (4, 2207051): Meaning(Rejected, "the publishing action is suspected to be spam"),
}

BY_SUBCODE: dict[int, Meaning] = {
    # -- transient: Meta says "try again" ------------------------------------------------------
    2207001: Meaning(Transient, "Instagram server error; try again"),
    2207003: Meaning(Transient, "downloading the media took too long; try again"),
    2207032: Meaning(Transient, "creating the media container failed; create it again"),
    2207053: Meaning(Transient, "unknown upload error (videos); create a new container"),
    # -- not ready ----------------------------------------------------------------------------
    2207027: Meaning(NotReady, "the media is not ready for publishing yet; wait"),
    4279009: Meaning(NotReady, "Threads: the media was not found (still being processed); wait"),
    # -- quota --------------------------------------------------------------------------------
    2207042: Meaning(QuotaExceeded, "the account reached its maximum number of API posts in 24 hours"),
    # -- auth: a person must act ----------------------------------------------------------------
    2207050: Meaning(AuthFailure, "the Instagram account is inactive, checkpointed or restricted; "
                                  "its owner must sign in to the Instagram app"),
    459: Meaning(AuthFailure, "the user is checkpointed: they must sign in on the website to clear it"),
    464: Meaning(AuthFailure, "the user is not confirmed: they must confirm their account first"),
    # -- content: retrying the same content will not help --------------------------------------------
    2207026: Meaning(Rejected, "the media type or format is not supported"),
    2207028: Meaning(Rejected, "the carousel is not valid (children, count or media)"),
    2207052: Meaning(Rejected, "the media could not be fetched from its URL"),
    # -- failed: not transient, though its code is ----------------------------------------------
    2207020: Meaning(Failed, "the container expired (24 hours); create a new one"),
}

BY_CODE: dict[int, Meaning] = {
    # -- transient --------------------------------------------------------------------------------
    1: Meaning(Transient, "API Unknown: possibly a temporary issue due to downtime"),
    2: Meaning(Transient, "API Service: temporary issue due to downtime"),
    -1: Meaning(Transient, "Instagram server error"),
    -2: Meaning(Transient, "Instagram timeout"),
    # -- not ready ----------------------------------------------------------------------------------
    9007: Meaning(NotReady, "the media ID is not available: the container is still being processed"),
    # -- quota ------------------------------------------------------------------------------------
    9: Meaning(QuotaExceeded, "the publishing limit is reached"),
    # -- rate limits ------------------------------------------------------------------------------
    4: Meaning(RateLimited, "application request limit reached", "app"),
    17: Meaning(RateLimited, "user request limit reached", "user"),
    32: Meaning(RateLimited, "page request limit reached", "page"),
    613: Meaning(RateLimited, "calls to this API exceeded its custom rate limit", "custom"),
    **{code: Meaning(RateLimited, "business use case rate limit reached", "business use case")
       for code in range(80001, 80015)},
    # -- auth ----------------------------------------------------------------------------------------
    190: Meaning(AuthFailure, "the access token expired, was revoked, or the password changed"),
    102: Meaning(AuthFailure, "API session: the session is invalid or expired"),
    # -- content: Instagram's media checks (size, format, aspect ratio, caption) -------------------------------
    **{code: Meaning(Rejected, "the image or caption fails Instagram's checks (size, format, ratio, length)")
       for code in range(36000, 36005)},
}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def is_checkpoint(error: Mapping[str, Any]) -> bool:
    """A login checkpoint: the owner must sign in to Meta's app or site before any token works."""
    if "checkpoint_url" in error:
        return True
    texts = (error.get("message"), error.get("error_user_title"), error.get("type"))
    return any(isinstance(t, str) and "checkpoint" in t.lower() for t in texts)


def meaning(http_status: int | None, error: Mapping[str, Any]) -> Meaning:
    """The table's answer for a refusal (``error`` is the body's ``error`` object, or ``{}``)."""
    code, subcode = _int(error.get("code")), _int(error.get("error_subcode"))
    if code is not None and subcode is not None and (code, subcode) in BY_CODE_AND_SUBCODE:
        return BY_CODE_AND_SUBCODE[(code, subcode)]
    if subcode is not None and subcode in BY_SUBCODE:
        return BY_SUBCODE[subcode]
    if code is not None and code in BY_CODE:
        return BY_CODE[code]
    if is_checkpoint(error):
        return Meaning(AuthFailure, "a login checkpoint: the owner must sign in to clear it")
    if error.get("is_transient") is True:
        return Meaning(Transient, "Meta marked the error as transient")
    if http_status == 429:
        return Meaning(RateLimited, "too many requests", None)
    if http_status is not None and http_status >= 500:
        return Meaning(Transient, "Meta's server failed")
    return Meaning(Failed, "not a known code")


def codes(error: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``(code, error_subcode)`` as integers, if present."""
    return _int(error.get("code")), _int(error.get("error_subcode"))
