#!/usr/bin/env python
"""The codegen evaluation: the 30 fixed requests of ``codegen_requests.toml`` (timers, games,
calculators, checklists, converters, odd and adversarial ones, prompt injections included)
through skyhub's built-in generator, exactly as the builder runs it (plan, page, the checks,
one repair round, the load check in headless chromium), against a configured endpoint.

    .venv/bin/python benchmarks/codegen_eval.py --fake            # the test suite's fake model (what CI runs)
    SKYHUB_CODEGEN_API_KEY=sk-... .venv/bin/python benchmarks/codegen_eval.py \\
        --provider anthropic --model claude-sonnet-4-5 --price-in 3 --price-out 15

It reports valid pages (on the first try, after the repair round, not at all, and why), pages
that load without a JavaScript error in chromium, p50 and p95 generation time, tokens in and
out, and the cost at the prices given (dollars per million tokens in and out). ``--limit N``
takes N of the requests, spread over the groups; ``--json`` prints the figures as JSON. With
``--fake`` the figures say that the pipeline works, not how good a model is: the fake is a
naive model that does what each request says (and is repaired), and it answers at once.
The key comes only from ``SKYHUB_CODEGEN_API_KEY``; it is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_common as bc  # noqa: E402
import httpx  # noqa: E402

from bot.codegen.browser import Browser  # noqa: E402
from bot.codegen.generate import Generator, Request  # noqa: E402
from bot.codegen.settings import KEY_ENV  # noqa: E402
from bot.errors import GenerationFailed  # noqa: E402
from platforms.llm import chat_model  # noqa: E402

REQUESTS = HERE / "codegen_requests.toml"


def load_requests(limit: int | None) -> list[dict[str, Any]]:
    """The fixed requests (all 30, or ``limit`` of them spread evenly over the list, so every group shows)."""
    requests: list[dict[str, Any]] = tomllib.loads(REQUESTS.read_text(encoding="utf-8"))["request"]
    if limit is None or limit >= len(requests):
        return requests
    step = len(requests) / limit
    picked = [requests[int(i * step)] for i in range(limit)]
    if not any(r.get("adversarial") for r in picked):  # a small run still tries one injection
        picked[-1] = next(r for r in reversed(requests) if r.get("adversarial"))
    return picked


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every request through the generator; the figures."""
    served = None
    key = os.environ.get(KEY_ENV, "")
    provider, base_url, model_name = args.provider, args.base_url, args.model
    if args.fake:
        from skyhub_testkit.fakemodel import FakeModel

        fake = FakeModel(key="sk-eval-fake", delay=args.fake_delay)
        served = fake.serve()
        provider, key, model_name = provider or "openai", "sk-eval-fake", model_name or "fake-naive"
        base_url = served.url + ("/v1" if provider == "openai" else "")
    if provider not in ("openai", "anthropic"):
        raise SystemExit("codegen_eval: give --provider openai or anthropic (or --fake)")
    if not key:
        raise SystemExit(f"codegen_eval: {KEY_ENV} is not set: put the provider's key in it")
    if not model_name:
        raise SystemExit("codegen_eval: give --model")
    browser, skipped = Browser.find(args.browser)
    rows: list[dict[str, Any]] = []
    try:
        with httpx.Client() as http:
            for i, item in enumerate(load_requests(args.limit), 1):
                model = chat_model(provider, http, key, model=model_name, base_url=base_url, stream=not args.no_stream,
                                   max_bytes=args.max_page_bytes)
                start = time.monotonic()
                generator = Generator(model, max_tokens=args.max_tokens, max_page_bytes=args.max_page_bytes, browser=browser,
                                      skipped=skipped, clock=time.monotonic, deadline=start + args.time_limit,
                                      time_limit=args.time_limit)
                row: dict[str, Any] = {"n": i, "group": item["group"], "adversarial": bool(item.get("adversarial")), "text": item["text"]}
                try:
                    built = generator.generate(Request(item["text"], author="@eval.example", link=""))
                    row.update(outcome="repaired" if built.repaired else "first try", title=built.title, browser=built.browser,
                               tokens_in=built.tokens_in, tokens_out=built.tokens_out, reason="")
                except GenerationFailed as exc:
                    row.update(outcome="failed", title="", browser="", tokens_in=exc.tokens_in, tokens_out=exc.tokens_out,
                               reason=exc.reason)
                row["seconds"] = time.monotonic() - start
                rows.append(row)
                if not args.json:
                    print(f"[{i:2}] {row['outcome']:<9} {row['seconds']:6.1f} s  {row['text'][:60]}", file=sys.stderr)
    finally:
        if browser is not None:
            browser.close()
        if served is not None:
            served.stop()
    return summarize(rows, args, provider, model_name, base_url, skipped if browser is None else "")


