"""Generated parts of the README (the state machine diagrams, the CLI reference, the settings
and the tick names), so the docs cannot drift from the code. ``python -m hub.docs`` rewrites
them; a test fails when they are stale."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from ledger import Machine

from .app import build_rules, tick_help
from .cli import main as cli_main
from .settings import describe

README = Path(__file__).resolve().parent.parent / "README.md"


def machine_markdown(m: Machine) -> str:
    """One machine as Markdown: a line naming it, then its diagram in a mermaid fence."""
    counted = any(g.name.startswith(("claim", "attempts")) for e in m.edges for g in e.guards)
    limit = f" (at most {m.max_attempts} attempts)" if counted else ""
    return f"**{m.db}** documents with `{m.kind_field}: \"{m.kind}\"`{limit}:\n\n```mermaid\n{m.mermaid()}\n```\n"


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


SECTIONS = {"machines": machines_section, "cli": cli_section, "settings": settings_section, "ticks": ticks_section}


def render(text: str) -> str:
    """The README ``text`` with every generated section made afresh; SystemExit when a section's
    ``<!-- BEGIN name -->`` ... ``<!-- END name -->`` markers are missing."""
    for name, make in SECTIONS.items():
        pattern = re.compile(rf"(<!-- BEGIN {name} -->\n)(.*?)(<!-- END {name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"README.md has no <!-- BEGIN {name} --> ... <!-- END {name} --> block")
        body = make()
        text = pattern.sub(lambda m: m.group(1) + body + m.group(3), text)  # noqa: B023 - used at once
    return text


if __name__ == "__main__":
    current = README.read_text()
    fresh = render(current)
    if "--check" in sys.argv:
        sys.exit(0 if fresh == current else 1)
    README.write_text(fresh)
    print("README.md regenerated")
