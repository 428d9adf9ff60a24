"""What mention builds add to a hub: the mention machine, the ingest and reply ticks (once
``bot.handle`` is set), and the builder lane's CLI group.

Light to import: atproto comes in only with the ticks, when the bot is configured.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger import ADMIN, Interval, Policy, Product, Section, Tick, tick, user

from .machine import DB, MENTIONS, STATE_DB


class BotSettings(Section):
    """``[bot]``: mention builds."""

    handle: str = ""
    """the bot's Bluesky account; ingest and reply run once it is set (its app password goes in the vault)"""
    ingest_every: Interval = 30.0
    """how often the ingest tick reads new mentions"""
    reply_every: Interval = 30.0
    """how often the reply tick answers built mentions"""
    guardrails: str = ""
    """a guardrails file replacing the shipped `config/guardrails.toml`"""
    reply_template: str = "Your build is ready: {url}"
    """the reply's text; `{url}` becomes a link"""
    page_wait: Interval = 1800.0
    """the reply waits for the built page to answer (GitHub Pages serves a push a minute or more later); past this it is an error"""
    codegen: str = "python -m bot.codegen"
    """the builder lane's command: gets the mention as JSON on stdin, prints `{"url": ...}` on its last line"""
    build_lease: Interval = 900.0
    """how long a build is held before the sweep takes it back"""
    build_timeout: Interval = 600.0
    """the codegen command's time limit (shorter than the lease)"""


def _ticks(section: BotSettings) -> Sequence[Tick]:
    if not section.handle:
        return []
    from .ingest import ingest
    from .reply import reply

    return [Tick("ingest", section.ingest_every, ingest, settings=section), Tick("reply", section.reply_every, reply, settings=section)]


BOT = Product(
    "bot", "Mention builds: Bluesky mentions in, pages built by the builder lane, replies in the thread.",
    machines=[MENTIONS],
    policies=[Policy(STATE_DB, free=(tick("ingest"), user(), ADMIN))],
    indexes=[(DB, "capDay")],
    settings=BotSettings,
    ticks=_ticks,
    tick_help={
        "ingest": "turns new mentions of the bot into pending-build or skipped documents (runs once bot.handle is set)",
        "reply": "replies in the thread once a build's page is up, and records the permalink (runs once bot.handle is set)",
    },
    cli={"build": "bot.cli:build_group"},
)

PRODUCTS = (BOT,)