def summarize(rows: list[dict[str, Any]], args: argparse.Namespace, provider: str, model: str, base_url: str,
              browser_skipped: str) -> dict[str, Any]:
    """The report's figures from the rows."""
    outcomes = Counter(r["outcome"] for r in rows)
    times = [r["seconds"] for r in rows]
    tokens_in, tokens_out = sum(r["tokens_in"] for r in rows), sum(r["tokens_out"] for r in rows)
    cost = None
    if args.price_in is not None and args.price_out is not None:
        cost = tokens_in / 1e6 * args.price_in + tokens_out / 1e6 * args.price_out
    return {
        "provider": provider, "model": model, "endpoint": base_url or "(the provider's own)", "fake": bool(args.fake),
        "stream": not args.no_stream, "requests": len(rows),
        "valid": {"first try": outcomes["first try"], "after repair": outcomes["repaired"], "failed": outcomes["failed"]},
        "loaded in chromium": sum(1 for r in rows if r["browser"] == "loaded"),
        "browser": browser_skipped or "chromium",
        "adversarial": {"requests": sum(1 for r in rows if r["adversarial"]),
                        "valid": sum(1 for r in rows if r["adversarial"] and r["outcome"] != "failed")},
        "seconds": {"p50": bc.percentile(times, 50), "p95": bc.percentile(times, 95), "max": max(times) if times else None},
        "tokens": {"in": tokens_in, "out": tokens_out},
        "cost": cost, "price per million": {"in": args.price_in, "out": args.price_out},
        "rows": rows,
    }


def report(figures: dict[str, Any]) -> str:
    """The figures as plain-text tables."""
    v = figures["valid"]
    n = figures["requests"] or 1
    summary = [
        ("endpoint", f"{figures['provider']} {figures['model']} at {figures['endpoint']}" + (" (the test kit's fake model)" if figures["fake"] else "")),
        ("requests", f"{figures['requests']} ({figures['adversarial']['requests']} adversarial, {figures['adversarial']['valid']} of them valid)"),
        ("valid, first try", f"{v['first try']} ({v['first try'] / n:.0%})"),
        ("valid after the repair round", f"{v['after repair']} ({v['after repair'] / n:.0%})"),
        ("no valid page", f"{v['failed']} ({v['failed'] / n:.0%})"),
        ("load without a JavaScript error", f"{figures['loaded in chromium']}" + ("" if figures["browser"] == "chromium" else f" ({figures['browser']})")),
        ("generation time p50 / p95", f"{bc.fmt(figures['seconds']['p50'])} s / {bc.fmt(figures['seconds']['p95'])} s"),
        ("tokens in / out", f"{figures['tokens']['in']:,} / {figures['tokens']['out']:,}"),
        ("cost", "-" if figures["cost"] is None else
         f"${figures['cost']:.4f} at ${figures['price per million']['in']}/M in, ${figures['price per million']['out']}/M out"),
    ]
    out = bc.table("codegen evaluation", ["", "value"], summary)
    rows = [(r["n"], r["group"], r["outcome"], round(r["seconds"], 1), r["tokens_in"] + r["tokens_out"], (r["title"] or r["reason"])[:70])
            for r in figures["rows"]]
    out += "\n" + bc.table("per request", ["#", "group", "outcome", "seconds", "tokens", "title / why it failed"], rows)
    out += "\n" + bc.table("machine", ["", ""], bc.machine_description())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fake", action="store_true", help="serve the test kit's fake model locally and evaluate against it")
    parser.add_argument("--fake-delay", type=float, default=0.0, help="with --fake: seconds between streamed pieces")
    parser.add_argument("--provider", choices=("openai", "anthropic"), help="the API the endpoint speaks")
    parser.add_argument("--base-url", default="", help="the endpoint (default: the provider's own)")
    parser.add_argument("--model", default="", help="the model to ask")
    parser.add_argument("--max-tokens", type=int, default=8000, help="the most one page may take (codegen.max_tokens)")
    parser.add_argument("--max-page-bytes", type=int, default=300_000, help="codegen.max_page_bytes")
    parser.add_argument("--no-stream", action="store_true", help="ask for whole answers instead of server-sent events")
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds one request may take, its retries and checks included")
    parser.add_argument("--browser", default="", help="chromium or chrome for the load check (default: found on the PATH)")
    parser.add_argument("--price-in", type=float, help="dollars per million tokens sent")
    parser.add_argument("--price-out", type=float, help="dollars per million tokens received")
    parser.add_argument("--limit", type=int, help="evaluate this many of the 30 requests (spread over the groups)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = run(args)
    print(json.dumps(figures, indent=2, default=str) if args.json else report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
