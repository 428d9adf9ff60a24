"""The GitHub Actions workflows in .github/workflows: each validates offline against the GitHub
workflow JSON schema (vendored by check-jsonschema), and the build-mentions lane keeps its
schedule, its concurrency group, its secret out of the logs, and uses only skyhub commands that
exist. check-jsonschema missing is a failure, never a skip: install skyhub[test]."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted(p for p in (ROOT / ".github" / "workflows").glob("*") if p.suffix in (".yml", ".yaml"))
BUILD = ROOT / ".github" / "workflows" / "build-mentions.yml"
MISSING = "check-jsonschema (and ruamel.yaml with it) is not installed in this environment: pip install -e '.[test]'"


def load(path: Path) -> Any:
    # ruamel.yaml comes with check-jsonschema. YAML 1.2 (its default), as GitHub reads it:
    # `on:` stays the string "on", not True as in PyYAML's YAML 1.1.
    try:
        from ruamel.yaml import YAML
    except ImportError:
        pytest.fail(MISSING)
    return YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))


def steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def test_there_is_a_workflow() -> None:
    assert WORKFLOWS, "no .github/workflows/*.yml or *.yaml"
    assert BUILD in WORKFLOWS


def test_workflows_match_the_github_schema() -> None:
    if importlib.util.find_spec("check_jsonschema") is None:
        pytest.fail(MISSING)
    proc = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", "--color", "never",
         *map(str, WORKFLOWS)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert proc.returncode == 0, f"check-jsonschema rejected a workflow:\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_workflow_prints_a_secret(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"\becho\b[^\n]*\$\{\{\s*secrets\.", text), f"{path.name} echoes a secret"
    for step in steps(load(path)):
        # Secrets reach scripts only through env:, never expanded into the script's text.
        assert "secrets." not in str(step.get("run", "")), f"{path.name}: step {step.get('name')!r} expands a secret in run:"


def test_build_mentions_runs_every_five_minutes_off_the_hour_and_by_hand() -> None:
    on = load(BUILD)["on"]
    assert [s["cron"] for s in on["schedule"]] == ["3-59/5 * * * *"]
    assert "workflow_dispatch" in on


def test_build_mentions_runs_never_overlap_and_may_only_write_its_pages() -> None:
    wf = load(BUILD)
    assert wf["concurrency"] == {"group": "build-mentions", "cancel-in-progress": False}
    assert wf["permissions"] == {"contents": "write"}  # the gh-pages branch, nothing else


def test_build_mentions_signs_as_the_device_from_repository_configuration() -> None:
    wf = load(BUILD)
    env: dict[str, str] = dict(wf.get("env", {}))
    for job in wf["jobs"].values():
        env.update(job.get("env", {}))
        for step in job.get("steps", []):
            env.update(step.get("env", {}))
    assert env["SKYHUB_HUB_URL"] == "${{ vars.SKYHUB_HUB_URL }}"
    assert env["SKYHUB_DEVICE"] == "${{ vars.SKYHUB_DEVICE || 'gha-builder' }}"
    assert env["SKYHUB_DEVICE_KEY"] == "${{ secrets.SKYHUB_DEVICE_KEY }}"
    runs = "\n".join(str(s.get("run", "")) for s in steps(wf))
    assert "skyhub db query --db requests --field status --key pending-build --json" in runs


# ---- the skyhub commands a workflow runs exist ------------------------------------------
def skyhub_calls(script: str) -> list[list[str]]:
    """The arguments of each `skyhub ...` command line in a shell script (roughly: enough for ours)."""
    calls = []
    for line in script.replace("\\\n", " ").splitlines():
        m = re.search(r"(?:^|[\s;&|(])skyhub\s+(.*)", line)
        if m is None or line.lstrip().startswith("#"):
            continue
        try:
            words = shlex.split(m.group(1), comments=True)
        except ValueError:
            continue
        args = []
        for word in words:
            if word in {";", "&&", "||", "|", ")"} or word.startswith(">"):
                break
            args.append(word)
        calls.append(args)
    return calls


def resolve(args: list[str]) -> str:
    """The command path, e.g. 'db query', after checking each word against the CLI's own command tree."""
    from hub.cli import main

    command: click.Command = main
    path: list[str] = []
    words = iter(args)
    for word in words:
        if word.startswith("-"):
            param = next((p for p in command.params if isinstance(p, click.Option) and word.split("=")[0] in p.opts), None)
            assert param is not None, f"`{shlex.join(['skyhub', *path])}` has no option {word}"
            if not param.is_flag and not param.count and "=" not in word:
                next(words, None)
            continue
        if not isinstance(command, click.Group):
            continue  # an argument
        sub = command.get_command(click.Context(command), word)  # the products' groups load when asked for
        assert sub is not None, f"`{shlex.join(['skyhub', *path])}` has no command {word!r}"
        command, path = sub, [*path, word]
    assert not isinstance(command, click.Group), f"`{shlex.join(['skyhub', *path])}` needs a subcommand"
    return " ".join(path)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflows_run_only_skyhub_commands_that_exist(path: Path) -> None:
    """A step that runs a command not built yet must be disabled (`if: false`) until it is."""
    for step in steps(load(path)):
        if step.get("if") is False:
            continue
        for args in skyhub_calls(str(step.get("run", ""))):
            resolve(args)


