"""A stand-in for the two language-model APIs the builder speaks, on a real local HTTP server:
OpenAI's Chat Completions (``POST .../chat/completions``, as OpenAI and every compatible server
answer it) and Anthropic's Messages API (``POST /v1/messages``), each streaming (server-sent
events, in the documented event shapes) or not, with the usage counts both report.

It plays a **naive model**: it does what the request says. Asked for the plan (a conversation
with no assistant turn yet) it answers ``TITLE: ...`` and a few features; asked for the page,
it writes a small working app titled from the request, except that a request naming a CDN or
a URL gets external references, one asking for live data gets a ``fetch``, and one asking for
the instructions gets the system prompt pasted in (a prompt leak). Told what was wrong (a
repair turn), it writes the good page. ``answers`` overrides that, page by page.

Faults are served first, one per request, in order (``faults``): ``"429"``, ``"500"``,
``"502"``, ``"503"``, ``"overloaded"`` (Anthropic's 529, an overloaded 503 from the other),
``"overloaded-stream"`` (an error event in the middle of a stream), ``"quota"`` (429
insufficient_quota), ``"slow"`` (the answer trickles in, ``slow_delay`` seconds a piece),
``"stall"`` (nothing at all until the server stops). A wrong key is answered 401 with the key
echoed back in the message, as some servers do.

    model = FakeModel(key="sk-test")
    server = model.serve()          # .url; OpenAI base URL: server.url + "/v1"
    model.answers = ["external"]    # the next page has a <script src=https://...>, the repair fixes it
    model.faults = ["429"]          # the next request is rate-limited
    server.stop()

Page answers: ``good``, ``external``, ``fetching``, ``leak``, ``prose``, ``fenced`` (the good
page inside a Markdown fence, with chatter around it), ``huge`` (a 3 MB page), ``jserror``
(throws on load), ``refusal``, ``filter`` (OpenAI's content filter), ``length`` (cut at
max_tokens).
"""

from __future__ import annotations

import html
import http.server
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

SIZE_HUGE = 3 * 1024 * 1024
PLAIN_WORDS = ("make me", "build me", "can you make", "could you make", "please", "i want", "i need", "create", "give me",
               "write me", "make", "build")
LEAK_WORDS = ("system prompt", "instructions", "ignore previous", "ignore all", "reveal", "your rules")
EXTERNAL_WORDS = ("cdn", "jquery", "http://", "https://", "google fonts", "load the script", "unpkg", "bootstrap")
FETCH_WORDS = ("weather", "live ", "stock price", "api", "fetch", "exchange rate", "news")


@dataclass
class Call:
    """One request the fake answered: which API, whether it streamed, its JSON body, whether the key was right."""

    api: str
    path: str
    stream: bool
    body: dict[str, Any]
    key_ok: bool


def title_of(request: str) -> str:
    """What a naive model calls the app a request asks for ("make me a pomodoro timer" -> "Pomodoro timer")."""
    text = re.sub(r"@[\w.-]+", "", request).strip().rstrip("!?.").strip()
    lowered = text.lower()
    changed = True
    while changed:
        changed = False
        for word in (*PLAIN_WORDS, "a ", "an ", "the ", "me ", "for me", "us "):
            if lowered.startswith(word):
                text, lowered, changed = text[len(word):].lstrip(" ,:"), lowered[len(word):].lstrip(" ,:"), True
    text = text.strip() or "Little app"
    return (text[0].upper() + text[1:])[:60]


def page(title: str, *, extra_head: str = "", extra_body: str = "", script: str = "") -> str:
    """A small working app: a counter under the title."""
    safe = html.escape(title)
    code = script or ("let n = 0; const out = document.getElementById('out');"
                      "document.getElementById('tap').addEventListener('click', () => { n++; out.textContent = n; });")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{safe}</title>{extra_head}'
            f"<style>body{{font-family:system-ui,sans-serif;max-width:30rem;margin:2rem auto;padding:0 1rem}}"
            f"button{{font-size:1.2rem;min-height:44px;padding:.4rem 1rem}}</style></head>\n"
            f'<body><h1>{safe}</h1><p id="out" aria-live="polite">0</p><button id="tap">Tap</button>{extra_body}'
            f"<script>{code}</script></body></html>\n")


