"""The GitHub Actions workflows in .github/workflows: each validates offline against the GitHub
workflow JSON schema (vendored by check-jsonschema), and the build-mentions lane keeps its
schedule, its concurrency group, its secret out of the logs, and uses only skyhub commands that
exist. check-jsonschema missing is a failure, never a skip: install skyhub[test]."""

from __future__ import annotations

import importlib.util
import json
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


# ---- the language model behind the builder -----------------------------------------------------
def _first_step_env(tmp_path: Path, variables: dict[str, str], key: str = "") -> dict[str, str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "skyhub").write_text('#!/bin/sh\necho \'{"docs": [], "next": null}\'\n')
    (fake / "skyhub").chmod(0o755)
    (tmp_path / "github_env").write_text("")
    return {"PATH": f"{fake}:{os.environ['PATH']}", "SKYHUB_HUB_URL": "https://hub.example.org", "SKYHUB_DEVICE_KEY": "PEM",
            "SKYHUB_DEVICE": "gha-builder", "SKYHUB_PAGES_URL": "https://shop.github.io/builds", "RUNNER_TEMP": str(tmp_path),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "GITHUB_ENV": str(tmp_path / "github_env"),
            "REPOSITORY_VARIABLES": json.dumps({"SKYHUB_HUB_URL": "https://hub.example.org", **variables}), "SKYHUB_CODEGEN_API_KEY": key}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_first_step_refuses_a_language_model_without_its_key_in_one_line(tmp_path: Path, provider: str) -> None:
    env = _first_step_env(tmp_path, {"SKYHUB_CODEGEN__PROVIDER": provider, "SKYHUB_CODEGEN__MODEL": "m"})
    run = subprocess.run(["bash", "-c", _check_step()], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 1
    assert run.stdout.strip() == (f"::error title=build-mentions::the repository variable SKYHUB_CODEGEN__PROVIDER is {provider}, which "
                                  "needs the repository secret SKYHUB_CODEGEN_API_KEY (the provider's API key), and it is not set")


def test_the_first_step_hands_the_codegen_variables_on_and_never_prints_the_key(tmp_path: Path) -> None:
    env = _first_step_env(tmp_path, {"SKYHUB_CODEGEN__PROVIDER": "anthropic", "SKYHUB_CODEGEN__MODEL": "claude-x",
                                     "SKYHUB_CODEGEN__MAX_TOKENS": "", "SKYHUB_CODEGEN__DAILY_TOKEN_BUDGET": "200000"},
                          key="sk-ant-secret-value-99")
    run = subprocess.run(["bash", "-c", _check_step()], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "sk-ant-secret-value-99" not in run.stdout + run.stderr
    # an unset variable ("") keeps skyhub's default; only SKYHUB_CODEGEN__* variables are handed on
    assert (tmp_path / "github_env").read_text().splitlines() == [
        "SKYHUB_CODEGEN__DAILY_TOKEN_BUDGET=200000", "SKYHUB_CODEGEN__MODEL=claude-x", "SKYHUB_CODEGEN__PROVIDER=anthropic"]


def test_the_first_step_refuses_a_provider_that_does_not_exist(tmp_path: Path) -> None:
    env = _first_step_env(tmp_path, {"SKYHUB_CODEGEN__PROVIDER": "gemini"}, key="k")
    run = subprocess.run(["bash", "-c", _check_step()], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 1 and "SKYHUB_CODEGEN__PROVIDER is 'gemini': use templates, openai or anthropic" in run.stdout


def test_the_codegen_key_reaches_only_the_steps_that_need_it_and_the_settings_are_documented() -> None:
    from bot.codegen.settings import CodegenSettings

    wf = load(BUILD)
    with_key = [s["name"] for s in steps(wf) if "SKYHUB_CODEGEN_API_KEY" in s.get("env", {})]
    assert with_key == ["Check the device credential (list pending builds)", "Build pending mentions"]
    assert all(s["env"]["SKYHUB_CODEGEN_API_KEY"] == "${{ secrets.SKYHUB_CODEGEN_API_KEY }}" for s in steps(wf) if s["name"] in with_key)
    header = BUILD.read_text(encoding="utf-8").split("\nname:", 1)[0]
    assert "secret   SKYHUB_CODEGEN_API_KEY" in header
    documented = set(re.findall(r"SKYHUB_CODEGEN__([A-Z_]+)", header))
    assert {"PROVIDER", "MODEL", "BASE_URL", "MAX_TOKENS", "DAILY_TOKEN_BUDGET"} <= documented
    assert {name.lower() for name in documented} <= set(CodegenSettings.model_fields)
    (install,) = [s for s in steps(wf) if s.get("name") == "Install skyhub"]
    assert '".[browser]"' in install["run"]  # Playwright, for the load check in the runner's Chrome
