"""The vault's routes over a hub, for the CLI's ``--hub`` (``vault/api.py`` serves them):
write-only, so metadata comes back and never a secret."""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import quote


class Hub(Protocol):
    """A client of a hub's API (``hub.remote.RemoteStore``)."""

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call of the API; the answer's JSON."""


class RemoteVault:
    """The vault of the hub that ``hub`` talks to."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def put(self, platform: str, account: str, secret: str | dict[str, Any], verify: bool = False) -> dict[str, Any]:
        """Store a new version of a credential on the hub (``verify``: check it with the platform now); its metadata."""
        path = f"/v1/vault/credentials/{quote(platform, safe='')}/{quote(account, safe='')}"
        params = {"verify": "true"} if verify else {}
        found: dict[str, Any] = self.hub.request("PUT", path, params=params, json={"secret": secret})
        return found

    def list(self) -> list[dict[str, Any]]:
        """Every credential's metadata."""
        found: list[dict[str, Any]] = self.hub.request("GET", "/v1/vault/credentials")
        return found

    def show(self, cred_id: str) -> dict[str, Any]:
        """One credential's metadata (never the secret)."""
        found: dict[str, Any] = self.hub.request("GET", f"/v1/vault/credentials/{quote(cred_id, safe='')}")
        return found

    def remove(self, cred_id: str) -> None:
        """Delete a credential (its history keeps the metadata)."""
        self.hub.request("DELETE", f"/v1/vault/credentials/{quote(cred_id, safe='')}")


__all__ = ["RemoteVault"]
