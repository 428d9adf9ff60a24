"""Mention builds against a mocked PDS (respx under the atproto SDK): ingest with every
guardrail, paging, error mapping, the builder lane, and the reply that is posted once."""

from __future__ import annotations

import base64
import json
import sys
from datetime import UTC, datetime

import httpx
import pytest
import respx

from bot.build import Builder, BuildSettings
from bot.guardrails import Guardrails
from bot.ingest import Ingester, mention_id
from bot.reply import Replier
from hub.app import build_rules
from ledger import FakeClock, Ledger
from ledger.lease import Sweeper
from platforms import AuthFailure, NetworkError, RateLimited, Transient
from platforms.bluesky import Bluesky
from skyhub_testkit.memory import memory_store

PDS = "https://pds.test"
BOT = "did:plc:skybot"
NOW = 1_800_000_000_000


def jwt(exp_s: int) -> str:
    payload = base64.urlsafe_b64encode(json.dumps({"exp": exp_s, "sub": BOT, "scope": "com.atproto.appPass"}).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJIUzI1NiJ9.{payload}.c2ln"


SESSION = {"accessJwt": jwt(NOW // 1000 + 3600), "refreshJwt": jwt(NOW // 1000 + 86400), "did": BOT, "handle": "skybot.test"}


def iso(ms: int) -> str:
    """As Bluesky writes them: always with milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def mention(n: int, *, author="did:plc:alice", handle="alice.test", text="@skybot.test make me a pomodoro timer",
            age_ms=60_000, labels=(), author_labels=(), reply=None):
    uri = f"at://{author}/app.bsky.feed.post/3kpost{n:05d}"
    record = {"$type": "app.bsky.feed.post", "text": text, "createdAt": iso(NOW - age_ms)}
    if reply:
        record["reply"] = reply
    return {
        "uri": uri, "cid": f"bafycid{n}", "reason": "mention", "isRead": False, "indexedAt": iso(NOW - age_ms + n),
        "author": {"did": author, "handle": handle, "labels": [{"src": author, "uri": uri, "val": v, "cts": iso(NOW)} for v in author_labels]},
        "record": record, "labels": [{"src": author, "uri": uri, "val": v, "cts": iso(NOW)} for v in labels],
    }


def post_view(note, *, muted=False, reply_disabled=False):
    return {"uri": note["uri"], "cid": note["cid"], "author": note["author"], "record": note["record"],
            "indexedAt": note["indexedAt"], "viewer": {"threadMuted": muted, "replyDisabled": reply_disabled}, "labels": []}


@pytest.fixture
def env(tmp_path):
    clock = FakeClock(NOW)
    rules = build_rules()
    store = memory_store(rules, clock)

    class Env:
        pass

    e = Env()
    e.store, e.clock, e.rules, e.tmp = store, clock, rules, tmp_path
    e.http = httpx.Client()  # the transport seam; respx mocks it in these tests
    e.bsky = lambda: Bluesky(e.http, PDS, SESSION)
    yield e
    e.http.close()
    store.close()


def serve(notes, views=None, pages=None):
    """Mock listNotifications (newest first, paged as given), getPosts and updateSeen."""
    views = views if views is not None else {n["uri"]: post_view(n) for n in notes}
    ordered = sorted(notes, key=lambda n: n["indexedAt"], reverse=True)  # newest first, as the server does
    pages = pages or [len(ordered)]
    chunks, i = [], 0
    for size in pages:
        chunks.append(ordered[i:i + size])
        i += size

    def list_notifications(request):
        cursor = request.url.params.get("cursor")
        assert "seenAt" not in request.url.params
        index = int(cursor) if cursor else 0
        body = {"notifications": chunks[index] if index < len(chunks) else []}
        if index + 1 < len(chunks):
            body["cursor"] = str(index + 1)
        return httpx.Response(200, json=body)

    def get_posts(request):
        uris = request.url.params.get_list("uris")
        return httpx.Response(200, json={"posts": [views[u] for u in uris if u in views]})

    routes = {
        "list": respx.get(f"{PDS}/xrpc/app.bsky.notification.listNotifications").mock(side_effect=list_notifications),
        "posts": respx.get(f"{PDS}/xrpc/app.bsky.feed.getPosts").mock(side_effect=get_posts),
        "seen": respx.post(f"{PDS}/xrpc/app.bsky.notification.updateSeen").mock(return_value=httpx.Response(200)),
    }
    return routes


class ingester:  # noqa: N801 - reads like the tick it runs
    """One ingest pass on the mocked PDS, as the tick runs it."""

    def __init__(self, env, **guard):
        self.env = env
        self.ingester = Ingester(Ledger(env.store, "tick:ingest", env.clock), Guardrails(**guard))

    def run(self):
        bsky = self.env.bsky()
        try:
            return self.ingester.run(bsky)
        finally:
            bsky.close()


def doc(env, note):
    return env.store.get("requests", mention_id(note["uri"]))


@respx.mock
def test_ingest_follows_short_pages_and_is_idempotent(env):
    notes = [mention(i) for i in range(7)]
    routes = serve(notes, pages=[2, 0, 3, 2])  # short and even empty pages keep a cursor
    assert ingester(env, per_author_daily=10).run() == {"pending-build": 7}
    for note in notes:
        d = doc(env, note)
        assert d["status"] == "pending-build" and d["text"] == note["record"]["text"] and d["authorHandle"] == "alice.test"
        assert d["root"] == {"uri": note["uri"], "cid": note["cid"]} and d["parent"] == d["root"]
    seen = json.loads(routes["seen"].calls.last.request.content)["seenAt"]
    assert seen[:19] == notes[-1]["indexedAt"][:19]  # the newest notification, to the second
    assert ingester(env, per_author_daily=10).run() == {}  # nothing new
    env.store.delete("bot", "ingest-checkpoint", actor="admin")
    assert ingester(env, per_author_daily=10).run() == {}  # the ids, not the checkpoint, say what is new
    assert all(len(env.store.history("requests", mention_id(n["uri"]))) == 1 for n in notes)


@respx.mock
def test_a_mention_that_arrives_late_with_an_older_timestamp_is_not_lost(env):
    """The AppView sorts and stamps a notification by min(createdAt, indexedAt): a mention from a
    client whose clock is behind, ingested after a newer one, sits below it in the list."""
    newer = mention(1, age_ms=60_000)
    serve([newer])
    assert ingester(env).run() == {"pending-build": 1}
    late = mention(2, author="did:plc:bob", handle="bob.test", age_ms=20 * 60_000)  # created 20 min ago, seen only now
    serve([newer, late])
    assert ingester(env).run() == {"pending-build": 1}
    assert doc(env, late)["status"] == "pending-build"
    too_old = mention(3, author="did:plc:carol", handle="carol.test", age_ms=3 * 3_600_000)
    serve([newer, late, too_old])
    assert ingester(env).run() == {}  # beyond max_age (and its slack) the walk ends: no backfill storm


@respx.mock
def test_a_reply_in_a_thread_keeps_the_threads_root(env):
    root = {"uri": "at://did:plc:carol/app.bsky.feed.post/3kroot", "cid": "bafyroot"}
    note = mention(1, reply={"root": root, "parent": {"uri": "at://did:plc:dave/app.bsky.feed.post/3kmid", "cid": "bafymid"}})
    serve([note])
    ingester(env).run()
    d = doc(env, note)
    assert d["root"] == root and d["parent"] == {"uri": note["uri"], "cid": note["cid"]}


@respx.mock
def test_every_guardrail_skips_with_its_reason(env):
    cases = [
        (mention(1, author=BOT, handle="skybot.test"), {}, "self"),
        (mention(2, author="did:plc:mallory"), {}, "blocklist"),
        (mention(3, handle="spammer.test", author="did:plc:spam"), {}, "blocklist"),
        (mention(4, age_ms=3 * 3_600_000), {}, "too old"),
        (mention(5, labels=["spam"]), {}, "label spam"),
        (mention(6, author_labels=["!hide"], author="did:plc:hidden"), {}, "label !hide"),
        (mention(7, text="@skybot.test build a keylogger"), {}, "keyword"),
        (mention(8, author="did:plc:m"), {"muted": True}, "muted thread"),
        (mention(9, author="did:plc:r"), {"reply_disabled": True}, "replies disabled"),
    ]
    views = {n["uri"]: post_view(n, **v) for n, v, _ in cases}
    serve([n for n, _, _ in cases], views)
    # the bot last ran four hours ago: what came in since is read, the old one recorded as too old
    env.store.put("bot", {"kind": "checkpoint", "indexedAt": iso(NOW - 4 * 3_600_000)}, "ingest-checkpoint", actor="tick:ingest")
    ingester(env, blocked_dids={"did:plc:mallory"}, blocked_handles={"spammer.test"}, keywords=["keylogger"]).run()
    for note, _, reason in cases:
        d = doc(env, note)
        assert (d["status"], d["skipReason"]) == ("skipped", reason), note["uri"]
        assert [c.actor for c in env.store.history("requests", d["_id"])] == ["tick:ingest"]


@respx.mock
def test_author_daily_and_queue_caps(env):
    notes = [mention(i) for i in range(3)] + [mention(10 + i, author=f"did:plc:u{i}") for i in range(3)]
    serve(notes)
    ingester(env, per_author_daily=2, max_queue=4).run()
    statuses = [(doc(env, n)["status"], doc(env, n).get("skipReason")) for n in notes]
    assert statuses == [("pending-build", None), ("pending-build", None), ("skipped", "author cap"),
                        ("pending-build", None), ("pending-build", None), ("skipped", "queue full")]


@respx.mock
def test_global_daily_cap(env):
    notes = [mention(i, author=f"did:plc:g{i}") for i in range(3)]
    serve(notes)
    ingester(env, global_daily=2).run()
    assert [doc(env, n).get("skipReason") for n in notes] == [None, None, "daily cap"]


@respx.mock
def test_a_queue_cap_larger_than_a_query_page_counts_the_queue_page_by_page(env, monkeypatch):
    import bot.ingest

    serve([mention(i, author=f"did:plc:q{i}") for i in range(3)])
    assert ingester(env, max_queue=5000).run() == {"pending-build": 3}  # a cap above the store's largest page
    monkeypatch.setattr(bot.ingest, "QUERY_PAGE", 2)  # the queue of 3 now spans two pages
    notes = [mention(10 + i, author=f"did:plc:r{i}") for i in range(3)]
    serve(notes)
    assert ingester(env, max_queue=4).run() == {"pending-build": 1, "skipped": 2}
    assert [doc(env, n).get("skipReason") for n in notes] == [None, "queue full", "queue full"]


class CountingStore:
    """The store, counting the calls the tick's ledger makes to it."""

    def __init__(self, store):
        self.store, self.calls = store, {}

    def __getattr__(self, name):
        value = getattr(self.store, name)
        if not callable(value):
            return value

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            written = len(args[1]) if name == "put_many" else 1 if name == "put" else 0
            self.calls["written"] = self.calls.get("written", 0) + written
            return value(*args, **kwargs)
        return counted


@respx.mock
def test_each_new_mention_costs_the_tick_one_read_and_one_write_however_many_come(env, monkeypatch):
    """Linear in the mentions: the caps are counted once a pass, never per mention; the writes go a page
    (WRITE_PAGE mentions) per transaction."""
    import bot.ingest

    monkeypatch.setattr(bot.ingest, "WRITE_PAGE", 16)
    calls = []
    for start, n in ((0, 20), (100, 80)):
        serve([mention(start + i, author=f"did:plc:c{(start + i) % 7}") for i in range(n)])
        store = CountingStore(env.store)
        pass_ = Ingester(Ledger(store, "tick:ingest", env.clock), Guardrails(per_author_daily=1000, global_daily=1000, max_queue=1000))
        bsky = env.bsky()
        try:
            assert pass_.run(bsky) == {"pending-build": n}
        finally:
            bsky.close()
        calls.append((n, store.calls))
    (n1, small), (n2, large) = calls
    assert large["written"] - small["written"] == n2 - n1  # one write per mention (and the checkpoint)
    assert (small["put_many"], large["put_many"]) == (2, 5)  # 20 and 80 mentions, 16 a transaction
    assert small["put"] == large["put"] == 1  # the checkpoint
    assert large["get"] - small["get"] == n2 - n1  # one point read per mention (and the checkpoint)
    assert large["query"] - small["query"] <= 1  # the caps' queries: a constant number (one more page of today's builds)


@respx.mock
def test_sdk_errors_are_translated(env):
    route = respx.get(f"{PDS}/xrpc/app.bsky.notification.listNotifications")
    route.mock(return_value=httpx.Response(429, headers={"ratelimit-reset": str(NOW // 1000 + 300), "ratelimit-limit": "3000", "ratelimit-remaining": "0"},
                                           json={"error": "RateLimitExceeded", "message": "Rate Limit Exceeded"}))
    with pytest.raises(RateLimited) as err:
        ingester(env).run()
    assert err.value.reset_at == (NOW // 1000 + 300) * 1000
    for name in ("ExpiredToken", "InvalidToken"):
        route.mock(return_value=httpx.Response(400, json={"error": name, "message": "Token has expired"}))
        with pytest.raises(AuthFailure, match=name):
            ingester(env).run()
    route.mock(return_value=httpx.Response(500, json={"error": "InternalServerError"}))
    with pytest.raises(Transient, match="500"):
        ingester(env).run()
    route.mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(NetworkError, match="cannot reach pds.test"):
        ingester(env).run()


# ---- the builder lane ------------------------------------------------------------------------
def pending(env, n=1, text="@skybot.test make me a todo list"):
    ids = []
    for i in range(n):
        note = mention(100 + i, text=text)
        env.store.put("requests", {"kind": "mention", "status": "pending-build", "uri": note["uri"], "cid": note["cid"], "text": text,
                                   "authorDid": "did:plc:alice", "root": {"uri": note["uri"], "cid": note["cid"]},
                                   "parent": {"uri": note["uri"], "cid": note["cid"]}, "attempts": 0}, mention_id(note["uri"]), actor="tick:ingest", create_only=True)
        ids.append(mention_id(note["uri"]))
    return ids


def builder(env, command, **kw):
    settings = BuildSettings(command=command, lease_ms=60_000, timeout_s=kw.pop("timeout_s", 30), max_jobs=5)
    return Builder(Ledger(env.store, "device:builder", env.clock), settings)


def test_the_builder_runs_the_default_codegen_and_writes_built(env):
    (job,) = pending(env)
    out = env.tmp / "site"
    cmd = f"{sys.executable} -m bot.codegen --out {out} --base-url https://me.github.io/builds"
    assert builder(env, cmd).run() == {"built": 1}
    d = env.store.get("requests", job)
    assert d["status"] == "built" and d["result"]["url"] == f"https://me.github.io/builds/{job.replace(':', '-')}/"
    page = (out / job.replace(":", "-") / "index.html").read_text()
    assert "<script>" in page and "todo" in page.lower() and "@skybot" not in page
    assert [(c.doc["status"], c.actor) for c in env.store.history("requests", job)] == [
        ("pending-build", "tick:ingest"), ("building", "device:builder"), ("built", "device:builder")]


def test_a_failing_codegen_writes_build_failed_with_its_log_tail(env):
    (job,) = pending(env)
    cmd = f"{sys.executable} -c \"import sys; print('compiling...'); print('boom: no such template', file=sys.stderr); sys.exit(3)\""
    assert builder(env, cmd).run() == {"build-failed": 1}
    d = env.store.get("requests", job)
    assert d["status"] == "build-failed" and "boom: no such template" in d["lastError"] and "exited with 3" in d["lastError"]


def test_codegen_without_a_result_line_or_too_slow_fails_clearly(env):
    jobs = pending(env, 2)
    assert builder(env, f"{sys.executable} -c \"print('done, I think')\"").run(1) == {"build-failed": 1}
    assert "no JSON result" in env.store.get("requests", jobs[0])["lastError"]
    assert builder(env, f"{sys.executable} -c \"import time; time.sleep(5)\"", timeout_s=0.5).run(1) == {"build-failed": 1}
    assert "timed out" in env.store.get("requests", jobs[1])["lastError"]


def test_only_the_builder_may_build_and_the_sweep_takes_expired_builds_back(env):
    (job,) = pending(env)
    with pytest.raises(Exception, match="device:other may not build mentions"):
        Builder(Ledger(env.store, "device:other", env.clock), BuildSettings(command="true")).run()
    from ledger.lease import claim

    worker = Ledger(env.store, "device:builder", env.clock)
    sweeper = Sweeper(env.store, env.rules, clock=env.clock)
    for attempt in (1, 2, 3):
        held = claim(worker, "requests", env.store.get("requests", job), "building", 60_000, env.clock.now_ms())
        assert held["attempts"] == attempt
        env.clock.advance(60_001)
        sweeper.sweep_once()
    d = env.store.get("requests", job)
    assert d["status"] == "build-failed" and d["attempts"] == 3


# ---- the reply ---------------------------------------------------------------------------------
def built(env, text="@skybot.test make me a counter", url="https://me.github.io/builds/x/", title=None):
    (job,) = pending(env, text=text)
    from ledger.lease import claim, finish

    worker = Ledger(env.store, "device:builder", env.clock)
    held = claim(worker, "requests", env.store.get("requests", job), "building", 60_000, env.clock.now_ms())
    finish(worker, "requests", held, "built", result={"url": url, **({"title": title} if title is not None else {})})
    return job


def reply_routes(env, job, *, muted=False, disabled=False):
    d = env.store.get("requests", job)
    view = {"uri": d["uri"], "cid": d["cid"], "author": {"did": "did:plc:alice", "handle": "alice.test"},
            "record": {"text": d["text"], "createdAt": iso(NOW)}, "indexedAt": iso(NOW),
            "viewer": {"threadMuted": muted, "replyDisabled": disabled}}
    respx.get(f"{PDS}/xrpc/app.bsky.feed.getPosts").mock(return_value=httpx.Response(200, json={"posts": [view]}))
    records: dict[str, dict] = {}

    def get_record(request):
        rkey = request.url.params["rkey"]
        if rkey in records:
            return httpx.Response(200, json={"uri": f"at://{BOT}/app.bsky.feed.post/{rkey}", "cid": "bafyreply", "value": records[rkey]})
        return httpx.Response(400, json={"error": "RecordNotFound", "message": "Could not locate record"})

    def create_record(request):
        body = json.loads(request.content)
        records[body["rkey"]] = body["record"]
        return httpx.Response(200, json={"uri": f"at://{BOT}/app.bsky.feed.post/{body['rkey']}", "cid": "bafyreply"})

    get = respx.get(f"{PDS}/xrpc/com.atproto.repo.getRecord").mock(side_effect=get_record)
    create = respx.post(f"{PDS}/xrpc/com.atproto.repo.createRecord").mock(side_effect=create_record)
    return get, create, records


class replier:  # noqa: N801 - reads like the tick it runs
    """One reply pass on the mocked PDS; pages are up unless ``pages`` says otherwise."""

    def __init__(self, env, template="✨ Built it: {url}", pages=None):
        self.env = env
        self.replier = Replier(Ledger(env.store, "tick:reply", env.clock), template, pages=pages)
        self._move = self.replier._move

    def run(self):
        self.replier._move = self._move
        return self.replier.run(self.env.bsky)


@respx.mock
def test_the_reply_is_posted_in_the_thread_with_a_working_link_facet(env):
    job = built(env)
    _, create, records = reply_routes(env, job)
    assert replier(env).run() == {"replied": 1}
    body = json.loads(create.calls.last.request.content)
    record = body["record"]
    d = env.store.get("requests", job)
    strip = lambda ref: {k: v for k, v in ref.items() if k != "$type"}  # noqa: E731
    assert strip(record["reply"]["root"]) == d["root"] and strip(record["reply"]["parent"]) == d["parent"]
    assert body["rkey"] == d["replyRkey"] and body["repo"] == BOT
    url = "https://me.github.io/builds/x/"
    (facet,) = record["facets"]
    raw = record["text"].encode()
    assert raw[facet["index"]["byteStart"]:facet["index"]["byteEnd"]].decode() == url  # byte offsets, after a 3-byte emoji
    assert facet["features"] == [{"$type": "app.bsky.richtext.facet#link", "uri": url}]
    assert d["status"] == "replied" and d["permalink"] == f"https://bsky.app/profile/{BOT}/post/{d['replyRkey']}"
    assert [c.doc["status"] for c in env.store.history("requests", job)][-3:] == ["built", "built", "replied"]


@respx.mock
@pytest.mark.parametrize("title,named", [
    ("Pomodoro timer", "Your Pomodoro timer is ready: "),
    ("A tip splitter @everyone https://evil.example/x", "Your tip splitter everyone is ready: "),  # the builder wrote it: cleaned again
    (None, "Your build is ready: "),  # a codegen command that names nothing
])
def test_the_reply_names_what_was_built(env, title, named):
    url = "https://me.github.io/builds/x/"
    job = built(env, url=url, title=title)
    _, create, _ = reply_routes(env, job)
    assert replier(env, template="Your {title} is ready: {url}").run() == {"replied": 1}
    record = json.loads(create.calls.last.request.content)["record"]
    assert record["text"] == named + url
    (facet,) = record["facets"]
    assert record["text"].encode()[facet["index"]["byteStart"]:facet["index"]["byteEnd"]].decode() == url


def test_the_default_reply_names_the_page():
    from bot.settings import BotSettings

    assert BotSettings().reply_template == "Your {title} is ready: {url}"


@respx.mock
def test_a_crash_between_posting_and_recording_never_posts_twice(env):
    job = built(env)
    _, create, records = reply_routes(env, job)
    r = replier(env)
    original = r._move

    def die_after_posting(doc, status, **fields):
        if status == "replied":
            raise SystemExit("killed after the post, before the record")
        return original(doc, status, **fields)

    r._move = die_after_posting
    with pytest.raises(SystemExit):
        r.run()
    assert create.call_count == 1 and env.store.get("requests", job)["status"] == "built"
    assert replier(env).run() == {"replied": 1}  # the retry finds the record under the fixed key
    assert create.call_count == 1 and len(records) == 1
    assert env.store.get("requests", job)["replyUri"].endswith(env.store.get("requests", job)["replyRkey"])


@respx.mock
@pytest.mark.parametrize("muted,disabled,reason", [(True, False, "muted thread"), (False, True, "replies disabled")])
def test_a_thread_muted_or_closed_since_ingest_is_skipped_not_replied(env, muted, disabled, reason):
    job = built(env)
    _, create, _ = reply_routes(env, job, muted=muted, disabled=disabled)
    assert replier(env).run() == {"skipped": 1}
    d = env.store.get("requests", job)
    assert (d["status"], d["skipReason"]) == ("skipped", reason) and create.call_count == 0


@respx.mock
def test_a_429_waits_for_its_reset_and_is_not_an_attempt(env):
    job = built(env)
    reply_routes(env, job)
    respx.post(f"{PDS}/xrpc/com.atproto.repo.createRecord").mock(return_value=httpx.Response(
        429, headers={"ratelimit-reset": str(NOW // 1000 + 120)}, json={"error": "RateLimitExceeded"}))
    assert replier(env).run() == {"rate-limited": 1}
    d = env.store.get("requests", job)
    assert d["status"] == "built" and d["waitUntil"] == (NOW // 1000 + 120) * 1000 and "replyTries" not in d and d["attempts"] == 1
    assert replier(env).run() == {}  # still waiting
    _, create, records = reply_routes(env, job)
    env.clock.advance(120_001)
    assert replier(env).run() == {"replied": 1}
    assert create.call_count == 2 and len(records) == 1  # the refused try, then the one post


# ---- the ticks as the hub runs them: (event, ctx), the session from the vault, a fake clock ------
def bot_context(env, actor, **settings):
    from bot.settings import BotSettings
    from ledger import Services, TickEvent
    from ledger.context import make_context
    from platforms.settings import PlatformSettings
    from vault import Vault, new_key_text, parse_key

    key = parse_key(new_key_text(), "test")
    Vault(Ledger(env.store, "user:ana", env.clock), key).put("bluesky", "skybot.test", {"appPassword": "app-pass-1234", "session": SESSION})
    head = env.store.get("vault", "bluesky:skybot.test")
    env.store.put("vault", {**head, "status": "ok"}, actor="admin")  # as the vault tick leaves a verified paste
    from platforms.fetcher import Fetcher

    # pages are checked through the guarded fetcher; respx answers, and every name resolves to a public address
    services = Services(vault=lambda db: Vault(db, key), http=httpx.Client(), platforms=PlatformSettings(bluesky_pds=PDS),
                        fetch=Fetcher(resolver=lambda host, port: ["93.184.216.34"]))
    section = BotSettings(handle="skybot.test", **settings)
    ctx = make_context(Ledger(env.store, actor, env.clock), actor.split(":")[1], services, settings=section)
    event = TickEvent(actor.split(":")[1], datetime.fromtimestamp(NOW / 1000, tz=UTC))
    return event, ctx


@respx.mock
def test_ingest_and_reply_ticks_run_from_their_context(env):
    from bot.ingest import ingest
    from bot.reply import reply

    note = mention(1)
    serve([note])
    event, ctx = bot_context(env, "tick:ingest")
    assert ingest(event, ctx) == {"pending-build": 1}
    job = mention_id(note["uri"])
    from ledger.lease import claim, finish

    worker = Ledger(env.store, "device:builder", env.clock)
    held = claim(worker, "requests", env.store.get("requests", job), "building", 60_000, env.clock.now_ms())
    finish(worker, "requests", held, "built", result={"url": "https://me.github.io/builds/x/"})
    _, create, _ = reply_routes(env, job)
    page = respx.get("https://me.github.io/builds/x/").mock(return_value=httpx.Response(404))
    event, ctx = bot_context(env, "tick:reply", page_wait="10m")
    assert reply(event, ctx) == {"page-not-up": 1}  # GitHub Pages has not served the push yet
    d = env.store.get("requests", job)
    assert d["status"] == "built" and d["attempts"] == 1 and "HTTP 404" in d["lastError"] and create.call_count == 0
    writes = len(env.store.history("requests", job))
    assert reply(event, ctx) == {"page-not-up": 1} and len(env.store.history("requests", job)) == writes  # no write per wait
    page.mock(return_value=httpx.Response(200, text="<html>"))
    env.clock.advance(60_000)
    assert reply(event, ctx) == {"replied": 1} and create.call_count == 1
    d = env.store.get("requests", job)
    assert d["status"] == "replied" and "pageWaitSince" not in d and d["lastError"] is None


@respx.mock
def test_a_page_that_never_comes_up_ends_in_error_with_the_reason(env):
    from bot.reply import reply

    job = built(env, url="https://me.github.io/builds/gone/")
    _, create, _ = reply_routes(env, job)
    respx.get("https://me.github.io/builds/gone/").mock(return_value=httpx.Response(404))
    event, ctx = bot_context(env, "tick:reply", page_wait="10m")
    writes = len(env.store.history("requests", job))
    assert reply(event, ctx) == {"page-not-up": 1}
    assert reply(event, ctx) == {"page-not-up": 1}
    assert len(env.store.history("requests", job)) == writes + 1  # waiting is recorded once, not every tick
    env.clock.advance(10 * 60_000)
    assert reply(event, ctx) == {"error": 1}
    d = env.store.get("requests", job)
    assert d["status"] == "error" and "did not come up within 10 min" in d["lastError"] and "HTTP 404" in d["lastError"]
    assert create.call_count == 0


@respx.mock
def test_caps_count_across_passes_and_days(env):
    serve([mention(i) for i in range(2)])
    assert ingester(env, per_author_daily=3).run() == {"pending-build": 2}
    serve([mention(i) for i in range(4)])
    assert ingester(env, per_author_daily=3).run() == {"pending-build": 1, "skipped": 1}  # the third today, then the cap
    env.clock.advance(86_400_000)  # a new UTC day: the author may build again
    later = [mention(100 + i, age_ms=60_000 - 86_400_000) for i in range(1)]
    serve(later)
    assert ingester(env, per_author_daily=3).run() == {"pending-build": 1}


@respx.mock
def test_a_refused_session_holds_the_reply_until_the_vault_has_a_new_one(env):
    from bot.reply import reply

    job = built(env)
    _, create, records = reply_routes(env, job)
    respx.get("https://me.github.io/builds/x/").mock(return_value=httpx.Response(200))
    create.mock(return_value=httpx.Response(400, json={"error": "ExpiredToken", "message": "Token has expired"}))
    event, ctx = bot_context(env, "tick:reply")
    assert reply(event, ctx) == {"held": 1}
    d = env.store.get("requests", job)
    assert d["status"] == "built" and d["held"]["credential"] == "bluesky:skybot.test" and "ExpiredToken" in d["held"]["reason"]
    assert d["held"]["fix"] == {"platform": "bluesky", "account": "skybot.test"}  # the console links the paste form
    calls, writes = create.call_count, len(env.store.history("requests", job))
    assert reply(event, ctx) == {"held": 1}  # the same session: no post is tried again, nothing written
    assert create.call_count == calls and len(env.store.history("requests", job)) == writes
    # the vault tick stores a fresh session (a new version of the credential): the reply goes on by itself
    from vault import Vault

    Vault(Ledger(env.store, "user:ana", env.clock), ctx.vault.key).put("bluesky", "skybot.test", {"appPassword": "app-pass-1234", "session": SESSION})
    head = env.store.get("vault", "bluesky:skybot.test")
    env.store.put("vault", {**head, "status": "ok"}, actor="admin")  # verified, as the vault tick leaves it
    create.mock(side_effect=lambda request: httpx.Response(200, json={"uri": f"at://{BOT}/app.bsky.feed.post/{json.loads(request.content)['rkey']}", "cid": "bafyreply"}))
    assert reply(event, ctx) == {"replied": 1}
    d = env.store.get("requests", job)
    assert d["status"] == "replied" and "held" not in d and d["attempts"] == 1


@respx.mock
@pytest.mark.parametrize("url,words", [
    ("/builds/x/", "not a URL"), ("site/x/", "not a URL"),  # a builder without SKYHUB_BUILD_BASE_URL made these
    ("http://127.0.0.1:8000/x/", "only https"), ("https://10.0.0.7/x/", "not a public one"),
])
def test_the_reply_never_posts_a_url_it_has_not_seen_answer(env, url, words):
    from bot.reply import reply

    job = built(env, url=url)
    _, create, _ = reply_routes(env, job)
    event, ctx = bot_context(env, "tick:reply", page_wait="10m")
    assert reply(event, ctx) == {"error": 1}
    d = env.store.get("requests", job)
    assert d["status"] == "error" and "is not posted" in d["lastError"] and words in d["lastError"], d["lastError"]
    assert create.call_count == 0


def test_replies_wait_while_the_bots_account_or_bluesky_is_paused_and_touch_nothing(env, respx_mock):
    """An operator pausing ``bsky:HANDLE`` (or ``bsky``) stops the bot's replies too: the reply
    tick writes nothing, calls nothing and counts the waiting replies as ``paused``."""
    from bot.reply import reply
    from bot.settings import BotSettings
    from ledger import Context
    from ledger.pause import pause, resume
    from ledger.scheduler import TickEvent

    before = env.store.get("requests", built(env))
    calls = respx_mock.route(host="pds.test").mock(return_value=httpx.Response(500))  # this test's router only
    operator = Ledger(env.store, "user:ana", env.clock)
    ctx = Context(db=Ledger(env.store, "tick:reply", env.clock), clock=env.clock, name="reply",
                  settings=BotSettings(handle="skybot.test"))
    event = TickEvent("reply", env.clock.now_ms(), False)
    for target in ("bsky:skybot.test", "bsky"):
        pause(operator, target, "the shop is checking its wording")
        assert reply(event, ctx) == {"paused": 1}
        resume(operator, target)
    assert env.store.get("requests", before["_id"])["_rev"] == before["_rev"] and not calls.called
    pause(operator, "bsky:someone-else.test", "another account")
    with pytest.raises(Exception, match="no vault"):  # not held by another account's pause: it goes for the session
        reply(event, ctx)
