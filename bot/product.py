"""What mention builds add to a hub: the mention machine and the builder's token budget, the
ingest and reply ticks (once ``bot.handle`` is set), the builder lane's CLI group, the budget's
item for "needs a person", and the built-in generator's settings section (``[codegen]``).

Light to import: the Bluesky adapter comes in only with the ticks, when the bot is configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger import ADMIN, Policy, Product, Tick, tick, user

from .machine import DB, MENTIONS, STATE_DB, TOKEN_BUDGET

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
    machines=[MENTIONS, TOKEN_BUDGET],
    policies=[Policy(STATE_DB, free=(tick("ingest"), user(), ADMIN))],
    indexes=[(DB, "capDay")],
    settings="bot.settings:BotSettings",
    ticks=_ticks,
    tick_help={
        "ingest": "turns new mentions of the bot into pending-build or skipped documents (runs once bot.handle is set)",
        "reply": "replies in the thread once a build's page is up, and records the permalink (runs once bot.handle is set)",
    },
    cli={"build": "bot.cli:build_group"},
    services="bot.services:offered",
    pages="bot.pages:mention_pages",
    nav=(("/console/mentions", "Mention builds"),),
    templates="bot",
    metrics="bot.metrics:metrics",
)

CODEGEN = Product(
    "codegen", "The built-in generator behind bot.codegen: templates (offline) or a language model, the page checks, the daily token budget.",
    settings="bot.codegen.settings:CodegenSettings",
)

PRODUCTS = (BOT, CODEGEN)
