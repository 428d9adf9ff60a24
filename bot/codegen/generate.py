"""One build: a request in, a checked page out, or a ``GenerationFailed`` saying why not.

With a model: the plan (at most ``PLAN_TOKENS``), then the page, in one conversation. The page
is taken out of the answer, checked (``checks.inspect``), credited, given its
Content-Security-Policy and opened in the browser; if any of that finds a problem, the model
is told exactly what and gets one repair round, and a second refusal fails the build with that
sentence. A refusal or a content-filter answer fails at once, and so does running out of the
time limit (``deadline``, for the whole build: the calls, their retries and the browser).

With the ``templates`` provider (no model), the same checks run on the template's page; nothing
is sent anywhere. Every call's tokens are counted, whether the build succeeds or not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from platforms import AuthFailure, PlatformError
from platforms.llm import ChatModel, Reply, Turn

from ..errors import GenerationFailed
from . import checks, prompts, templates
from .browser import Browser

log = logging.getLogger(__name__)
SHOWN_BACK = 20_000  # characters of a refused answer the repair turn repeats to the model
BROWSER_TIME = 30.0  # seconds one load check may take at most
CREDIT_BYTES = 8000  # room for the credit: 300 characters of request, each at most a 6-byte entity, the author and the link


@dataclass(frozen=True)
class Request:
    """What was asked, by whom: the mention's text, its author (handle or DID), a link to the mention."""

    text: str
    author: str = ""
    link: str = ""


@dataclass
class Built:
    """A page ready to publish, and what it took."""

    html: str
    title: str
    kind: str  # "model", or the template's kind
    repaired: bool = False
    browser: str = "loaded"  # or "skipped: <why>"
    tokens_in: int = 0
    tokens_out: int = 0
    calls: int = 0


class Generator:
    """Builds pages with ``model`` (None: the templates), checking each with ``browser`` (None: the load
    check is skipped, ``skipped`` says why). ``clock`` gives the seconds ``deadline`` is counted in."""

    def __init__(self, model: ChatModel | None, *, max_tokens: int = 8000, max_page_bytes: int = 300_000,
                 browser: Browser | None = None, skipped: str = "skipped: no browser",
                 clock: Callable[[], float], deadline: float, time_limit: float = 0.0) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.max_page_bytes = max_page_bytes
        self.browser = browser
        self.skipped = skipped
        self.clock = clock
        self.deadline = deadline
        self.time_limit = time_limit  # seconds, for the sentence when it runs out
        self.tokens_in = self.tokens_out = self.calls = 0

    def generate(self, request: Request) -> Built:
        """The checked page for ``request``; ``GenerationFailed`` with one sentence when there is none."""
        if self.model is None:
            return self._template(request)
        marker = prompts.canary()
        system = prompts.system(marker)
        turns = [Turn("user", prompts.plan(request.text))]
        plan = self._ask(system, turns, min(prompts.PLAN_TOKENS, self.max_tokens), "the plan")
        planned = prompts.plan_title(plan.text)
        log.info("codegen: planned %r (%d tokens so far)", planned, self.tokens_in + self.tokens_out)
        turns += [Turn("assistant", plan.text[:4000]), Turn("user", prompts.CODE)]
        answer = self._ask(system, turns, self.max_tokens, "the page")
        built, problem = self._finish(answer, marker, request, planned)
        if built is not None:
            return built
        log.info("codegen: the page was refused (%s); asking for one repair", problem)
        shown = answer.text if len(answer.text) <= SHOWN_BACK else answer.text[:SHOWN_BACK] + "\n[... the rest is cut ...]"
        turns += [Turn("assistant", shown), Turn("user", prompts.repair(problem))]
        answer = self._ask(system, turns, self.max_tokens, "the repaired page")
        built, second = self._finish(answer, marker, request, planned)
        if built is not None:
            built.repaired = True
            return built
        raise self._failed(f"the page was refused after one repair round: {second}")

    # ---- steps -------------------------------------------------------------------------------
    def _failed(self, reason: str) -> GenerationFailed:
        return GenerationFailed(reason, tokens_in=self.tokens_in, tokens_out=self.tokens_out)

    def _ask(self, system: str, turns: list[Turn], max_tokens: int, what: str) -> Reply:
        assert self.model is not None
        try:
            reply = self.model.complete(system, turns, max_tokens=max_tokens, deadline=self.deadline)
        except AuthFailure as exc:
            raise self._failed(f"{exc.reason}: check the key in SKYHUB_CODEGEN_API_KEY") from None
        except PlatformError as exc:
            if self.clock() >= self.deadline - 1:
                raise self._failed(f"the model did not finish {what} within the time limit ({self.time_limit:g} s): {exc.reason}") from None
            raise self._failed(exc.reason) from None
        finally:
            self.calls += 1
        self.tokens_in += reply.tokens_in
        self.tokens_out += reply.tokens_out
        if reply.stop == "refusal":
            said = " ".join((reply.refusal or reply.text).split())[:200]
            raise self._failed(f"the model refused to write {what}: {said or 'it gave no reason'}")
        if reply.stop == "filter":
            raise self._failed(f"the provider's content filter stopped {what}")
        if reply.stop == "time":
            raise self._failed(f"the model did not finish {what} within the time limit ({self.time_limit:g} s)")
        return reply

    def _finish(self, answer: Reply, marker: str, request: Request, planned: str) -> tuple[Built | None, str]:
        """The page in ``answer``, checked and finished, or None and what is wrong with it."""
        if answer.stop == "too-large":
            return None, f"the answer is larger than {self.max_page_bytes:,} bytes: make the page smaller"
        if answer.stop == "length":
            return None, (f"the answer was cut off at the limit of {self.max_tokens:,} tokens before the page ended: "
                          "make the page shorter")
        page, problem = checks.extract(answer.text)
        if problem is not None:
            return None, problem
        return self._checked(page, marker, request, planned, "model")

    def _checked(self, page: str, marker: str, request: Request, fallback_title: str, kind: str) -> tuple[Built | None, str]:
        first = checks.inspect(page, canary=marker, max_bytes=self.max_page_bytes)
        if first.problems:
            return None, first.sentence
        credited = checks.with_credit(page, checks.credit(request.author, request.text, request.link))
        final = checks.inspect(credited, canary=marker, max_bytes=self.max_page_bytes + CREDIT_BYTES)
        if final.problems:  # the credit is plain text and one link: this would be a bug of ours
            return None, final.sentence
        published = checks.with_csp(credited, final.insert_at)
        browser = self.skipped
        if self.browser is not None:
            found = self.browser.problem(published, min(BROWSER_TIME, max(1.0, self.deadline - self.clock())))
            if found is not None:
                return None, found
            browser = "loaded"
        title = checks.clean_title(first.title or fallback_title)
        return Built(published, title, kind, browser=browser, tokens_in=self.tokens_in, tokens_out=self.tokens_out,
                     calls=self.calls), ""

    def _template(self, request: Request) -> Built:
        page, title = templates.render(request.text)
        built, problem = self._checked(page, "", request, title, templates.kind_of(request.text))
        if built is None:
            raise self._failed(f"the template's page was refused: {problem}")
        return built


__all__ = ["Built", "Generator", "Request"]
