"""The bot's exceptions.

    BotError              root (a LedgerError: the CLI and API map it like the rest)   502, exit 1
    └── BuildError        the codegen command failed, timed out, or printed no result  500, exit 1
        └── GenerationFailed  the built-in generator made no page it could publish     500, exit 1
                              (refused, filtered, out of time, the page refused twice)

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


class GenerationFailed(BuildError):
    """The built-in generator made no page it could publish; ``tokens_in``/``tokens_out`` say what it spent trying."""

    code = "generation_failed"

    def __init__(self, reason: str, *, tokens_in: int = 0, tokens_out: int = 0) -> None:
        super().__init__(reason)
        self.tokens_in = tokens_in
        self.tokens_out = tokens_out
