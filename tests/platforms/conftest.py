"""Shared helpers: an HTTP client whose transport is a recording handler (the transport seam)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A ``MockTransport`` handler that records every request and answers through ``answer``
    (a function of the request, or a list of responses/exceptions served in order)."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.answers: list[httpx.Response | Exception] = []
        self.answer: Handler | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        if self.answer is not None:
            return self.answer(request)
        item = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(item, Exception):
            raise item
        return item

    def serve(self, *answers: httpx.Response | Exception) -> Recorder:
        """Answer with these in order (the last one again and again)."""
        self.answers = list(answers)
        self.answer = None
        return self

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def http(recorder: Recorder):
    client = httpx.Client(transport=httpx.MockTransport(recorder))
    yield client
    client.close()
