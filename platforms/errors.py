"""What a call to an outside platform can end in, as one tree under the ledger's root.

    LedgerError                                                  (ledger.errors)
    └── PlatformError     root: a platform call failed                             502, exit 1
        ├── AuthFailure   the platform refused the credential: paste a new one     502, exit 1
        ├── Transient     worth trying again later: timeout, 5xx, broken transport 503, exit 1
        │   ├── NetworkError   the host could not be reached at all (names it)     503, exit 1
        │   └── RateLimited    the platform throttles us until ``reset_at``        429, exit 1
        ├── NotReady      a container is still being processed: ask again later    503, exit 1
        ├── QuotaExceeded the account's publishing limit is used up for now        429, exit 1
        ├── Rejected      the platform refused the content; retrying will not help 422, exit 1
        ├── FetchRefused  the guarded fetcher will not fetch a URL (not public, too 422, exit 1
        │                 large, too many redirects): give another
        └── Failed        any other refusal                                        502, exit 1

The HTTP status is what the hub's API answers when such an error surfaces through it: the
platform (a gateway, seen from the API's caller) failed, so 5xx, except where a more precise
status tells the caller what to do (429: wait; 422: change the content).

Every error carries what the platform said, so a person can look it up and Meta's support can
find the request: ``platform`` ("bluesky", "instagram", "threads", "facebook"),
``http_status``, the platform's ``error_code`` and ``error_subcode`` (Meta; Bluesky's XRPC
error name is the ``error_code``), ``fbtrace_id`` (Meta) and ``platform_message``. The
``reason`` is one sentence a social media manager can act on: what was being done, what the
platform said with its codes, and what to do about it.

Secrets never reach a reason: the adapters pass every token, password and app secret of a call
as ``secrets=``, and they are replaced by ``***`` in the reason and the platform's message.
The attributes have class-level defaults, so an error rebuilt from its code and reason alone
(``hub.remote``) still answers them (with ``None``/"").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from ledger.errors import LedgerError

PLATFORM_NAMES = {"bluesky": "Bluesky", "instagram": "Instagram", "threads": "Threads", "facebook": "Facebook"}
MIN_SECRET = 4  # shorter strings are not secrets worth scrubbing, and would mangle every message


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret (at least four characters long) replaced by ``***``."""
    for secret in sorted((s for s in secrets if s and len(s) >= MIN_SECRET), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


@dataclass(frozen=True)
class Answer:
    """What a platform said when it refused a call (every field optional but the platform)."""

    platform: str
    http_status: int | None = None
    error_code: int | str | None = None  # Meta's ``code``; Bluesky's XRPC error name
    error_subcode: int | None = None  # Meta's ``error_subcode``
    fbtrace_id: str | None = None  # Meta's request id, for its support
    message: str = ""  # the platform's own message

    def details(self) -> str:
        """``HTTP 400, code 190, subcode 463, fbtrace_id Abc`` (the parts that are known)."""
        parts = [f"HTTP {self.http_status}" if self.http_status is not None else "",
                 f"code {self.error_code}" if self.error_code is not None else "",
                 f"subcode {self.error_subcode}" if self.error_subcode is not None else "",
                 f"fbtrace_id {self.fbtrace_id}" if self.fbtrace_id else ""]
        return ", ".join(p for p in parts if p)


class PlatformError(LedgerError):
    """Root of every error a platform adapter raises."""

    code = "platform"
    status = 502
    advice: ClassVar[str] = "see the platform's message"  # what a person should do; ends the reason

    platform: str = ""
    http_status: int | None = None
    error_code: int | str | None = None
    error_subcode: int | None = None
    fbtrace_id: str | None = None
    platform_message: str = ""

    def __init__(self, reason: str, answer: Answer | None = None, *, secrets: Iterable[str | None] = ()) -> None:
        secrets = tuple(secrets)
        super().__init__(scrub(reason, secrets))
        if answer is not None:
            self.platform = answer.platform
            self.http_status = answer.http_status
            self.error_code = answer.error_code
            self.error_subcode = answer.error_subcode
            self.fbtrace_id = answer.fbtrace_id
            self.platform_message = scrub(answer.message, secrets)

    @classmethod
    def describe(cls, what: str, answer: Answer) -> str:
        """The reason: ``<what>: <Platform> answered "<message>" (<details>); <advice>``."""
        name = PLATFORM_NAMES.get(answer.platform, answer.platform or "the platform")
        said = f'{name} answered "{answer.message}"' if answer.message else f"{name} answered"
        details = answer.details()
        return f"{what}: {said}{f' ({details})' if details else ''}; {cls.advice}"


class AuthFailure(PlatformError):
    """The platform refused the credential itself: a person must paste a new one."""

    code = "platform_auth"
    advice = "the credential was refused: paste a new one for this account (the console shows NEEDS RE-AUTH)"


class Transient(PlatformError):
    """Worth trying again later: a timeout, a 5xx, a broken connection, a platform hiccup."""

    code = "platform_unavailable"
    status = 503
    advice = "this is usually temporary: it is tried again later"


class NetworkError(Transient):
    """The platform's host could not be reached at all (refused, unresolvable, connect timeout)."""

    code = "platform_unreachable"
    advice = "check this machine's network, proxy and firewall; it is tried again later"
    host: str = ""

    def __init__(self, reason: str, answer: Answer | None = None, *, host: str = "", secrets: Iterable[str | None] = ()) -> None:
        super().__init__(reason, answer, secrets=secrets)
        self.host = host


class RateLimited(Transient):
    """The platform throttles us; wait until ``reset_at`` (epoch ms) when it is known."""

    code = "platform_rate_limited"
    status = 429
    advice = "the platform's rate limit was reached: wait until it resets, nothing is lost"
    reset_at: int | None = None
    blocked: str | None = None

    def __init__(self, reason: str, answer: Answer | None = None, *, reset_at: int | None = None,
                 blocked: str | None = None, secrets: Iterable[str | None] = ()) -> None:
        super().__init__(reason, answer, secrets=secrets)
        self.reset_at = reset_at
        self.blocked = blocked  # which limit: "app", "user", "page", "business use case", a policy, ...


class NotReady(PlatformError):
    """A media container is still being processed: ask again on a later tick (not an attempt)."""

    code = "platform_not_ready"
    status = 503
    advice = "the media is still being processed: it is tried again on a later tick"


class QuotaExceeded(PlatformError):
    """The account's publishing limit (posts per 24 hours) is used up for now."""

    code = "platform_quota"
    status = 429
    advice = "the account's publishing limit is reached: it is published once the 24-hour window frees a slot"


class Rejected(PlatformError):
    """The platform refused the content (size, format, text, spam filter); retrying will not help."""

    code = "platform_rejected"
    status = 422
    advice = "the platform refused this content: change it (image, caption, text) and queue it again"


class FetchRefused(PlatformError):
    """The guarded fetcher will not fetch this URL (scheme, address, size, redirects): retrying will not help."""

    code = "platform_fetch_refused"
    status = 422
    advice = "give a public https URL"


class Failed(PlatformError):
    """A refusal that is neither an auth failure, a transient error nor a content problem."""

    code = "platform_failed"
    advice = "this is not retried: check the platform's message and the account's settings"
