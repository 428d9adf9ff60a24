"""The publishing routes over a hub, for the CLI's ``--hub`` (``publishers/api.py`` and ``publishers/api_posts.py`` serve them)."""

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




def _path(post_id: str) -> str:
    from urllib.parse import quote

    return f"/v1/posts/{quote(post_id, safe=':')}"


def post_queue(hub: Hub, body: dict[str, Any]) -> dict[str, Any]:
    """Queue a post for several networks (``POST /v1/posts``, safe to repeat): the post and each variant's outcome."""
    found: dict[str, Any] = hub.request("POST", "/v1/posts", json=body)
    return found


def post_get(hub: Hub, post_id: str) -> dict[str, Any]:
    """One post (or variant) with its variants (``GET /v1/posts/{id}``)."""
    found: dict[str, Any] = hub.request("GET", _path(post_id))
    return found


def posts_list(hub: Hub, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Posts by time (``GET /v1/posts``)."""
    found: list[dict[str, Any]] = hub.request("GET", "/v1/posts", params=params)["posts"]
    return found


def post_act(hub: Hub, post_id: str, verb: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """``POST /v1/posts/{id}/{verb}``: submit, approve, reject, queue, cancel, comments, reschedule, duplicate."""
    found: dict[str, Any] = hub.request("POST", f"{_path(post_id)}/{verb}", json=body or {})
    return found


def post_edit(hub: Hub, post_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Change a post's content (``PATCH /v1/posts/{id}``)."""
    found: dict[str, Any] = hub.request("PATCH", _path(post_id), json=body)
    return found


def posts_import(hub: Hub, data: bytes, *, json_file: bool, dry_run: bool) -> dict[str, Any]:
    """Import a CSV or JSON file (``POST /v1/posts/import``): the report, row by row."""
    kind = "application/json" if json_file else "text/csv"
    found: dict[str, Any] = hub.request("POST", "/v1/posts/import", content=data, params={"dryRun": str(dry_run).lower()},
                                        headers={"content-type": kind})
    return found


__all__ = ["post_act", "post_edit", "post_get", "post_queue", "posts_import", "posts_list", "publish_queue"]