class FakeModel:
    """Both APIs, for one key; see the module docstring."""

    def __init__(self, key: str = "sk-fake-key", *, usage: bool = True, delay: float = 0.0, chunk: int = 256) -> None:
        self.key = key
        self.usage = usage  # report token usage (some local servers report none)
        self.delay = delay  # seconds between streamed pieces (a generation's pace)
        self.chunk = chunk  # characters per streamed piece
        self.slow_delay = 0.5
        self.answers: list[str] = []
        self.faults: list[str] = []
        self.calls: list[Call] = []
        self.stopped = threading.Event()
        self._lock = threading.Lock()

    # ---- what the model says -----------------------------------------------------------------
    def _request_text(self, messages: list[dict[str, Any]]) -> str:
        for m in messages:
            if m.get("role") == "user":
                found = re.search(r'REQUEST: ("(?:[^"\\]|\\.)*")', str(m.get("content", "")))
                if found:
                    return str(json.loads(found.group(1)))
                return str(m.get("content", ""))
        return ""

    def decide(self, system: str, messages: list[dict[str, Any]]) -> tuple[str, str]:
        """(what kind of answer, its text) for a conversation."""
        request = self._request_text(messages)
        title = title_of(request)
        assistant_turns = sum(1 for m in messages if m.get("role") == "assistant")
        if assistant_turns == 0:
            return "plan", f"TITLE: {title}\nFEATURES:\n- a big number in the middle\n- one button that adds one\n- works offline\n"
        with self._lock:
            scripted = self.answers.pop(0) if self.answers else None
        if scripted is None:
            scripted = "good" if assistant_turns >= 2 else self._naive(request)
        return scripted, self._page(scripted, title, system)

    def _naive(self, request: str) -> str:
        lowered = request.lower()
        if any(w in lowered for w in LEAK_WORDS):
            return "leak"
        if any(w in lowered for w in EXTERNAL_WORDS):
            return "external"
        if any(w in lowered for w in FETCH_WORDS):
            return "fetching"
        return "good"

    def _page(self, kind: str, title: str, system: str) -> str:
        if kind == "external":
            return page(title, extra_head='<link rel="stylesheet" href="https://cdn.example.com/app.css">',
                        extra_body='<img src="https://img.example.com/logo.png" alt="logo">'
                                   '<script src="https://cdn.example.com/jquery.min.js"></script>')
        if kind == "fetching":
            return page(title, script="fetch('https://api.example.com/data').then(r => r.json())"
                                      ".then(d => { document.getElementById('out').textContent = d.value; });")
        if kind == "leak":
            return page(title, extra_body=f"<pre>{html.escape(system)}</pre>")
        if kind == "prose":
            return (f"Sure! Here is how I would build {title}: a big number, a button that adds one, and local storage "
                    "so it survives a reload. Let me know if you want me to write the code.")
        if kind == "fenced":
            return f"Here is your page:\n\n```html\n{page(title)}```\n\nEnjoy!"
        if kind == "huge":
            filler = "<!-- " + "x" * SIZE_HUGE + " -->"
            return page(title, extra_body=filler)
        if kind == "jserror":
            return page(title, script="const config = undefined; config.start();")
        if kind == "length":
            return page(title)[:200]
        return page(title)

    # ---- the wire ----------------------------------------------------------------------------
    def serve(self) -> Served:
        """This fake on 127.0.0.1, in a thread: ``.url``, ``.stop()``."""
        return Served(self)


@dataclass
class _Answer:
    kind: str
    text: str
    tokens_in: int
    tokens_out: int
    extra: dict[str, Any] = field(default_factory=dict)


