"""The bot's exceptions.

    BotError              root (a LedgerError: the CLI and API map it like the rest)
    ├── RateLimited       429: wait until ``reset_at`` (epoch ms); not an attempt
    ├── SessionInvalid    ExpiredToken / InvalidToken: the vault must refresh or a person re-auth
    └── BuildError        the codegen command failed, timed out, or printed no result
"""

from __future__ import annotations

from ledger import LedgerError


class BotError(LedgerError):
    """Root of the bot's errors."""

    code = "bot"
    status = 502  # Bluesky or the build failed underneath the bot


class RateLimited(BotError):
    """Bluesky said 429; try again after ``reset_at``."""

    code = "rate_limited"
    status = 429

    def __init__(self, reason: str, reset_at: int | None) -> None:
        super().__init__(reason)
        self.reset_at = reset_at


class SessionInvalid(BotError):
    """The session was refused (ExpiredToken / InvalidToken)."""

    code = "session_invalid"


class BuildError(BotError):
    """The codegen command failed."""

    code = "build_failed"
    status = 500
