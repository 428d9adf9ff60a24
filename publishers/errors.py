"""The publishers' exceptions.

    PublishError            root (a LedgerError: the CLI and API map it like the rest)   502, exit 1
    ├── PostInvalid         the post breaks a platform's rule: nothing was written       422, exit 2
    ├── ImportInvalid       an import's file cannot be read as a calendar: nothing written 422, exit 2
    └── ContentProblem      an image cannot be fetched or read, the post replied to is gone 502, exit 1

Platform failures are ``platforms.errors`` classes; these are the publishers' own.
"""

from __future__ import annotations

from ledger import LedgerError
from ledger.errors import EXIT_USAGE


class PublishError(LedgerError):
    """Root of the publishers' errors."""

    code = "publish"
    status = 502


class PostInvalid(PublishError):
    """The post breaks a platform's rule (one sentence per problem); nothing was written or sent."""

    code = "invalid_post"
    status = 422
    exit_code = EXIT_USAGE


class ImportInvalid(PublishError):
    """An import's file is not a content calendar (not CSV or JSON, a column that is not one, too big);
    nothing was written. A bad row is not this: it is reported with the others."""

    code = "invalid_import"
    status = 422
    exit_code = EXIT_USAGE


class ContentProblem(PublishError):
    """The post cannot be made as queued: an image cannot be fetched or read, or the post it
    replies to is gone. ``permanent`` tells a content problem from one worth trying again."""

    code = "content_problem"

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.permanent = permanent