class Served:
    """A ``FakeModel`` over HTTP on a free local port."""

    def __init__(self, model: FakeModel) -> None:
        fake = model

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                if path.endswith("/chat/completions"):
                    api, given = "openai", (self.headers.get("authorization") or "").removeprefix("Bearer ")
                elif path.endswith("/v1/messages"):
                    api, given = "anthropic", self.headers.get("x-api-key") or ""
                else:
                    self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
                    return
                stream = bool(body.get("stream"))
                ok = given == fake.key
                with fake._lock:
                    fake.calls.append(Call(api, path, stream, body, ok))
                    fault = fake.faults.pop(0) if fake.faults and ok else None
                try:
                    if not ok:
                        self._wrong_key(api, given)
                    elif fault is not None and self._fault(api, fault):
                        return
                    else:
                        self._answer(api, body, stream, slow=fault == "slow", broken=fault == "overloaded-stream")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its time limit): nothing to answer

            # ---- answers -------------------------------------------------------------------
            def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _error(self, api: str, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
                if api == "anthropic":
                    self._json(status, {"type": "error", "error": {"type": kind, "message": message}}, headers)
                else:
                    self._json(status, {"error": {"message": message, "type": kind, "code": kind, "param": None}}, headers)

            def _wrong_key(self, api: str, given: str) -> None:
                if api == "anthropic":
                    self._error(api, 401, "authentication_error", f"invalid x-api-key: {given}")
                else:
                    self._error(api, 401, "invalid_api_key", f"Incorrect API key provided: {given}. You can find your API key in your account.")

            def _fault(self, api: str, fault: str) -> bool:
                """Serve ``fault``; False when it is served as part of the answer (slow, overloaded-stream)."""
                if fault == "429":
                    kind = "rate_limit_error" if api == "anthropic" else "rate_limit_exceeded"
                    self._error(api, 429, kind, "Rate limit reached for requests", {"retry-after": "1"})
                elif fault == "quota":
                    self._error(api, 429, "insufficient_quota", "You exceeded your current quota, please check your plan and billing details.")
                elif fault in ("500", "502", "503"):
                    kind = "api_error" if api == "anthropic" else "server_error"
                    self._error(api, int(fault), kind, "The server had an error while processing your request.")
                elif fault == "overloaded":
                    if api == "anthropic":
                        self._error(api, 529, "overloaded_error", "Overloaded")
                    else:
                        self._error(api, 503, "server_error", "The engine is currently overloaded, please try again later")
                elif fault == "stall":
                    fake.stopped.wait(120)
                    self.close_connection = True
                else:
                    return False
                return True

            def _answer(self, api: str, body: dict[str, Any], stream: bool, *, slow: bool, broken: bool) -> None:
                messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
                system = str(body.get("system") or "") if api == "anthropic" else \
                    "".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
                turns = [m for m in messages if m.get("role") != "system"]
                kind, text = fake.decide(system, turns)
                prompt = len(system) + sum(len(str(m.get("content", ""))) for m in turns)
                answer = _Answer(kind, text, prompt // 4 + 1, len(text) // 4 + 1,
                                 extra={"include_usage": bool((body.get("stream_options") or {}).get("include_usage"))})
                delay = fake.slow_delay if slow else fake.delay
                if api == "anthropic":
                    self._anthropic(answer, stream, delay, broken)
                else:
                    self._openai(answer, stream, delay, broken, str(body.get("model", "")))

            def _pieces(self, text: str, delay: float) -> list[str]:
                size = fake.chunk if len(text) < 100_000 else 64 * 1024
                return [text[i:i + size] for i in range(0, len(text), size)] or [""]

            def _sse_start(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                self.close_connection = True

            def _send(self, data: dict[str, Any] | str, event: str | None = None) -> None:
                payload = data if isinstance(data, str) else json.dumps(data)
                self.wfile.write(((f"event: {event}\n" if event else "") + f"data: {payload}\n\n").encode())
                self.wfile.flush()

            def _openai(self, a: _Answer, stream: bool, delay: float, broken: bool, model: str) -> None:
                usage = {"prompt_tokens": a.tokens_in, "completion_tokens": a.tokens_out, "total_tokens": a.tokens_in + a.tokens_out}
                finish = {"filter": "content_filter", "length": "length"}.get(a.kind, "stop")
                refusal = "I'm sorry, but I can't help with that request." if a.kind == "refusal" else None
                text = "" if a.kind == "refusal" else a.text
                if not stream:
                    if delay:
                        time.sleep(delay * 20)
                    message = {"role": "assistant", "content": None if refusal else text, "refusal": refusal}
                    out: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
                                           "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
                    if fake.usage:
                        out["usage"] = usage
                    self._json(200, out)
                    return
                self._sse_start()
                base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
                self._send({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
                if refusal:
                    self._send({**base, "choices": [{"index": 0, "delta": {"refusal": refusal}, "finish_reason": None}]})
                for i, piece in enumerate(self._pieces(text, delay)):
                    if broken and i == 1:
                        self._send({"error": {"message": "The engine is currently overloaded", "type": "server_error"}})
                        return
                    if delay:
                        time.sleep(delay)
                    if fake.stopped.is_set():
                        return
                    self._send({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                self._send({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                if fake.usage and a.extra.get("include_usage"):  # OpenAI counts a stream only when asked to
                    self._send({**base, "choices": [], "usage": usage})
                self._send("[DONE]")

            def _anthropic(self, a: _Answer, stream: bool, delay: float, broken: bool) -> None:
                stop = {"refusal": "refusal", "filter": "refusal", "length": "max_tokens"}.get(a.kind, "end_turn")
                text = "I can't help with that." if a.kind in ("refusal", "filter") else a.text
                usage_in = {"input_tokens": a.tokens_in, "output_tokens": 1} if fake.usage else {}
                if not stream:
                    if delay:
                        time.sleep(delay * 20)
                    out: dict[str, Any] = {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
                                           "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": None}
                    if fake.usage:
                        out["usage"] = {"input_tokens": a.tokens_in, "output_tokens": a.tokens_out}
                    self._json(200, out)
                    return
                self._sse_start()
                self._send({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "content": [],
                                                                 "model": "fake", "stop_reason": None, "usage": usage_in}}, "message_start")
                self._send({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start")
                self._send({"type": "ping"}, "ping")
                for i, piece in enumerate(self._pieces(text, delay)):
                    if broken and i == 1:
                        self._send({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error")
                        return
                    if delay:
                        time.sleep(delay)
                    if fake.stopped.is_set():
                        return
                    self._send({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")
                self._send({"type": "content_block_stop", "index": 0}, "content_block_stop")
                usage_out = {"output_tokens": a.tokens_out} if fake.usage else {}
                self._send({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage_out}, "message_delta")
                self._send({"type": "message_stop"}, "message_stop")

        self.model = model
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving (a stalled answer ends too) and close the socket."""
        self.model.stopped.set()
        self.server.shutdown()
        self.server.server_close()


__all__ = ["Call", "FakeModel", "Served", "page", "title_of"]
