"""What mention builds add to a hub: the mention machine, the ingest and reply ticks (once
``bot.handle`` is set), and the builder lane's CLI group.

Light to import: atproto comes in only with the ticks, when the bot is configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger import ADMIN, Policy, Product, Tick, tick, user

from .machine import DB, MENTIONS, STATE_DB

if TYPE_CHECKING:
    from .settings import BotSettings


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
    settings="bot.settings:BotSettings",
    ticks=_ticks,
    tick_help={
        "ingest": "turns new mentions of the bot into pending-build or skipped documents (runs once bot.handle is set)",
        "reply": "replies in the thread once a build's page is up, and records the permalink (runs once bot.handle is set)",
    },
    cli={"build": "bot.cli:build_group"},
    pages="bot.pages:mention_pages",
    nav=(("/console/mentions", "Mention builds"),),
    templates="bot",
    metrics="bot.metrics:metrics",
)

PRODUCTS = (BOT,)
