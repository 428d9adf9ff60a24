"""What publishing adds to a hub: the publish-request machine (review, the platform walk, the first
comment), the ``publish`` tick, the account documents in ``publish`` (rate-limit blocks), the
``skyhub publish`` commands and the ``/v1/publish``, ``/v1/posts`` and ``/v1/media`` routes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ledger import ADMIN, Context, Policy, Product, Tick, TickEvent, tick, user

from .machine import DB, PUBLISH
from .media import CHUNKS, MAX_BYTES
from .media import DB as MEDIA

if TYPE_CHECKING:
    from .settings import PublishSettings

ACCOUNTS_DB = "publish"  # one document per account: blockedUntil, usage, the 24 h container count


def _publish(event: TickEvent, ctx: Context) -> Any:
    from .tick import publish  # the steps (and each platform's client) load with the first run

    return publish(event, ctx)


def _ticks(section: PublishSettings) -> Sequence[Tick]:
    return [Tick("publish", section.every, _publish, settings=section)]


PUBLISHERS = Product(
    "publish", "Publishing: queued Instagram carousels, Threads and Bluesky posts walked to done, never twice.",
    machines=[PUBLISH, CHUNKS],
    policies=[Policy(ACCOUNTS_DB, free=(tick("publish"), user(), ADMIN))],
    indexes=[(DB, "kind"), (DB, "slug"), (DB, "mediaId")],
    settings="publishers.settings:PublishSettings",
    ticks=_ticks,
    tick_help={"publish": "walks each queued post one step (containers, carousel, publish; a Bluesky record) to done with its "
                          "permalink, then its first comment, never twice; queues approved posts when their time comes"},
    cli={"publish": "publishers.cli:publish_group"},
    api="publishers.api:publish_router",
    api_paths=("/v1/publish", "/v1/posts", "/v1/media"),  # its router is made on the first request under these (hub/webapp.py)
    uploads={"/v1/media": MAX_BYTES},  # an image's bytes as the body (a phone's photo, before it is scaled for Bluesky)
    pages="publishers.pages:publish_pages",
    nav=(("/console/publish", "Publishing"), ("/console/publish/calendar", "Calendar")),
    templates="publishers",
    doc_actions="publishers.pages:doc_actions",
    doc_images="publishers.pages:doc_images",
    redact={MEDIA: ("data",)},  # an image's bytes (up to 683 KB a chunk) would flood every stream and page
    metrics="publishers.metrics:metrics",
    pausable={  # validate.PLATFORMS, named here so that declaring the product loads no validation
        p: f"{name} posts wait (every account's, or one account's: {p}:ACCOUNT)"
        for p, name in (("ig", "Instagram"), ("threads", "Threads"), ("bsky", "Bluesky"))
    },
)

PRODUCTS = (PUBLISHERS,)
