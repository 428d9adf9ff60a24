"""The bot's ingest tick over many new mentions at once: the real tick (``bot.ingest.ingest``,
run from a context as the hub runs it, the Bluesky session from the vault, a fake clock) on a
fresh SQLite store, with Bluesky stood in for by a fake PDS/AppView behind the adapter's
transport seam (an ``httpx.MockTransport``): ``listNotifications`` in pages of 100 with
cursors, newest first; ``getPosts`` (25 uris a call, as the adapter asks); ``updateSeen``.

Store calls are counted at the store interface (what the tick's ledger asks of the backend),
HTTP calls at the transport, so the table says where the time per mention goes.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import httpx

PDS = "http://pds.bench.invalid"  # never resolved: every request ends at the mock transport
BOT_DID = "did:plc:benchbot"
NOW = 1_800_000_000_000  # the fake clock's epoch ms (the tests' NOW)
AUTHORS = 500  # mentions come from this many accounts


def _jwt(exp_s: int) -> str:
    body = json.dumps({"exp": exp_s, "sub": BOT_DID, "scope": "com.atproto.appPass"}).encode()
    return "eyJhbGciOiJIUzI1NiJ9." + base64.urlsafe_b64encode(body).decode().rstrip("=") + ".c2ln"


SESSION = {"accessJwt": _jwt(NOW // 1000 + 3600), "refreshJwt": _jwt(NOW // 1000 + 86400), "did": BOT_DID,
           "handle": "skybot.test"}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def notifications(n: int) -> list[dict[str, Any]]:
    """``n`` mentions of the bot from the last 50 minutes, newest first, from AUTHORS accounts."""
    span = 50 * 60_000
    out = []
    for i in range(n):
        at = NOW - span + (span * i) // n
        author = f"did:plc:author{i % AUTHORS:04d}"
        uri = f"at://{author}/app.bsky.feed.post/3kbench{i:07d}"
        record = {"$type": "app.bsky.feed.post", "text": f"@skybot.test make me a timer number {i}", "createdAt": _iso(at)}
        out.append({"uri": uri, "cid": f"bafybench{i}", "reason": "mention", "isRead": False, "indexedAt": _iso(at),
                    "author": {"did": author, "handle": f"author{i % AUTHORS}.test", "labels": []},
                    "record": record, "labels": []})
    out.reverse()
    return out


class FakeBluesky:
    """The PDS/AppView calls the ingest tick makes, served from memory."""

    def __init__(self, notes: list[dict[str, Any]], page: int = 100) -> None:
        self.pages = [notes[i:i + page] for i in range(0, len(notes), page)] or [[]]
        self.views = {n["uri"]: {"uri": n["uri"], "cid": n["cid"], "author": n["author"], "record": n["record"],
                                 "indexedAt": n["indexedAt"], "labels": [],
                                 "viewer": {"threadMuted": False, "replyDisabled": False}} for n in notes}
        self.calls: Counter[str] = Counter()

    def handle(self, request: httpx.Request) -> httpx.Response:
        method = request.url.path.rsplit("/", 1)[-1]
        self.calls[method] += 1
        if method == "app.bsky.notification.listNotifications":
            index = int(request.url.params.get("cursor") or 0)
            body: dict[str, Any] = {"notifications": self.pages[index] if index < len(self.pages) else []}
            if index + 1 < len(self.pages):
                body["cursor"] = str(index + 1)
            return httpx.Response(200, json=body)
        if method == "app.bsky.feed.getPosts":
            return httpx.Response(200, json={"posts": [self.views[u] for u in request.url.params.get_list("uris")
                                                       if u in self.views]})
        if method == "app.bsky.notification.updateSeen":
            return httpx.Response(200, json={})
        return httpx.Response(404, json={"error": "MethodNotImplemented", "message": method})


class CountingStore:
    """A store that counts the calls made to it by method name, and otherwise is the store."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value) or name.startswith("_"):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return value(*args, **kwargs)

        return counted


def ingest_tick(n: int) -> dict[str, Any]:
    """One ingest tick over ``n`` new mentions on a fresh SQLite store; caps set high enough that
    every mention becomes ``pending-build``."""
    from bot.ingest import ingest
    from bot.settings import BotSettings
    from hub.app import build_rules
    from ledger import FakeClock, Ledger, Services, TickEvent, open_store
    from ledger.context import make_context
    from platforms.settings import PlatformSettings
    from vault import Vault, new_key_text, parse_key

    folder = tempfile.mkdtemp(prefix="skyhub-bench-ingest-")
    try:
        guardrails = os.path.join(folder, "guardrails.toml")
        with open(guardrails, "w") as f:  # no cap in the way: every mention is a build
            f.write(f"per_author_daily = {n}\nglobal_daily = {n}\nmax_queue = {n}\n")
        clock = FakeClock(NOW)
        store = open_store(f"sqlite:///{folder}/bot.db", build_rules(), clock)
        fake = FakeBluesky(notifications(n))
        http = httpx.Client(transport=httpx.MockTransport(fake.handle))
        try:
            key = parse_key(new_key_text(), "bench")
            Vault(Ledger(store, "user:bench", clock), key).put("bluesky", "skybot.test",
                                                        {"appPassword": "app-pass-bench", "session": SESSION})
            head = store.get("vault", "bluesky:skybot.test")
            store.put("vault", {**head, "status": "ok"}, actor="admin")  # verified, as the vault tick leaves it
            counting = CountingStore(store)
            services = Services(vault=lambda db: Vault(db, key), http=http, platforms=PlatformSettings(bluesky_pds=PDS))
            section = BotSettings(handle="skybot.test", guardrails=guardrails)
            ctx = make_context(Ledger(counting, "tick:ingest", clock), "ingest", services, settings=section)  # type: ignore[arg-type]
            event = TickEvent("ingest", datetime.fromtimestamp(NOW / 1000, tz=UTC))
            started = time.perf_counter()
            counts = ingest(event, ctx)
            elapsed = time.perf_counter() - started
            statuses = Counter(d.get("status") for d in Ledger(store, "admin", clock).query_all("requests", "kind", "mention"))
        finally:
            http.close()
            store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if counts != {"pending-build": n} or statuses != Counter({"pending-build": n}):
        raise RuntimeError(f"expected {n} pending-build, the tick said {counts}, the store holds {dict(statuses)}")
    store_calls = dict(counting.calls)
    return {"n": n, "s": elapsed, "per_s": n / elapsed, "us_per_mention": elapsed / n * 1e6,
            "store_calls": store_calls, "reads_per_mention": sum(v for k, v in store_calls.items() if k != "put") / n,
            "writes_per_mention": store_calls.get("put", 0) / n, "http_calls": dict(fake.calls),
            "outcomes": counts}
