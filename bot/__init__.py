"""Mention builds: Bluesky mentions in, builds out, replies in the thread.

Imports the ledger and the vault, never the publishers."""

from .build import Builder, BuildSettings
from .errors import BotError, BuildError, RateLimited, SessionInvalid
from .guardrails import Guardrails
from .ingest import Ingester, mention_id
from .machine import DB, MENTIONS, STATE_DB
from .reply import Replier, permalink, reply_text

__all__ = [
    "DB", "MENTIONS", "STATE_DB", "BotError", "BuildError", "BuildSettings", "Builder", "Guardrails", "Ingester",
    "RateLimited", "Replier", "SessionInvalid", "mention_id", "permalink", "reply_text",
]
