"""Language-model APIs behind one interface: an OpenAI-compatible Chat Completions endpoint
(OpenAI, and local servers such as llama.cpp, vLLM or Ollama) and Anthropic's Messages API.

    provider    request                             the key travels in
    openai      POST {base_url}/chat/completions    Authorization: Bearer KEY
    anthropic   POST {base_url}/v1/messages         x-api-key: KEY   (anthropic-version: 2023-06-01)

``complete(system, turns, max_tokens=, deadline=)`` sends one conversation, with no tools (the
model can only write text), and returns a ``Reply``: the text, why it stopped (``end``,
``length``, ``refusal``, ``filter``, ``too-large``, ``time``) and the tokens in and out (the
API's own count, or four characters a token when a server reports none). A streaming answer
(server-sent events) is read as it comes, and so is a whole one, so that either stops at
``max_bytes`` and at ``deadline``.

``deadline`` is a ``clock()`` value (``time.monotonic`` by default) by which the whole call,
its retries included, must be done. Retried with tenacity, after exponential waits or the
server's ``Retry-After``, while the next try can still start before the deadline: 429, 5xx,
Anthropic's 529 (overloaded) and its ``overloaded_error`` event, a broken or stalled
connection. Never retried: a refused key (``AuthFailure``), an account without quota, a
request the server calls bad (``Failed``).

The key is sent only in its header and scrubbed from every reason; the reason for a refused
key never quotes the server, since some echo part of the key back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential

from .errors import Answer, AuthFailure, Failed, PlatformError, RateLimited, Transient
from .graph import RetryPolicy, json_object
from .sse import EventStream
from .transport import transport_error

log = logging.getLogger(__name__)

OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
CHARS_PER_TOKEN = 4  # the usual rule of thumb, for servers that count nothing
MAX_ERROR_BODY = 64 * 1024
MAX_MESSAGE = 300
RETRY = RetryPolicy(attempts=6, wait=1.0, max_wait=20.0)
TRANSIENT_STATUSES = {408, 409, 425, 500, 502, 503, 504, 529}


@dataclass(frozen=True)
class Turn:
    """One turn of the conversation: ``role`` is "user" or "assistant"."""

    role: str
    text: str


@dataclass
class Reply:
    """What the model answered. ``stop``: "end" (it finished), "length" (cut at max_tokens),
    "refusal" (``refusal`` says why), "filter" (the provider's content filter), "too-large"
    (past ``max_bytes``: reading stopped), "time" (the deadline came first)."""

    text: str
    stop: str
    refusal: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    estimated: bool = False  # the server reported no usage: the tokens are estimated


class _OutOfTime(Exception):
    """The deadline passed while an answer was being read."""


def _system_ms() -> int:
    return int(time.time() * 1000)


def _estimate(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL: what a reason may name of it (never a user:password part)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}"


class ChatModel:
    """A chat API for one model and one key (see the module docstring). ``http`` is the process's client,
    ``stream`` asks for server-sent events, ``max_bytes`` bounds what is read of one answer."""

    platform: ClassVar[str] = ""
    label: ClassVar[str] = ""
    default_base_url: ClassVar[str] = ""

    def __init__(self, http: httpx.Client, key: str, *, model: str, base_url: str = "", stream: bool = True,
                 max_bytes: int = 2_000_000, retry: RetryPolicy | None = None,
                 clock: Callable[[], float] = time.monotonic, now_ms: Callable[[], int] = _system_ms) -> None:
        self._http = http
        self._key = key
        self.model = model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.stream = stream
        self.max_bytes = max_bytes
        self.retry = retry or RETRY
        self.clock = clock
        self._now_ms = now_ms

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {_origin(self.base_url)} {self.model}>"

    @property
    def where(self) -> str:
        """The endpoint as a reason names it."""
        return f"{self.label} at {_origin(self.base_url)}"

    # ---- the one call ------------------------------------------------------------------------
    def complete(self, system: str, turns: Sequence[Turn], *, max_tokens: int, deadline: float) -> Reply:
        """The model's answer to ``turns`` under ``system`` (see the module docstring). Raises a
        ``PlatformError`` when no answer came: ``AuthFailure``, ``RateLimited`` or ``Transient`` still
        failing at the deadline, ``Failed``."""

        def stop(state: RetryCallState) -> bool:
            out_of_tries = state.attempt_number >= self.retry.attempts
            return out_of_tries or self.clock() + state.upcoming_sleep >= deadline

        backoff = wait_exponential(multiplier=self.retry.wait, max=self.retry.max_wait)

        def wait(state: RetryCallState) -> float:
            seconds = float(backoff(state))
            exc = state.outcome.exception() if state.outcome is not None else None
            if isinstance(exc, RateLimited) and exc.reset_at is not None:
                seconds = max(seconds, (exc.reset_at - self._now_ms()) / 1000)
            return seconds

        retrying = Retrying(retry=retry_if_exception_type(Transient), stop=stop, wait=wait, sleep=self.retry.sleep, reraise=True)
        for attempt in retrying:
            with attempt:
                return self._once(system, list(turns), max_tokens, deadline)
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, system: str, turns: list[Turn], max_tokens: int, deadline: float) -> Reply:
        what = f"asking {self.where} ({self.model})"
        remaining = deadline - self.clock()
        if remaining <= 0:
            return Reply("", "time", tokens_in=0, tokens_out=0)
        url, headers, body = self._request(system, turns, max_tokens)
        timeout = httpx.Timeout(remaining, connect=min(remaining, 15.0))
        prompt_chars = len(system) + sum(len(t.text) for t in turns)
        try:
            with self._http.stream("POST", url, json=body, headers=headers, timeout=timeout) as response:
                log.debug("%s POST %s -> %s", self.platform, urlsplit(url).path, response.status_code,
                          extra={"platform": self.platform, "status": response.status_code})
                if response.status_code >= 400:
                    raise self._refusal(response, self._error_body(response, deadline), what)
                if "text/event-stream" in response.headers.get("content-type", ""):
                    reply = self._events(response, deadline, what)
                else:
                    reply = self._whole(response, deadline, what)
        except httpx.TransportError as exc:
            raise transport_error(exc, what, self.platform) from exc
        if not reply.tokens_in and not reply.tokens_out:  # a server that counts nothing: estimate
            reply.tokens_in, reply.tokens_out, reply.estimated = _estimate(prompt_chars), _estimate(len(reply.text)), True
        elif reply.stop in ("time", "too-large") and reply.tokens_out < _estimate(len(reply.text)):
            # cut short: the final count never came, and what arrived was paid for
            reply.tokens_in = reply.tokens_in or _estimate(prompt_chars)
            reply.tokens_out, reply.estimated = _estimate(len(reply.text)), True
        return reply

    def _read(self, response: httpx.Response, deadline: float, limit: int, *, partial: bool = False) -> Iterator[bytes]:
        """The answer's bytes as they arrive; raises ``_OutOfTime`` past the deadline. Past ``limit`` bytes it
        stops (``partial``) or raises ``OverflowError``."""
        seen = 0
        for chunk in response.iter_bytes():
            seen += len(chunk)
            if seen > limit:
                if partial:
                    yield chunk[: max(0, limit - (seen - len(chunk)))]
                    return
                raise OverflowError(seen)
            yield chunk
            if self.clock() >= deadline:
                raise _OutOfTime

    def _error_body(self, response: httpx.Response, deadline: float) -> bytes:
        parts: list[bytes] = []
        try:
            parts.extend(self._read(response, deadline, MAX_ERROR_BODY, partial=True))
        except _OutOfTime:
            pass  # what came in time is enough to say why
        return b"".join(parts)

    def _whole(self, response: httpx.Response, deadline: float, what: str) -> Reply:
        parts: list[bytes] = []
        try:
            for chunk in self._read(response, deadline, self.max_bytes):
                parts.append(chunk)
        except OverflowError:
            return Reply("", "too-large")
        except _OutOfTime:
            return Reply("", "time")
        try:
            body = json.loads(b"".join(parts))
        except ValueError:
            raise Failed(f"{what}: the answer is not JSON (HTTP {response.status_code}); check codegen.base_url",
                         Answer(self.platform, http_status=response.status_code)) from None
        return self._parse(json_object(body), what)

    def _events(self, response: httpx.Response, deadline: float, what: str) -> Reply:
        events = EventStream()
        state = _Streamed()
        try:
            for chunk in self._read(response, deadline, self.max_bytes * 2):  # events carry JSON around the text
                for event in events.feed(chunk):
                    if self._event(event.event, event.data, state, what):
                        return state.reply()
                if len(state.text) > self.max_bytes:
                    return state.reply("too-large")
            for event in events.close():
                if self._event(event.event, event.data, state, what):
                    break
        except OverflowError:
            return state.reply("too-large")
        except _OutOfTime:
            return state.reply("time")
        return state.reply()

    # ---- what each API says ------------------------------------------------------------------
    def _request(self, system: str, turns: list[Turn], max_tokens: int) -> tuple[str, dict[str, str], dict[str, Any]]:
        raise NotImplementedError

    def _parse(self, body: dict[str, Any], what: str) -> Reply:
        raise NotImplementedError

    def _event(self, name: str, data: str, state: _Streamed, what: str) -> bool:
        """Take in one event; True when the answer is complete."""
        raise NotImplementedError

    def _error_fields(self, body: dict[str, Any]) -> tuple[str, str]:
        """(type or code, message) of an error body."""
        error = json_object(body.get("error"))
        kind = error.get("type") or error.get("code") or ""
        return str(kind), str(error.get("message") or "")

    def _refusal(self, response: httpx.Response, raw: bytes, what: str) -> PlatformError:
        """The error for an HTTP status of 400 or more."""
        status = response.status_code
        try:
            body = json_object(json.loads(raw))
        except ValueError:
            body = {}
        kind, message = self._error_fields(body)
        if status in (401, 403):  # the server's own words may quote the key: none of them
            return AuthFailure(f"{what}: the API key was refused (HTTP {status}{f', {kind}' if kind else ''})",
                               Answer(self.platform, http_status=status, error_code=kind or None), secrets=[self._key])
        return self.error(status, kind, message, what, retry_after=_retry_after(response.headers))

    def error(self, status: int | None, kind: str, message: str, what: str, *, retry_after: float | None = None) -> PlatformError:
        """The error for a refusal: an HTTP status (None for an error event in a stream), its type and message."""
        said = message[:MAX_MESSAGE]
        answer = Answer(self.platform, http_status=status, error_code=kind or None, message=said)
        head = f"{what}: HTTP {status}" if status is not None else f"{what}: an error in the stream"
        detail = f" ({kind}{': ' + said if said else ''})" if kind or said else ""
        secrets = [self._key]
        if kind == "insufficient_quota":
            return Failed(f"{head}{detail}: the account has no quota left; add credit or lower codegen.daily_token_budget",
                          answer, secrets=secrets)
        if status == 429 or kind in ("rate_limit_error", "rate_limit_exceeded"):
            reset = self._now_ms() + int(retry_after * 1000) if retry_after is not None else None
            return RateLimited(f"{head}{detail}: rate-limited", answer, reset_at=reset, secrets=secrets)
        if (status in TRANSIENT_STATUSES or (status is not None and status >= 500)
                or kind in ("overloaded_error", "api_error", "server_error", "timeout_error")):
            return Transient(f"{head}{detail}: the service is overloaded or failing", answer, secrets=secrets)
        if status == 404:
            return Failed(f"{head}{detail}: no such endpoint or model; check codegen.base_url and codegen.model ({self.model!r})",
                          answer, secrets=secrets)
        return Failed(f"{head}{detail}", answer, secrets=secrets)


@dataclass
class _Streamed:
    """What a stream has said so far."""

    text: str = ""
    refusal: str = ""
    finish: str = ""
    tokens_in: int = 0
    tokens_out: int = 0

    def reply(self, stop: str | None = None) -> Reply:
        if stop is None:
            stop = "refusal" if self.refusal else (self.finish or "end")
        return Reply(self.text, stop, self.refusal, self.tokens_in, self.tokens_out)


def _retry_after(headers: httpx.Headers) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) * scale)
            except ValueError:
                continue  # an HTTP date: fall back to the exponential wait
    return None


OPENAI_STOPS = {"stop": "end", "length": "length", "content_filter": "filter", "tool_calls": "end", "function_call": "end"}
ANTHROPIC_STOPS = {"end_turn": "end", "stop_sequence": "end", "max_tokens": "length", "refusal": "refusal", "pause_turn": "end"}


def _text(content: Any) -> str:
    """A message's content: a string, or a list of parts whose text is joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return ""


class OpenAIChat(ChatModel):
    """Chat Completions: OpenAI, or any server that speaks it (``POST {base_url}/chat/completions``)."""

    platform = "openai"
    label = "the OpenAI-compatible endpoint"
    default_base_url = OPENAI_URL

    def _request(self, system: str, turns: list[Turn], max_tokens: int) -> tuple[str, dict[str, str], dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model, "max_tokens": max_tokens, "stream": self.stream,
            "messages": [{"role": "system", "content": system}, *({"role": t.role, "content": t.text} for t in turns)],
        }
        if self.stream:
            body["stream_options"] = {"include_usage": True}  # the token count arrives in the last event
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        return f"{self.base_url}/chat/completions", headers, body

    def _parse(self, body: dict[str, Any], what: str) -> Reply:
        if "error" in body:
            kind, said = self._error_fields(body)
            raise self.error(None, kind, said, what)
        choices = body.get("choices")
        choice = json_object(choices[0]) if isinstance(choices, list) and choices else {}
        message = json_object(choice.get("message"))
        usage = json_object(body.get("usage"))
        refusal = str(message.get("refusal") or "")
        stop = "refusal" if refusal else OPENAI_STOPS.get(str(choice.get("finish_reason") or "stop"), "end")
        return Reply(_text(message.get("content")), stop, refusal, _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))

    def _event(self, name: str, data: str, state: _Streamed, what: str) -> bool:
        if data.strip() == "[DONE]":
            return True
        try:
            obj = json_object(json.loads(data))
        except ValueError:
            return False  # not JSON: a server's stray line
        if "error" in obj:
            kind, message = self._error_fields(obj)
            raise self.error(None, kind, message, what)
        for choice in obj.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = json_object(choice.get("delta"))
            state.text += _text(delta.get("content"))
            state.refusal += str(delta.get("refusal") or "")
            if choice.get("finish_reason"):
                state.finish = OPENAI_STOPS.get(str(choice["finish_reason"]), "end")
        usage = json_object(obj.get("usage"))
        if usage:
            state.tokens_in, state.tokens_out = _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens"))
        return False


