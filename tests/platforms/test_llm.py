"""The language-model adapters against the test kit's FakeModel on a real local socket: both
APIs, streaming and not; usage counted or estimated; 429 (with Retry-After), 5xx and overloaded
answers retried within the deadline; a refused key that never shows the key; refusals, content
filters, answers too large or too slow; and the server-sent events parser on its own."""

from __future__ import annotations

import time

import httpx
import pytest

from platforms import AuthFailure, Failed, RateLimited, Transient
from platforms.graph import RetryPolicy
from platforms.llm import AnthropicChat, OpenAIChat, Turn, chat_model
from platforms.sse import Event, EventStream
from skyhub_testkit.fakemodel import FakeModel

KEY = "sk-test-0123456789abcdef"
FAST = RetryPolicy(attempts=4, wait=0.05, max_wait=0.2)
PLAN = [Turn("user", 'REQUEST: "make me a pomodoro timer"')]
PAGE = [*PLAN, Turn("assistant", "TITLE: Pomodoro timer"), Turn("user", "Step 2, the page.")]
APIS = [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)]


@pytest.fixture
def fake():
    model = FakeModel(key=KEY)
    served = model.serve()
    model.url = served.url
    yield model
    served.stop()


@pytest.fixture
def http():
    with httpx.Client() as client:
        yield client


def client(fake, http, provider, stream, *, key=KEY, retry=FAST, max_bytes=2_000_000):
    base = fake.url + "/v1" if provider == "openai" else fake.url
    return chat_model(provider, http, key, model="fake-1", base_url=base, stream=stream, max_bytes=max_bytes, retry=retry)


def soon(seconds=30.0):
    return time.monotonic() + seconds


@pytest.mark.parametrize("provider,stream", APIS)
def test_a_plan_then_a_page_with_the_tokens_the_api_counted(fake, http, provider, stream):
    chat = client(fake, http, provider, stream)
    plan = chat.complete("the rules", PLAN, max_tokens=1000, deadline=soon())
    assert plan.stop == "end" and plan.text.startswith("TITLE: Pomodoro timer") and not plan.estimated
    page = chat.complete("the rules", PAGE, max_tokens=8000, deadline=soon())
    assert page.stop == "end" and page.text.startswith("<!doctype html>") and "<title>Pomodoro timer</title>" in page.text
    assert page.tokens_in > plan.tokens_in > 0 and page.tokens_out == len(page.text) // 4 + 1
    call = fake.calls[-1]
    assert (call.api, call.stream, call.key_ok) == (provider, stream, True)
    assert call.body["max_tokens"] == 8000 and "tools" not in call.body and "functions" not in call.body
    if provider == "openai":
        assert call.path == "/v1/chat/completions" and call.body["messages"][0] == {"role": "system", "content": "the rules"}
    else:
        assert call.path == "/v1/messages" and call.body["system"] == "the rules"
        assert [m["role"] for m in call.body["messages"]] == ["user", "assistant", "user"]


def test_a_server_that_counts_nothing_gets_an_estimate(fake, http):
    fake.usage = False
    reply = client(fake, http, "openai", True).complete("x" * 400, PLAN, max_tokens=100, deadline=soon())
    assert reply.estimated and reply.tokens_out == (len(reply.text) + 3) // 4 and reply.tokens_in >= 100


@pytest.mark.parametrize("provider,stream", APIS)
@pytest.mark.parametrize("faults", [["429"], ["500", "502"], ["503"], ["overloaded"], ["overloaded-stream"]])
def test_throttled_failing_and_overloaded_answers_are_tried_again(fake, http, provider, stream, faults):
    if faults == ["overloaded-stream"] and not stream:
        faults = ["overloaded"]
    fake.faults = list(faults)
    reply = client(fake, http, provider, stream).complete("rules", PAGE, max_tokens=100, deadline=soon())
    assert reply.stop == "end" and "</html>" in reply.text
    assert len(fake.calls) == len(faults) + 1 and not fake.faults


class Clock:
    """Time that moves only when the retry sleeps: the real calls take no time on it."""

    def __init__(self):
        self.t = 1000.0
        self.sleeps = []

    def __call__(self):
        return self.t

    def ms(self):
        return int(self.t * 1000)

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.t += seconds


def test_a_rate_limit_waits_as_long_as_the_server_asks(fake, http):
    fake.faults = ["429"]
    clock = Clock()
    chat = AnthropicChat(http, KEY, model="fake-1", base_url=fake.url, clock=clock, now_ms=clock.ms,
                         retry=RetryPolicy(attempts=4, wait=0.05, sleep=clock.sleep))
    chat.complete("rules", PLAN, max_tokens=100, deadline=clock() + 30)
    (slept,) = clock.sleeps
    assert slept == 1.0  # Retry-After: 1, though the policy's own first wait is 0.05 s


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_repeated_5xx_gives_up_with_the_reason(fake, http, provider):
    fake.faults = ["500"] * 10
    with pytest.raises(Transient) as caught:
        client(fake, http, provider, True).complete("rules", PLAN, max_tokens=100, deadline=soon())
    assert len(fake.calls) == FAST.attempts and "HTTP 500" in caught.value.reason and "overloaded or failing" in caught.value.reason


