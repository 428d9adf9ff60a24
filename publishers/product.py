"""What publishing adds to a hub: the publish-request machine, the ``publish`` tick, the
account documents in ``publish`` (rate-limit blocks), and the ``skyhub publish`` commands."""

from __future__ import annotations

from collections.abc import Sequence

from ledger import ADMIN, Policy, Product, Tick, tick, user
from ledger.section import Interval, Section

from .machine import DB, PUBLISH

ACCOUNTS_DB = "publish"  # one document per account: blockedUntil, usage, the 24 h container count


class PublishSettings(Section):
    """``[publish]``: queued posts to Instagram, Threads and Bluesky."""

    every: Interval = 30.0
    """the publish tick: one step per queued post per run"""
    accounts: dict[str, str] = {}
    """the account a post goes to without --account, per platform: `ig = "17841400000000000"`, `threads = "..."`, `bsky = "shop.bsky.social"`"""
    image_hosts: list[str] = []
    """hosts images may come from (empty: any public https host)"""
    status_checks: int = 5
    """checks of a container that is still IN_PROGRESS, a minute apart, before it is recreated"""
    check_every: Interval = 60.0
    """the wait between those checks"""
    republish_after: Interval = 60.0
    """a publish whose outcome is unknown is read back; still FINISHED this long after its intent, it is tried again (an attempt)"""
    containers_per_day: int = 400
    """containers an Instagram account may create in 24 hours (Meta's limit)"""


def _ticks(section: PublishSettings) -> Sequence[Tick]:
    return []  # the publish tick joins with the platform steps


PUBLISHERS = Product(
    "publish", "Publishing: queued Instagram carousels, Threads and Bluesky posts walked to done, never twice.",
    machines=[PUBLISH],
    policies=[Policy(ACCOUNTS_DB, free=(tick("publish"), user(), ADMIN))],
    indexes=[(DB, "kind"), (DB, "slug")],
    settings=PublishSettings,
    ticks=_ticks,
    cli={"publish": "publishers.cli:publish_group"},
)

PRODUCTS = (PUBLISHERS,)
