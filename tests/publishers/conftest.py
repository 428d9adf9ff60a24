"""The publish tick as the hub runs it, on a fake clock: a store with every machine, a vault with
credentials, ``ctx.http`` over a ``MockTransport`` that routes Meta's hosts to a ``FakeMeta``
and the PDS to a ``FakePDS``, and the ``[publish]`` and ``[platforms]`` settings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from hub.app import build_rules
from ledger import FakeClock, Ledger, Services, TickEvent, open_store
from ledger.context import make_context
from platforms.fetcher import Fetcher
from platforms.settings import PlatformSettings
from publishers.queue import new_request, queue
from publishers.settings import PublishSettings
from publishers.tick import publish
from publishers.validate import Admission
from skyhub_testkit.fakemeta import FakeMeta
from skyhub_testkit.fakepds import FakePDS
from skyhub_testkit.memory import memory_store
from vault import Vault, new_key_text, parse_key

NOW = 1_800_000_000_000
IG = "17841400000000000"
TH = "2900000000000001"
IG_HOST, FB_HOST, TH_HOST, PDS = "https://graph.instagram.test", "https://graph.facebook.test", "https://graph.threads.test", "https://pds.test"
JPG = "https://cdn.example.org/p/{}.jpg"
PUBLIC_ADDRESS = "93.184.216.34"  # a public address: what the fetcher is told cdn.example.org resolves to


class Env:
    """One test's world; see the module docstring."""

    def __init__(self, tmp_path: Any, url: str | None = None) -> None:
        self.clock = FakeClock(NOW)
        # a URL (PostgreSQL, a file) when a test needs one; in memory otherwise
        self.store = open_store(url, build_rules(), self.clock) if url else memory_store(build_rules(), self.clock)
        self.key = parse_key(new_key_text(), "test")
        self.meta = FakeMeta(self.clock.now_ms)
        self.threads = FakeMeta(self.clock.now_ms, threads=True, quota_total=250)
        self.pds = FakePDS()
        self.files: dict[str, Any] = {}  # URL -> a response, or a function of the request
        self.http = httpx.Client(transport=httpx.MockTransport(self.route))
        # images are fetched through the guarded fetcher, over the same routes; every name resolves to a public address
        self.fetcher = Fetcher(resolver=lambda host, port: [PUBLIC_ADDRESS], transport=httpx.MockTransport(self.route))
        self.platforms = PlatformSettings(instagram_url=IG_HOST, facebook_url=FB_HOST, threads_url=TH_HOST, bluesky_pds=PDS)
        self.maya = Ledger(self.store, "user:maya", self.clock)

    def route(self, request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if url.startswith((IG_HOST, FB_HOST)):
            return self.meta.handle(request)
        if url.startswith(TH_HOST):
            return self.threads.handle(request)
        if url.startswith(PDS):
            return self.pds(request)
        if url in self.files:
            answer = self.files[url]
            return answer(request) if callable(answer) else answer
        return httpx.Response(404, text="not here")

    # ---- the vault ---------------------------------------------------------------------------
    def credential(self, platform: str, account: str, secret: dict[str, Any], *, ok: bool = True) -> None:
        Vault(self.maya, self.key).put(platform, account, secret)
        if ok:  # as the vault tick leaves a verified paste
            head = self.store.get("vault", f"{platform}:{account}")
            self.store.put("vault", {**head, "status": "ok"}, actor="admin")

    # ---- queueing and ticking ----------------------------------------------------------------
    def queue(self, platform: str, slug: str, *, images: int | list[dict[str, str]] = 0, caption: str = "", account: str | None = None,
              at: str | None = None, reply_to: str | None = None, first_comment: str | None = None) -> str:
        pairs = images if isinstance(images, list) else [{"url": JPG.format(i), "alt": f"photo {i}"} for i in range(images)]
        account = account or {"ig": IG, "threads": TH, "bsky": "skybot.test"}[platform]
        body = new_request(platform, account=account, slug=slug, caption=caption, images=pairs, at=at, reply_to=reply_to,
                           now_ms=self.clock.now_ms(), first_comment=first_comment)
        doc, _ = queue(self.maya, body, admission=Admission())
        return str(doc["_id"])

    def context(self, **settings: Any) -> Any:
        services = Services(vault=lambda db: Vault(db, self.key), http=self.http, platforms=self.platforms, fetch=self.fetcher)
        section = PublishSettings(**{"retry_wait": "1ms", **settings})
        return make_context(Ledger(self.store, "tick:publish", self.clock), "publish", services, settings=section)

    def tick(self, **settings: Any) -> dict[str, int]:
        event = TickEvent("publish", datetime.fromtimestamp(self.clock.now_ms() / 1000, tz=UTC))
        return publish(event, self.context(**settings))

    def doc(self, doc_id: str) -> dict[str, Any]:
        return self.store.get("requests", doc_id)

    def statuses(self, doc_id: str) -> list[str]:
        return [str(c.doc.get("status")) for c in self.store.history("requests", doc_id)]

    def close(self) -> None:
        self.http.close()
        self.store.close()


@pytest.fixture
def env(tmp_path: Any) -> Any:
    e = Env(tmp_path)
    yield e
    e.close()
