"""The ledger's exceptions: the root of every error skyhub raises on purpose.

    LedgerError             root: anything the engine refuses or cannot do       500, exit 1
    ├── Invalid             the input is not a valid document, name or query      400, exit 1
    │   ├── TooLarge        the document is over the size limit                  413, exit 1
    │   └── Usage           the command line or request is used wrongly          400, exit 2
    ├── Conflict            the write lost a race: stale revision, or the id exists  409, exit 3
    ├── Forbidden           the machine's rules refuse this write for this actor  403, exit 4
    ├── NotFound            no such document                                      404, exit 5
    └── BackendError        the database itself failed (connection, disk, ...)    503, exit 1

Other packages hang their own roots under ``LedgerError`` (``VaultError``, ``PlatformError``,
``BotError``, ``PublishError``, ``Unauthorized``, ``InvalidMachine``), so one tree says for
every error its stable ``code`` (used by the CLI, the API and the remote backend), the HTTP
``status`` the API answers with and the ``exit_code`` the CLI ends with. Nothing maps codes
by hand: ``error_class(code)`` finds a class by its code, and a test walks the whole tree.

Each error carries a ``reason``: one sentence a person can act on. Foreign exceptions
(sqlite3, psycopg, httpx, keyring) are translated once, in the module that calls them.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CONFLICT, EXIT_FORBIDDEN, EXIT_NOT_FOUND = 0, 1, 2, 3, 4, 5

_BY_CODE: dict[str, type[LedgerError]] = {}


class LedgerError(Exception):
    """Root of every error the ledger raises."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 500
    exit_code: ClassVar[int] = EXIT_ERROR

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:  # a class that names its own code is the class for that code
            _BY_CODE.setdefault(cls.code, cls)

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_BY_CODE[LedgerError.code] = LedgerError


def error_class(code: str) -> type[LedgerError] | None:
    """The class that declares ``code``, if one is loaded."""
    return _BY_CODE.get(code)


def error_classes() -> list[type[LedgerError]]:
    """Every loaded class of the tree, the root first."""
    out: list[type[LedgerError]] = []
    todo: list[type[LedgerError]] = [LedgerError]
    while todo:
        cls = todo.pop(0)
        if cls not in out:
            out.append(cls)
            todo.extend(cls.__subclasses__())
    return out


class Invalid(LedgerError):
    """The input is not a valid document, database name, field or cursor."""

    code = "invalid"
    status = 400


class TooLarge(Invalid):
    """The document is larger than the store accepts."""

    code = "too_large"
    status = 413


class Usage(Invalid):
    """A command or request is used wrongly (unknown option, malformed JSON, missing credential)."""

    code = "usage"
    status = 400
    exit_code = EXIT_USAGE


class Conflict(LedgerError):
    """The write lost a race: the revision is stale, or the id already exists."""

    code = "conflict"
    status = 409
    exit_code = EXIT_CONFLICT


class Forbidden(LedgerError):
    """The machine's rules refuse this write for this actor."""

    code = "forbidden"
    status = 403
    exit_code = EXIT_FORBIDDEN


class NotFound(LedgerError):
    """No document with that id (or it was deleted)."""

    code = "not_found"
    status = 404
    exit_code = EXIT_NOT_FOUND


class BackendError(LedgerError):
    """The database failed underneath the ledger (connection lost, disk full, ...)."""

    code = "backend"
    status = 503
