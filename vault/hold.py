"""Holding work whose credential needs a person: visible on the work document, not a
failure, not an attempt; released by the worker once the credential is usable again."""

from __future__ import annotations

from typing import Any

from ledger import Ledger


def hold(db: Ledger, dbname: str, doc: dict[str, Any], credential: str, reason: str) -> dict[str, Any]:
    """Mark ``doc`` as held for ``credential`` (a no-op if it already is, for the same reason)."""
    current = doc.get("held") or {}
    if current.get("credential") == credential and current.get("reason") == reason:
        return doc
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body["held"] = {"credential": credential, "reason": reason, "since": current.get("since") or db.now()}
    return db.put(dbname, body, doc["_id"], if_rev=doc["_rev"])


def release(db: Ledger, dbname: str, doc: dict[str, Any]) -> dict[str, Any]:
    """Clear the hold (the work goes on in the same write or the next)."""
    if "held" not in doc:
        return doc
    body = {k: v for k, v in doc.items() if not k.startswith("_") and k != "held"}
    return db.put(dbname, body, doc["_id"], if_rev=doc["_rev"])
