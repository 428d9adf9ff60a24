"""``python -m bot.codegen``: the command the builder lane runs for each claimed mention.

Reads the job (the mention's document: ``_id``, ``text``, ``authorHandle``, ``uri``) as JSON on
stdin and the ``[codegen]`` settings from ``SKYHUB_CODEGEN__*`` variables (``skyhub build run``
sets them from the settings), the key from ``SKYHUB_CODEGEN_API_KEY`` alone. Writes
``<out>/<slug>/index.html`` and prints, last on stdout, ``{"url", "title", "kind", "tokens",
"browser", ...}``; when no page can be made, ``{"error": "<one sentence>", "tokens": ...}`` and
exit status 1. Exit status 2: the job, the settings or the key are not usable.

The time limit (``--time-limit``, ``SKYHUB_BUILD_TIMEOUT``, which the builder sets from
``bot.build_timeout``) covers the whole build. The generator stops a little before it, so the
failure is reported rather than killed; an alarm at the limit ends a call that hangs anyway.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from ledger import Usage

from ..errors import GenerationFailed
from .browser import Browser
from .generate import Built, Generator, Request
from .settings import KEY_ENV, CodegenSettings

log = logging.getLogger("bot.codegen")


class _TimeUp(Exception):
    """The time limit's alarm went off."""


def slug_of(job_id: str) -> str:
    """A folder name for a job id: lowercase letters, digits and dashes, at most 80 ("build" when none is left)."""
    return re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")[:80] or "build"


def mention_link(job: Mapping[str, Any]) -> str:
    """The mention on bsky.app, from its at-uri ("" when the job has none)."""
    uri = str(job.get("uri") or "")
    parts = uri.removeprefix("at://").split("/")
    if not uri.startswith("at://") or len(parts) != 3:
        return ""
    return f"https://bsky.app/profile/{parts[0]}/post/{parts[2]}"


def margin(limit: float) -> float:
    """How long before the limit the generator stops, to report instead of being killed."""
    return min(15.0, limit * 0.1)


@contextmanager
def alarm(seconds: float) -> Iterator[None]:
    """Raise ``_TimeUp`` in the main thread after ``seconds`` (where the platform has alarms)."""
    if not hasattr(signal, "setitimer") or seconds <= 0:
        yield
        return

    def ring(signum: int, frame: FrameType | None) -> None:
        raise _TimeUp

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def fail(reason: str, tokens_in: int = 0, tokens_out: int = 0) -> int:
    """Print the failure as the last line, for the builder to record; exit status 1."""
    print(f"codegen: {reason}", file=sys.stderr)
    print(json.dumps({"error": reason, "tokens": {"in": tokens_in, "out": tokens_out}}))
    return 1


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """The command (see the module docstring); returns the exit status."""
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(description="Turn a mention's request into a checked single-page app.")
    parser.add_argument("--out", default=env.get("SKYHUB_BUILD_OUT", "site"), help="Folder for the built pages (env SKYHUB_BUILD_OUT).")
    parser.add_argument("--base-url", default=env.get("SKYHUB_BUILD_BASE_URL", "http://127.0.0.1:8000"),
                        help="Where that folder is served (env SKYHUB_BUILD_BASE_URL).")
    parser.add_argument("--time-limit", type=float, default=float(env.get("SKYHUB_BUILD_TIMEOUT") or 600),
                        help="Seconds the whole build may take (env SKYHUB_BUILD_TIMEOUT; the builder sets it).")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request says nothing the result does not
    if not args.base_url.lower().startswith(("https://", "http://")):
        # a relative link would be posted as the reply and lead nowhere: refuse before building
        print(f"codegen: SKYHUB_BUILD_BASE_URL (--base-url) must be the http(s) URL where the built pages are served, "
              f"e.g. https://OWNER.github.io/REPO; got {args.base_url!r}", file=sys.stderr)
        return 2
    try:
        job = json.loads(sys.stdin.read())
        text, job_id = str(job["text"]), str(job["_id"])
    except (json.JSONDecodeError, KeyError, TypeError):
        print("codegen: expected the job as a JSON object with _id and text on stdin", file=sys.stderr)
        return 2
    try:
        settings = CodegenSettings.from_env(env)
    except Usage as exc:
        print(f"codegen: {exc.reason}", file=sys.stderr)
        return 2
    problem = settings.key_problem(env)
    if problem is not None:
        print(f"codegen: {problem}", file=sys.stderr)
        return 2
    request = Request(text, author=_author(job), link=mention_link(job))
    start = time.monotonic()
    try:
        with alarm(args.time_limit - margin(args.time_limit) / 3):
            built = build(settings, env, request, deadline=start + args.time_limit - margin(args.time_limit), limit=args.time_limit)
    except GenerationFailed as exc:
        return fail(exc.reason, exc.tokens_in, exc.tokens_out)
    except _TimeUp:
        return fail(f"the build did not finish within the time limit ({args.time_limit:g} s)")
    slug = slug_of(job_id)
    folder = Path(args.out) / slug
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.html").write_text(built.html, encoding="utf-8")
    print(f"codegen: wrote {folder / 'index.html'}: {built.title!r} ({built.kind}, {len(built.html.encode()):,} bytes, "
          f"{built.tokens_in + built.tokens_out:,} tokens, browser {built.browser})", file=sys.stderr)
    print(json.dumps({
        "url": f"{args.base_url.rstrip('/')}/{slug}/", "title": built.title, "kind": built.kind, "provider": settings.provider,
        "model": settings.model or None, "tokens": {"in": built.tokens_in, "out": built.tokens_out}, "repaired": built.repaired,
        "browser": built.browser, "bytes": len(built.html.encode()),
    }))
    return 0


def build(settings: CodegenSettings, env: Mapping[str, str], request: Request, *, deadline: float, limit: float) -> Built:
    """One page for ``request`` with these settings (the key from ``env``), checked; ``GenerationFailed`` when none."""
    browser, skipped = Browser.find(settings.browser)
    try:
        if settings.provider == "templates":  # no client is even made: nothing can be sent
            return Generator(None, max_page_bytes=settings.max_page_bytes, browser=browser, skipped=skipped,
                             clock=time.monotonic, deadline=deadline, time_limit=limit).generate(request)
        import httpx

        from platforms.llm import chat_model

        with httpx.Client() as http:
            model = chat_model(settings.provider, http, env.get(KEY_ENV, ""), model=settings.model, base_url=settings.base_url,
                               stream=settings.stream, max_bytes=settings.max_page_bytes)
            generator = Generator(model, max_tokens=settings.max_tokens, max_page_bytes=settings.max_page_bytes, browser=browser,
                                  skipped=skipped, clock=time.monotonic, deadline=deadline, time_limit=limit)
            return generator.generate(request)
    finally:
        if browser is not None:
            browser.close()


def _author(job: Mapping[str, Any]) -> str:
    handle = str(job.get("authorHandle") or "")
    return f"@{handle}" if handle else str(job.get("authorDid") or "")


if __name__ == "__main__":
    sys.exit(main())
