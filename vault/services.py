"""What the vault offers a hub (``VAULT.services``): the vault as each actor sees it
(``ctx.vault``), its part of ``/health``, the line the hub says at start when there is no key
yet, and its items for "needs a person" (no key while credentials wait for one; credentials
that NEED RE-AUTH). The probes add failing lanes the same way (``probe_offered``)."""

from __future__ import annotations

from typing import Any

from ledger import LedgerError, NotFound, Offered, Store

from .credentials import DB, Vault, public
from .hold import paste_url
from .keys import KeyLoader
from .probe import DB as PROBES

KEY_RANK, REAUTH_RANK, PROBE_RANK = 0, 1, 9  # no key blocks everything; a failing probe is looked at last


def offered(settings: Any) -> Offered:
    """The vault's services for a hub with these settings (one key loader, shared)."""
    key = KeyLoader(settings.section("vault").key_file)

    def health(store: Store) -> dict[str, Any]:
        problem = key.available()
        if problem is None:
            return {"ok": True, "key": True}
        credentials = 0
        try:
            credentials = len(store.query(DB, "kind", "credential", limit=1).docs)
        except LedgerError:
            pass
        # without credentials nothing needs the key yet; with one, the vault tick fails every run
        return {"ok": credentials == 0, "key": False, "reason": problem}

    def notice() -> str | None:
        problem = key.available()
        if problem is None:
            return None
        how = problem.removeprefix("no vault key: ")
        return ("the vault has no key yet; everything runs, but credentials (the bot's account, publishing accounts) "
                f"cannot be stored or used until it has one: {how}")

    def attention(store: Store, now: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        page = store.query(DB, "kind", "credential", 200)
        problem = key.available()
        if problem and page.docs:
            out.append({"what": "key", "title": "the vault has no master key", "reason": problem, "rank": KEY_RANK})
        for doc in page.docs:
            meta = public(doc)
            if meta.get("needsReauth") or meta.get("status") == "needs-reauth":
                out.append({"what": "needs-reauth", "title": f"{meta['id']} NEEDS RE-AUTH",
                            "reason": str(meta.get("lastError") or "the platform refused it"), "db": DB, "id": meta["id"],
                            "status": str(meta.get("status")), "since": meta.get("refreshedAt"), "rank": REAUTH_RANK,
                            "action": paste_url(str(meta["platform"]), str(meta["account"])), "actionLabel": "Paste a new secret",
                            "fix": {"platform": meta["platform"], "account": meta["account"]}})
        return out

    return Offered(secrets=lambda db: Vault(db, key), health=health, notice=notice, attention=attention)


def probe_offered(settings: Any) -> Offered:
    """The probes' items for "needs a person": every configured lane whose last probe failed."""
    lanes = sorted(dict(settings.section("probe").lanes))

    def attention(store: Store, now: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for lane in lanes:
            try:
                doc = store.get(PROBES, lane)
            except (NotFound, LedgerError):
                continue
            if doc.get("ok") is False:
                out.append({"what": "probe-failing", "title": f"probe {lane} is failing", "reason": str(doc.get("lastError") or ""),
                            "db": PROBES, "id": lane, "since": doc.get("checkedAt"), "rank": PROBE_RANK})
        return out

    def overview(store: Store) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        for lane in lanes:
            try:
                doc = store.get(PROBES, lane)
            except (NotFound, LedgerError):
                rows.append({"lane": lane, "ok": None})
                continue
            rows.append({k: doc.get(k) for k in ("lane", "ok", "latencyMs", "lastError", "checkedAt", "lastOkAt")})
        return {"probes": rows}

    return Offered(attention=attention, overview=overview)


__all__ = ["offered", "probe_offered"]
