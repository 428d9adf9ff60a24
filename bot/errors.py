"""The bot's exceptions.

    BotError              root (a LedgerError: the CLI and API map it like the rest)   502, exit 1
    └── BuildError        the codegen command failed, timed out, or printed no result  500, exit 1

Bluesky's own failures are ``platforms.errors`` classes (``RateLimited``, ``AuthFailure``, ...).
"""

from __future__ import annotations

from ledger import LedgerError


class BotError(LedgerError):
    """Root of the bot's errors."""

    code = "bot"
    status = 502  # Bluesky or the build failed underneath the bot


class BuildError(BotError):
    """The codegen command failed."""

    code = "build_failed"
    status = 500
