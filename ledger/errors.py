"""The ledger's exceptions.

    LedgerError             root: anything the engine refuses or cannot do
    ├── Invalid             the input is not a valid document, name or query
    │   └── TooLarge        the document is over the size limit
    ├── Conflict            the write lost a race: stale revision, or the id exists
    ├── Forbidden           the machine's rules refuse this write for this actor
    ├── NotFound            no such document
    └── BackendError        the database itself failed (connection, disk, ...)

Each carries a ``code`` (a stable string used by the CLI and the API) and a ``reason``
(one sentence a person can act on). Foreign exceptions (sqlite3, psycopg) are translated
once, in the backend that calls them.
"""

from __future__ import annotations


class LedgerError(Exception):
    """Root of every error the ledger raises."""

    code = "error"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Invalid(LedgerError):
    """The input is not a valid document, database name, field or cursor."""

    code = "invalid"


class TooLarge(Invalid):
    """The document is larger than the store accepts."""

    code = "too_large"


class Conflict(LedgerError):
    """The write lost a race: the revision is stale, or the id already exists."""

    code = "conflict"


class Forbidden(LedgerError):
    """The machine's rules refuse this write for this actor."""

    code = "forbidden"


class NotFound(LedgerError):
    """No document with that id (or it was deleted)."""

    code = "not_found"


class BackendError(LedgerError):
    """The database failed underneath the ledger (connection lost, disk full, ...)."""

    code = "backend"
