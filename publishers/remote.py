"""The publishing routes over a hub, for the CLI's ``--hub`` (``publishers/api.py`` serves them)."""

from __future__ import annotations

from typing import Any, Protocol


class Hub(Protocol):
    """A client of a hub's API (``hub.remote.RemoteStore``)."""

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call of the API; the answer's JSON."""


def publish_queue(hub: Hub, body: dict[str, Any]) -> dict[str, Any]:
    """Queue a post (``POST /v1/publish``, safe to repeat): ``{"id", "queued", "status"}``."""
    found: dict[str, Any] = hub.request("POST", "/v1/publish", json=body)
    return found


__all__ = ["publish_queue"]
