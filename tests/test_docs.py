"""Docs that cannot drift: the generated reference pages, examples in every command's help, the
two-command quickstart that CI runs, a README a newcomer can read, and links that lead somewhere."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from hub.cli import main

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("generate", ROOT / "docs" / "generate.py")  # development tooling, not a package
docs = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(docs)  # type: ignore[union-attr]
MARKDOWN = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def test_the_reference_pages_are_fresh():
    check = subprocess.run([sys.executable, str(ROOT / "docs" / "generate.py"), "--check"], capture_output=True, text=True,
                           cwd=ROOT, timeout=120)
    assert check.returncode == 0, check.stderr


def test_the_readme_is_short_and_links_to_every_guide():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    for page in ("docs/guides/engine.md", "docs/guides/operating.md", "docs/guides/mention-builds.md", "docs/guides/publishing.md",
                 "docs/guides/vault.md", "docs/architecture.md", "docs/reference/settings.md", "docs/reference/cli.md",
                 "docs/reference/machines.md", "docs/reference/ticks.md", "docs/benchmarks.md"):
        assert f"({page}" in readme, f"the README does not link to {page}"


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(page):
    text = page.read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"


@pytest.mark.parametrize("path,cmd", docs.commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_has_an_example_that_parses(path, cmd):
    example = docs.example(cmd)
    assert example, f"{path} has no Example: in its help"
    words = shlex.split(example.split(" > ")[0])
    assert " ".join(words[: len(path.split())]) == path
    found: click.Command = main
    rest = words[1:]
    while isinstance(found, click.Group):
        found, rest = found.commands[rest[0]], rest[1:]
    assert found is cmd
    found.make_context(path, rest)  # the options and arguments parse


def test_the_quickstart_has_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", quickstart, re.S)
    commands = [line.strip() for b in blocks for line in b.splitlines() if line.strip()]
    assert commands == ["./dev run", "./dev test"]
    ci = [l.strip() for l in (ROOT / ".ci" / "run").read_text().splitlines() if l.strip() and not l.startswith("#")]
    assert "./dev test" in ci


def test_every_setting_is_documented():
    from hub.settings import describe

    rows = describe()
    assert {"bot.handle", "bot.ingest_every", "bot.reply_every", "platforms.bluesky_pds", "vault.every"} <= {r[0] for r in rows}
    undocumented = [name for name, _, _, meaning in rows if not meaning]
    assert not undocumented, f"settings without a docstring (the README's table needs one): {undocumented}"


def test_the_bluesky_pds_is_one_setting_and_the_old_names_say_where_it_went(tmp_path, monkeypatch):
    from hub.settings import load_settings
    from ledger import Usage

    monkeypatch.setenv("SKYHUB_PLATFORMS__BLUESKY_PDS", "http://127.0.0.1:2583")
    assert load_settings().platforms.bluesky_pds == "http://127.0.0.1:2583"
    for old in ("SKYHUB_BOT__PDS", "SKYHUB_VAULT__BLUESKY_PDS"):
        monkeypatch.setenv(old, "http://elsewhere")
        with pytest.raises(Usage, match="is now platforms.bluesky_pds"):
            load_settings()
        monkeypatch.delenv(old)
    mine = tmp_path / "mine.toml"
    mine.write_text('[bot]\nhandle = "ourbot.test"\n')
    merged = load_settings(str(mine))
    assert merged.section("bot").handle == "ourbot.test" and merged.section("bot").reply_template == "Your {title} is ready: {url}"
    # the layers merge key by key: a later file that sets one key of a table keeps the earlier file's other keys
    from hub.settings import settings_model, toml_input

    layers = (("defaults", '[bot]\nreply_template = "Built: {url}"\nping = 1\n'), ("mine", '[bot]\nhandle = "ourbot.test"\n'))
    assert toml_input(settings_model(), layers)["bot"] == {"reply_template": "Built: {url}", "ping": 1, "handle": "ourbot.test"}


def test_the_database_url_help_shows_a_relative_and_an_absolute_sqlite_path():
    help_text = main.get_help(click.Context(main, info_name="skyhub"))
    assert "sqlite:///skyhub.db" in help_text and "sqlite:////var/lib/skyhub/skyhub.db" in help_text
