"""The reference pages in docs/reference/ (settings, CLI, machines, ticks), generated from the
code so they cannot drift: ``.venv/bin/python docs/generate.py`` rewrites them, ``--check``
exits 1 naming the stale ones (a test runs it). Development tooling: not part of the package."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hub.app import build_rules, tick_help
from hub.cli import main as cli_main
from hub.settings import describe
from ledger import Machine

REFERENCE = Path(__file__).resolve().parent / "reference"


def settings_intro() -> str:
    """What the settings page says before the table."""
    return (
        "One settings object: defaults in `config/skyhub.toml` (shipped inside the package), then your own TOML file\n"
        "(`--config FILE`, `SKYHUB_CONFIG`, or `skyhub.toml` in the current folder when there is one), then\n"
        "`SKYHUB_*` environment variables (nested keys with `__`: `SKYHUB_FEED__LEASE=5s`), then the command line.\n"
        "Files merge key by key: a file that sets `[bot] handle` keeps every other `[bot]` default. Durations take\n"
        "`ms`, `s`, `m`, `h` or `d`. An unknown key in a file is an error that names it (and, for a setting that\n"
        "moved, its new name); a settings file that is not UTF-8 or not TOML is one line saying so.\n\n"
        "```toml\n# skyhub.toml (read from the folder you run skyhub in, or name it with --config)\n[bot]\n"
        "handle = \"ourbot.bsky.social\"\n\n[platforms]\nbluesky_pds = \"https://bsky.social\"\n```\n"
    )


def cli_intro() -> str:
    """What the CLI page says before the table."""
    return (
        "`skyhub <noun> <verb>`. The global options (`--config FILE`, `--database-url URL`, `--hub URL`, `--token`,\n"
        "`--device NAME`, `--key-file FILE`) go before or after the command: `skyhub status --hub URL` and\n"
        "`skyhub --hub URL status` are the same. `--as ACTOR` (env `SKYHUB_ACTOR`, default `user:$USER`) belongs to\n"
        "the commands that write locally. Results go to stdout (JSON, or a table where `--json` switches to JSON);\n"
        "errors go to stderr as one line, `skyhub: <code>: <reason>`. Exit codes: 0 ok, 1 error, 2 usage,\n"
        "3 conflict, 4 forbidden (or no valid credential), 5 not found. `skyhub --version` prints the version.\n"
    )


def machines_intro() -> str:
    """What the machines page says before the diagrams."""
    return (
        "Every machine the products declare, drawn from its declaration. An edge names the actors that may take it\n"
        "and, in brackets, the guards that must hold; the store checks both in the write's transaction.\n"
    )


def ticks_intro() -> str:
    """What the ticks page says before the table."""
    return (
        "`skyhub run` schedules every tick of the products it runs; `skyhub tick NAME` runs one once (for plain\n"
        "cron and tests). Intervals are the products' settings (`bot.ingest_every`, `publish.every`, ...).\n"
    )


def machine_markdown(m: Machine) -> str:
    """One machine as Markdown (``Machine.markdown``)."""
    return m.markdown()


def machines_section() -> str:
    """Every machine the products declare, drawn as ``machine_markdown`` draws one."""
    return "\n".join(machine_markdown(m) for m in build_rules().machines)


def commands(group: click.Group = cli_main, prefix: str = "skyhub") -> list[tuple[str, click.Command]]:
    """Every command, lazily loaded product groups included, as (path, command)."""
    out: list[tuple[str, click.Command]] = []
    ctx = click.Context(group, info_name=prefix)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None:  # pragma: no cover - list_commands names only what exists
            continue
        path = f"{prefix} {name}"
        if isinstance(cmd, click.Group):
            out += commands(cmd, path)
        else:
            out.append((path, cmd))
    return out


def example(cmd: click.Command) -> str | None:
    """The text after ``Example:`` in a command's help, or None when it has none."""
    for line in (cmd.help or "").splitlines():
        if line.strip().startswith("Example:"):
            return line.split("Example:", 1)[1].strip()
    return None


def cli_section() -> str:
    """The CLI reference: one row per command, with the first line of its help and its example."""
    rows = ["| command | what it does | example |", "| --- | --- | --- |"]
    for path, cmd in commands():
        summary = (cmd.help or "").strip().splitlines()[0]
        rows.append(f"| `{path}` | {summary} | `{example(cmd) or ''}` |".replace("|`", "| `"))
    return "\n".join(rows) + "\n"


def settings_section() -> str:
    """The settings table: every setting's name, environment variable, default and meaning (its docstring)."""
    rows = ["| setting | environment variable | default | meaning |", "| --- | --- | --- | --- |"]
    for dotted, shown, env, meaning in describe():
        rows.append(f"| `{dotted}` | `{env}` | {shown} | {meaning.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def ticks_section() -> str:
    """The ticks table: every tick a hub can run, and what it does."""
    rows = ["| tick | what it does |", "| --- | --- |"]
    rows += [f"| `{name}` | {what} |" for name, what in sorted(tick_help().items())]
    return "\n".join(rows) + "\n"


HEADER = "<!-- Generated by docs/generate.py from the code: do not edit by hand (a test fails when it is stale). -->\n\n"
PAGES = {
    "settings.md": ("# Settings", settings_intro, settings_section),
    "cli.md": ("# Commands", cli_intro, cli_section),
    "machines.md": ("# State machines", machines_intro, machines_section),
    "ticks.md": ("# Ticks", ticks_intro, ticks_section),
}


def pages() -> dict[str, str]:
    """Every reference page's file name and text, made afresh."""
    return {name: f"{HEADER}{title}\n\n{intro()}\n{make()}" for name, (title, intro, make) in PAGES.items()}


def stale() -> list[str]:
    """The reference pages whose file differs from what the code makes now."""
    return [name for name, text in pages().items()
            if not (REFERENCE / name).exists() or (REFERENCE / name).read_text() != text]


def main(argv: list[str]) -> int:
    """Write the pages (or, with --check, name the stale ones and exit 1)."""
    if "--check" in argv:
        found = stale()
        for name in found:
            print(f"docs/reference/{name} is stale: run .venv/bin/python docs/generate.py", file=sys.stderr)
        return 1 if found else 0
    REFERENCE.mkdir(exist_ok=True)
    for name, text in pages().items():
        (REFERENCE / name).write_text(text)
    print(f"docs/reference: {', '.join(PAGES)} written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