def test_retries_stop_at_the_deadline_not_after_it(fake, http):
    fake.faults = ["429"] * 10  # each asks for a 1 s wait
    clock = Clock()
    chat = OpenAIChat(http, KEY, model="fake-1", base_url=fake.url + "/v1", clock=clock, now_ms=clock.ms,
                      retry=RetryPolicy(attempts=10, wait=0.05, sleep=clock.sleep))
    with pytest.raises(RateLimited, match="HTTP 429"):
        chat.complete("rules", PLAN, max_tokens=100, deadline=clock() + 1.5)
    assert len(fake.calls) == 2 and len(clock.sleeps) == 1  # the second wait would end past the deadline: no third try


@pytest.mark.parametrize("provider,stream", APIS)
def test_a_wrong_key_is_one_reason_that_shows_no_key(fake, http, provider, stream):
    wrong = "sk-wrong-9f8e7d6c5b4a"
    chat = client(fake, http, provider, stream, key=wrong)
    with pytest.raises(AuthFailure) as caught:
        chat.complete("rules", PLAN, max_tokens=100, deadline=soon())
    reason = caught.value.reason
    assert "the API key was refused (HTTP 401" in reason and "\n" not in reason
    assert wrong not in reason and wrong[-8:] not in reason and wrong not in repr(caught.value) and wrong not in repr(chat)
    assert caught.value.platform_message == ""  # the server echoed the key in its message: none of it is kept
    assert len(fake.calls) == 1  # never retried


def test_an_account_without_quota_is_not_retried(fake, http):
    fake.faults = ["quota"]
    with pytest.raises(Failed, match="no quota left"):
        client(fake, http, "openai", True).complete("rules", PLAN, max_tokens=100, deadline=soon())
    assert len(fake.calls) == 1


@pytest.mark.parametrize("provider,stream", APIS)
def test_a_refusal_is_an_answer_that_says_so(fake, http, provider, stream):
    fake.answers = ["refusal"]
    reply = client(fake, http, provider, stream).complete("rules", PAGE, max_tokens=100, deadline=soon())
    assert reply.stop == "refusal" and "can't help" in reply.refusal


@pytest.mark.parametrize("stream", [True, False])
def test_a_content_filter_stops_the_answer(fake, http, stream):
    fake.answers = ["filter"]
    assert client(fake, http, "openai", stream).complete("rules", PAGE, max_tokens=100, deadline=soon()).stop == "filter"


@pytest.mark.parametrize("provider,stream", APIS)
def test_an_answer_past_max_bytes_is_not_read_to_its_end(fake, http, provider, stream):
    fake.answers = ["huge"]  # 3 MB
    reply = client(fake, http, provider, stream, max_bytes=300_000).complete("rules", PAGE, max_tokens=100, deadline=soon())
    assert reply.stop == "too-large" and len(reply.text) < 700_000


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_slow_stream_stops_at_the_deadline_with_what_came(fake, http, provider):
    fake.chunk, fake.slow_delay = 20, 0.3  # about 30 pieces, 9 s in all
    fake.faults = ["slow"]
    reply = client(fake, http, provider, True).complete("rules", PAGE, max_tokens=100, deadline=time.monotonic() + 3.0)
    whole = client(fake, http, provider, True).complete("rules", PAGE, max_tokens=100, deadline=soon())
    assert reply.stop == "time" and 0 < len(reply.text) < len(whole.text) and reply.estimated
    assert whole.text.startswith(reply.text)


def test_a_server_that_never_answers_fails_by_the_deadline(fake, http):
    fake.faults = ["stall"]
    with pytest.raises(Transient, match="did not answer in time"):
        client(fake, http, "openai", True, retry=RetryPolicy(attempts=1)).complete("rules", PLAN, max_tokens=100,
                                                                               deadline=time.monotonic() + 1.0)


def test_the_clients_are_named_by_provider_and_know_their_endpoints(http):
    assert isinstance(chat_model("openai", http, KEY, model="m"), OpenAIChat)
    assert chat_model("openai", http, KEY, model="m").base_url == "https://api.openai.com/v1"
    assert chat_model("anthropic", http, KEY, model="m").base_url == "https://api.anthropic.com"
    assert isinstance(chat_model("anthropic", http, KEY, model="m", base_url="http://127.0.0.1:9/"), AnthropicChat)
    with pytest.raises(ValueError, match="no chat provider 'gemini'"):
        chat_model("gemini", http, KEY, model="m")
    assert KEY not in repr(chat_model("openai", http, KEY, model="m", base_url="https://user:pw@llm.example.org/v1"))
    assert "pw" not in chat_model("openai", http, KEY, model="m", base_url="https://user:pw@llm.example.org/v1").where


# ---- server-sent events ----------------------------------------------------------------------
def test_events_come_whole_whatever_the_pieces():
    raw = 'event: a\r\ndata: {"x": "\u00e9"}\r\n\r\n: keep-alive\n\ndata: 1\ndata: 2\n\nevent: b\rdata: three\r\r'.encode()
    for size in (1, 2, 3, 7, len(raw)):
        stream = EventStream()
        got = [e for i in range(0, len(raw), size) for e in stream.feed(raw[i:i + size])] + list(stream.close())
        assert got == [Event("a", '{"x": "\u00e9"}'), Event("message", "1\n2"), Event("b", "three")], size


def test_a_last_event_without_its_blank_line_still_counts():
    stream = EventStream()
    assert list(stream.feed(b"data: [DONE]")) == [] and list(stream.close()) == [Event("message", "[DONE]")]
