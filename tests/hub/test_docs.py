"""Docs that cannot drift: generated README sections, examples in every command's help, and
the two-command quickstart that CI runs."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from hub import docs
from hub.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_readme_generated_sections_are_fresh():
    text = docs.README.read_text()
    assert docs.render(text) == text, "README.md is stale: run `.venv/bin/python -m hub.docs`"


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
    assert merged.section("bot").handle == "ourbot.test" and merged.section("bot").reply_template == "Your build is ready: {url}"
    # the layers merge key by key: a later file that sets one key of a table keeps the earlier file's other keys
    from hub.settings import _MergedToml, settings_model

    layers = (("defaults", '[bot]\nreply_template = "Built: {url}"\nping = 1\n'), ("mine", '[bot]\nhandle = "ourbot.test"\n'))
    assert _MergedToml(settings_model(), layers)()["bot"] == {"reply_template": "Built: {url}", "ping": 1, "handle": "ourbot.test"}


def test_the_database_url_help_shows_a_relative_and_an_absolute_sqlite_path():
    help_text = main.get_help(click.Context(main, info_name="skyhub"))
    assert "sqlite:///skyhub.db" in help_text and "sqlite:////var/lib/skyhub/skyhub.db" in help_text
