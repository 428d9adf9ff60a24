"""One error tree: every class says its code, HTTP status and exit code, and the API, the CLI
and the remote backend all read them from the class (no hand-written tables)."""

from __future__ import annotations

import importlib

import pytest

from hub.products import products
from ledger.errors import EXIT_CONFLICT, EXIT_FORBIDDEN, EXIT_NOT_FOUND, EXIT_USAGE, LedgerError, error_class, error_classes

# every package that raises on purpose; loading them puts their classes into the tree
for module in ("ledger.machine", "vault.errors", "bot.errors", "hub.auth", "platforms.errors", "publishers.errors"):
    importlib.import_module(module)
products()


def test_every_class_declares_a_code_a_status_and_an_exit_code_of_its_own_meaning():
    classes = error_classes()
    assert len(classes) > 12
    codes: dict[str, type] = {}
    for cls in classes:
        assert cls.__doc__ and cls.__doc__.strip(), f"{cls.__name__} needs a one-line docstring"
        assert "code" in cls.__dict__, f"{cls.__name__} inherits its code: give it its own"
        assert cls.code not in codes, f"{cls.__name__} and {codes[cls.code].__name__} share the code {cls.code!r}"
        codes[cls.code] = cls
        assert 400 <= cls.status <= 599, cls
        assert cls.exit_code in (1, EXIT_USAGE, EXIT_CONFLICT, EXIT_FORBIDDEN, EXIT_NOT_FOUND), cls
        assert error_class(cls.code) is cls
        if cls.status < 500:
            assert cls.exit_code != 0


@pytest.mark.parametrize("code,status,exit_code", [
    ("invalid", 400, 1), ("too_large", 413, 1), ("usage", 400, 2), ("conflict", 409, 3), ("forbidden", 403, 4),
    ("not_found", 404, 5), ("backend", 503, 1), ("unauthorized", 401, 4), ("not_revealable", 403, 4),
    ("needs_reauth", 409, 1), ("no_master_key", 503, 1), ("invalid_machine", 500, 1), ("platform_rate_limited", 429, 1), ("platform_auth", 502, 1), ("invalid_post", 422, 2),
])
def test_the_documented_statuses_and_exit_codes(code, status, exit_code):
    cls = error_class(code)
    assert cls is not None and (cls.status, cls.exit_code) == (status, exit_code)


def test_a_refusal_to_reveal_is_a_forbidden():
    from ledger import Forbidden
    from vault import NotRevealable

    assert issubclass(NotRevealable, Forbidden) and issubclass(NotRevealable, LedgerError)


def test_the_remote_backend_rebuilds_the_same_class_from_a_hub_answer():
    import httpx

    from hub.remote import RemoteStore, TokenAuth

    for cls in error_classes():
        body = {"error": cls.code, "reason": "because"}
        transport = httpx.MockTransport(lambda request, cls=cls, body=body: httpx.Response(cls.status, json=body))
        remote = RemoteStore("http://hub.test", TokenAuth("skh_000000000000_" + "x" * 24), attempts=1, transport=transport)
        with pytest.raises(LedgerError) as err:
            remote.get("notes", "n")
        assert type(err.value) is cls and err.value.reason == "because" and err.value.code == cls.code
        remote.close()
