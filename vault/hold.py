"""Holding work whose credential needs a person: visible on the work document, not a
failure, not an attempt; released by the worker once the credential is usable again.

A hold is structured, so each place says it its own way: ``held`` on the work document is

    {"credential": "bluesky:shop.bsky.social",          the vault id the work waits for
     "reason": "no credential ...: paste one with `skyhub vault put bluesky shop.bsky.social`",
                                                          the sentence for the CLI (it may name a command)
     "problem": "no credential for this account in the vault",
                                                          what is wrong, without the remedy: what pages show
     "fix": {"platform": "bluesky", "account": "shop.bsky.social"},
                                                          what to paste: pages link the credentials page's
                                                          paste form, filled in (``paste_url``)
     "since": 1764460741000}
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from ledger import Ledger

from .credentials import PLATFORMS

PASTE_PAGE = "/console/credentials"  # vault/pages.py: its paste form opens filled in from these parameters


def fix_for(credential: str) -> dict[str, str] | None:
    """What a person pastes to release work held for ``credential`` (a vault id, ``platform:account``)."""
    platform, _, account = credential.partition(":")
    return {"platform": platform, "account": account} if platform in PLATFORMS and account else None


def held_for(credential: str, reason: str, since: int, *, problem: str | None = None) -> dict[str, Any]:
    """The ``held`` field of work waiting for ``credential`` (see the module docstring); ``problem``
    is ``reason`` when the reason names no command."""
    held: dict[str, Any] = {"credential": credential, "reason": reason, "problem": problem or reason, "since": since}
    fix = fix_for(credential)
    if fix is not None:
        held["fix"] = fix
    return held


def paste_url(platform: str, account: str) -> str:
    """The console's paste form, filled in with ``platform`` and ``account`` and focused (no ``#paste``: a
    browser does not move the focus to a field on a page opened at a fragment)."""
    return f"{PASTE_PAGE}?{urlencode({'platform': platform, 'account': account})}"


def hold(db: Ledger, dbname: str, doc: dict[str, Any], credential: str, reason: str, *, problem: str | None = None) -> dict[str, Any]:
    """Mark ``doc`` as held for ``credential`` (a no-op if it already is, the same way)."""
    current = doc["held"] if isinstance(doc.get("held"), dict) else {}
    held = held_for(credential, reason, current.get("since") or db.now(), problem=problem)
    if current == held:
        return doc
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body["held"] = held
    return db.put(dbname, body, doc["_id"], if_rev=doc["_rev"])


def release(db: Ledger, dbname: str, doc: dict[str, Any]) -> dict[str, Any]:
    """Clear the hold (the work goes on in the same write or the next)."""
    if "held" not in doc:
        return doc
    body = {k: v for k, v in doc.items() if not k.startswith("_") and k != "held"}
    return db.put(dbname, body, doc["_id"], if_rev=doc["_rev"])
