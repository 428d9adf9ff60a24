"""The Meta Graph API transport that every Meta client shares (``platforms.meta``).

One ``httpx.Client`` (the transport seam: ``ctx.http``, or a ``MockTransport`` in a test), one
token, one host and API version. The token travels in the ``Authorization: Bearer`` header (or
a form body for the token exchange), never in a URL, and is scrubbed from every reason. Meta's
refusals are classified once, by ``platforms.metacodes``; transport failures by
``platforms.transport``. Reads are retried with tenacity on ``Transient`` errors (not on
``RateLimited``: retrying a throttled call within seconds only makes it worse), with
exponential waits and an injectable ``sleep``. **A call that creates something remote is never
retried**: its failure is raised as is, and the caller treats a ``Transient`` one as ambiguous.
``usage`` holds the rate-limit usage headers of the last answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from . import metacodes
from .errors import PLATFORM_NAMES, Answer, Failed, PlatformError, RateLimited, Transient
from .transport import transport_error
from .usage import Usage

log = logging.getLogger(__name__)

INSTAGRAM_LOGIN = "https://graph.instagram.com"
FACEBOOK_LOGIN = "https://graph.facebook.com"
THREADS = "https://graph.threads.net"
MAX_MESSAGE = 300  # characters of Meta's message kept in a reason


@dataclass(frozen=True)
class RetryPolicy:
    """How reads are retried on transient errors. ``sleep`` is injectable so tests never sleep."""

    attempts: int = 3  # in all, the first call included
    wait: float = 0.5  # seconds before the first retry, doubled each time
    max_wait: float = 30.0
    sleep: Callable[[float], None] = time.sleep


def _system_ms() -> int:
    return int(time.time() * 1000)


def json_object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def json_str(value: Any) -> str | None:
    """``value`` as a string if it is one (or an integer id), else ``None``."""
    return value if isinstance(value, str) else (str(value) if isinstance(value, int) and not isinstance(value, bool) else None)


class MetaGraph:
    """The Graph API transport for one token on one host (see the module docstring).

    ``version`` is the API version the paths start with ("v21.0"; "" for none), ``now_ms``
    (epoch ms) dates a rate limit's reset, ``timeout`` (seconds) replaces the client's per request.
    """

    platform: ClassVar[str] = "facebook"  # the clients set theirs
    default_base_url: ClassVar[str] = FACEBOOK_LOGIN

    def __init__(self, http: httpx.Client, token: str, *, base_url: str | None = None, version: str = "",
                 retry: RetryPolicy | None = None, now_ms: Callable[[], int] = _system_ms,
                 timeout: float | None = None) -> None:
        self._http = http
        self._token = token
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.version = version.strip("/")
        self.retry = retry or RetryPolicy()
        self._now_ms = now_ms  # epoch ms (ctx.now in a tick): for a rate limit's reset time
        self._timeout = timeout
        self.usage = Usage()  # the last answer's usage headers

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.base_url}{'/' + self.version if self.version else ''}>"

    @property
    def name(self) -> str:
        """The platform's name for people ("Instagram")."""
        return PLATFORM_NAMES[self.platform]

    def _url(self, path: str) -> str:
        return f"{self.base_url}/{self.version + '/' if self.version else ''}{path.lstrip('/')}"

    # ---- the one seam ---------------------------------------------------------------------
    def get(self, path: str, params: Mapping[str, str] | None = None, *, what: str) -> dict[str, Any]:
        """``GET`` a path (retried on transient errors); the answer's JSON object."""
        return self._call("GET", path, what, params=dict(params or {}), creates=False)

    def post(self, path: str, form: Mapping[str, str] | None = None, *, what: str, creates: bool,
             auth: bool = True, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        """``POST`` a form. ``creates=True`` (the call makes something remote): never retried.
        ``auth=False``: no ``Authorization`` header (the form carries the credentials, listed in
        ``secrets`` so that no reason shows them)."""
        return self._call("POST", path, what, data=dict(form or {}), creates=creates, auth=auth, secrets=secrets)

    def _call(self, method: str, path: str, what: str, *, creates: bool, auth: bool = True,
              params: dict[str, str] | None = None, data: dict[str, str] | None = None,
              secrets: tuple[str, ...] = ()) -> dict[str, Any]:
        what = f"{self.name} {what}"
        retrying = Retrying(
            retry=retry_if_exception(lambda e: isinstance(e, Transient) and not isinstance(e, RateLimited)),
            stop=stop_after_attempt(1 if creates else max(self.retry.attempts, 1)),
            wait=wait_exponential(multiplier=self.retry.wait, max=self.retry.max_wait),
            sleep=self.retry.sleep, reraise=True,
        )
        for attempt in retrying:
            with attempt:
                return self._once(method, path, what, auth=auth, params=params, data=data, secrets=(self._token, *secrets))
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, method: str, path: str, what: str, *, auth: bool, params: dict[str, str] | None,
              data: dict[str, str] | None, secrets: tuple[str, ...]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._token}"} if auth else {}
        extra: dict[str, Any] = {} if self._timeout is None else {"timeout": self._timeout}
        try:
            response = self._http.request(method, self._url(path), params=params or None, data=data or None,
                                          headers=headers, **extra)
        except httpx.TransportError as exc:
            raise transport_error(exc, what, self.platform) from exc
        self.usage = Usage.from_headers(response.headers)
        log.debug("%s %s %s -> %s", self.platform, method, path, response.status_code,
                  extra={"platform": self.platform, "status": response.status_code})
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code < 400 and isinstance(body, dict) and "error" not in body:
            return body
        raise self._refusal(response, body, what, secrets)

    def _refusal(self, response: httpx.Response, body: Any, what: str, secrets: tuple[str, ...]) -> PlatformError:
        """The platform error for a refusal (or an answer that is not a JSON object)."""
        status = response.status_code
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            if status < 400:
                return Failed(f"{what}: {self.name} answered HTTP {status} with something that is not a JSON object; "
                              f"{Failed.advice}", Answer(self.platform, http_status=status))
            error = {}
        code, subcode = metacodes.codes(error)
        message = str(error.get("message") or "")
        user_msg = error.get("error_user_msg")
        if isinstance(user_msg, str) and user_msg and user_msg not in message:
            message = f"{message} ({user_msg})" if message else user_msg
        answer = Answer(self.platform, http_status=status, error_code=code, error_subcode=subcode,
                        fbtrace_id=json_str(error.get("fbtrace_id")), message=message[:MAX_MESSAGE])
        found = metacodes.meaning(status, error)
        reason = found.kind.describe(what, answer)
        if found.kind is RateLimited:
            minutes = self.usage.regain_access_minutes
            reset_at = self._now_ms() + int(minutes * 60_000) if minutes is not None else None
            return RateLimited(reason, answer, reset_at=reset_at, blocked=found.blocked or self.usage.blocked,
                               secrets=secrets)
        return found.kind(reason, answer, secrets=secrets)
