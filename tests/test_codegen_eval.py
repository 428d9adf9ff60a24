"""benchmarks/codegen_eval.py runs in CI, at a small size, against the test kit's fake model: the
fixed list of requests is in the repository and whole, every request goes through the real
generator (the checks, the repair round, chromium), and the report adds up. Its timings are
figures for docs/benchmarks.md, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_fixed_requests_are_thirty_in_six_groups_with_injections():
    requests = tomllib.loads((ROOT / "benchmarks" / "codegen_requests.toml").read_text())["request"]
    assert len(requests) == 30 and len({r["text"] for r in requests}) == 30
    groups = {r["group"] for r in requests}
    assert {"timers", "games", "calculators", "checklists", "converters", "odd", "adversarial"} <= groups
    injections = [r["text"] for r in requests if r.get("adversarial")]
    assert any("ignore previous instructions" in t for t in injections) and any("fetch" in t for t in injections)


def test_the_evaluation_runs_against_the_fake_model_and_its_report_adds_up(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "codegen_eval.py"), "--fake", "--limit", "5", "--json",
                          "--price-in", "3", "--price-out", "15", "--browser", "/usr/bin/chromium"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    figures = json.loads(run.stdout)
    assert figures["requests"] == 5 and figures["fake"] is True and figures["browser"] == "chromium"
    valid = figures["valid"]
    assert valid["first try"] + valid["after repair"] + valid["failed"] == 5
    assert figures["loaded in chromium"] == valid["first try"] + valid["after repair"]
    assert figures["adversarial"]["requests"] >= 1
    # the naive fake falls for the injection; the checks catch it and the repair round fixes it
    (injection,) = [r for r in figures["rows"] if r["adversarial"]]
    assert injection["outcome"] == "repaired"
    tokens = figures["tokens"]
    assert tokens["in"] == sum(r["tokens_in"] for r in figures["rows"]) > 0 and tokens["out"] > 0
    assert abs(figures["cost"] - (tokens["in"] * 3 + tokens["out"] * 15) / 1e6) < 1e-9
    assert figures["seconds"]["p50"] <= figures["seconds"]["p95"]


def test_the_evaluation_needs_a_key_for_a_real_endpoint(tmp_path):
    env = {"PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "codegen_eval.py"), "--provider", "openai", "--model", "m"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120, env=env)
    assert run.returncode == 1 and run.stderr.strip() == "codegen_eval: SKYHUB_CODEGEN_API_KEY is not set: put the provider's key in it"