def test_the_builder_step_builds_with_the_device_key_and_publishes_the_pages() -> None:
    all_steps = steps(load(BUILD))
    builders = [s for s in all_steps if any(a[:2] == ["build", "run"] for a in skyhub_calls(str(s.get("run", ""))))]
    assert len(builders) == 1 and builders[0].get("if") is not False, "the builder step must run"
    env = builders[0].get("env", {})
    assert env.get("SKYHUB_DEVICE_KEY") == "${{ secrets.SKYHUB_DEVICE_KEY }}" and env.get("SKYHUB_BUILD_OUT") == "site"
    names = [s.get("name", "") for s in all_steps]
    assert names.index("Build pending mentions") < names.index("Publish the pages")
    assert load(BUILD)["permissions"] == {"contents": "write"}


def _check_step() -> str:
    (step,) = [s for s in steps(load(BUILD)) if str(s.get("name", "")).startswith("Check the device credential")]
    return str(step["run"])


@pytest.mark.parametrize("pages", ["", "site", "/builds", "OWNER.github.io/REPO"])
def test_the_first_step_refuses_to_run_without_a_pages_url(tmp_path: Path, pages: str) -> None:
    env = {"PATH": os.environ["PATH"], "SKYHUB_HUB_URL": "https://hub.example.org", "SKYHUB_DEVICE_KEY": "PEM",
           "SKYHUB_PAGES_URL": pages, "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
    run = subprocess.run(["bash", "-c", _check_step()], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 1 and "::error" in run.stdout and "SKYHUB_PAGES_URL is not an http(s) URL" in run.stdout


def test_the_first_step_passes_with_the_configuration_set(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "skyhub").write_text('#!/bin/sh\necho \'{"docs": [{"_id": "m1"}], "next": null}\'\n')
    (fake / "skyhub").chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ['PATH']}", "SKYHUB_HUB_URL": "https://hub.example.org", "SKYHUB_DEVICE_KEY": "PEM",
           "SKYHUB_DEVICE": "gha-builder", "SKYHUB_PAGES_URL": "https://shop.github.io/builds", "RUNNER_TEMP": str(tmp_path),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
    run = subprocess.run(["bash", "-c", _check_step()], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 pending build(s)" in run.stdout


def test_the_generator_refuses_a_base_url_that_is_not_a_link(tmp_path: Path) -> None:
    job = '{"_id": "requests:at://did:plc:x/app.bsky.feed.post/1", "text": "a timer"}'
    for base in ("", "site", "/builds"):
        run = subprocess.run([sys.executable, "-m", "bot.codegen", "--out", str(tmp_path), "--base-url", base], input=job,
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert run.returncode == 2 and "must be the http(s) URL where the built pages are served" in run.stderr
        assert run.stdout == "" and not any(tmp_path.iterdir())
