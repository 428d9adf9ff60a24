"""The hub's settings a post is judged by, and who may create posts: the one place both the
validator (``publishers.validate``) and the machines' guards (posts, uploads) read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger import GuardContext
from platforms.addresses import FetchPolicy


@dataclass(frozen=True)
class Admission:
    """The hub's settings a post is judged by, wherever it comes in: the hosts images may come
    from (``publish.image_hosts``), what the guarded fetcher may fetch (``[fetch]``) and the
    devices allowed to queue posts (``publish.devices``). ``Admission()`` is the strictest."""

    image_hosts: tuple[str, ...] = ()
    web: FetchPolicy = FetchPolicy()
    devices: tuple[str, ...] = ()

    @classmethod
    def of(cls, publish: Any | None, fetch: Any | None) -> Admission:
        """From the ``[publish]`` and ``[fetch]`` settings sections (None: their defaults)."""
        return cls(image_hosts=tuple(h.lower() for h in getattr(publish, "image_hosts", None) or ()),
                   web=FetchPolicy.of(fetch), devices=tuple(getattr(publish, "devices", None) or ()))

    @classmethod
    def from_settings(cls, settings: Any) -> Admission:
        """From the hub's settings object (anything with ``section(name)``)."""
        return cls.of(settings.section("publish"), settings.section("fetch"))

    @classmethod
    def for_guard(cls, ctx: GuardContext) -> Admission:
        """From the settings the store was opened with (the strictest when it has none)."""
        return cls.of(ctx.section("publish"), ctx.section("fetch"))


def creator_problem(ctx: GuardContext, doing: str = "queue a post") -> str | None:
    """Why ``ctx.actor`` may not create posts (or their uploads), or None: people may; a device
    only when ``publish.devices`` names it; ticks and handlers never."""
    kind = ctx.actor.partition(":")[0]
    if kind in ("user", "admin"):
        return None
    if kind == "device" and ctx.actor in Admission.for_guard(ctx).devices:
        return None
    if kind == "device":
        return (f"{ctx.actor} may not {doing}: only people do, unless the hub's publish.devices names the device "
                "(SKYHUB_PUBLISH__DEVICES)")
    return f"{ctx.actor} may not {doing}: only people do"


__all__ = ["Admission", "creator_problem"]