class AnthropicChat(ChatModel):
    """Anthropic's Messages API (``POST {base_url}/v1/messages``)."""

    platform = "anthropic"
    label = "the Anthropic API"
    default_base_url = ANTHROPIC_URL

    def _request(self, system: str, turns: list[Turn], max_tokens: int) -> tuple[str, dict[str, str], dict[str, Any]]:
        body = {"model": self.model, "max_tokens": max_tokens, "stream": self.stream, "system": system,
                "messages": [{"role": t.role, "content": t.text} for t in turns]}
        headers = {"x-api-key": self._key, "anthropic-version": ANTHROPIC_VERSION}
        return f"{self.base_url}/v1/messages", headers, body

    def _parse(self, body: dict[str, Any], what: str) -> Reply:
        if body.get("type") == "error":
            kind, message = self._error_fields(body)
            raise self.error(None, kind, message, what)
        usage = json_object(body.get("usage"))
        text = _text(body.get("content"))
        stop = ANTHROPIC_STOPS.get(str(body.get("stop_reason") or "end_turn"), "end")
        return Reply(text, stop, text if stop == "refusal" else "", _input_tokens(usage), _int(usage.get("output_tokens")))

    def _event(self, name: str, data: str, state: _Streamed, what: str) -> bool:
        try:
            obj = json_object(json.loads(data))
        except ValueError:
            return False
        kind = obj.get("type") or name
        if kind == "error":
            error_kind, message = self._error_fields(obj)
            raise self.error(None, error_kind, message, what)
        if kind == "message_start":
            usage = json_object(json_object(obj.get("message")).get("usage"))
            state.tokens_in, state.tokens_out = _input_tokens(usage), _int(usage.get("output_tokens"))
        elif kind == "content_block_delta":
            delta = json_object(obj.get("delta"))
            if delta.get("type") == "text_delta":
                state.text += str(delta.get("text") or "")
        elif kind == "message_delta":
            delta, usage = json_object(obj.get("delta")), json_object(obj.get("usage"))
            if delta.get("stop_reason"):
                state.finish = ANTHROPIC_STOPS.get(str(delta["stop_reason"]), "end")
                if state.finish == "refusal":
                    state.refusal = state.text or "the model declined"
            if usage.get("output_tokens") is not None:
                state.tokens_out = _int(usage.get("output_tokens"))  # cumulative
            if usage.get("input_tokens") is not None:
                state.tokens_in = max(state.tokens_in, _input_tokens(usage))
        elif kind == "message_stop":
            return True
        return False


def _input_tokens(usage: dict[str, Any]) -> int:
    """Anthropic counts cached input apart: all of it was sent."""
    return _int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens")) + _int(usage.get("cache_read_input_tokens"))


PROVIDERS: dict[str, type[ChatModel]] = {"openai": OpenAIChat, "anthropic": AnthropicChat}


def chat_model(provider: str, http: httpx.Client, key: str, *, model: str, base_url: str = "", stream: bool = True,
               max_bytes: int = 2_000_000, retry: RetryPolicy | None = None,
               clock: Callable[[], float] = time.monotonic) -> ChatModel:
    """The client for ``provider`` ("openai" or "anthropic")."""
    try:
        kind = PROVIDERS[provider]
    except KeyError:
        raise ValueError(f"no chat provider {provider!r}: one of {', '.join(PROVIDERS)}") from None
    return kind(http, key, model=model, base_url=base_url, stream=stream, max_bytes=max_bytes, retry=retry, clock=clock)


__all__ = ["ANTHROPIC_URL", "OPENAI_URL", "PROVIDERS", "AnthropicChat", "ChatModel", "OpenAIChat", "Reply", "Turn", "chat_model"]
