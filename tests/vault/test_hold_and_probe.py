"""Held work resumes after a fresh paste; probes write one document per lane."""

from __future__ import annotations

import httpx
import respx

from ledger import Edge, Ledger, Machine, NotFound, Rules, handler, open_store, tick, user
from platforms.fetcher import Fetcher
from vault import DB, NeedsReauth, Prober, Vault, hold, release
from vault.probe import DB as PROBES

# a stand-in for the publish and reply workers that come with their issues
WORK = Machine("work", kind="post", start=["pending"], edges=[
    Edge("pending", "pending", by=tick("publish")),  # hold / release
    Edge("pending", "done", by=tick("publish")),
])


def publish_tick(store, key, calls, clock):
    """One pass of a worker that needs instagram:1 for every post."""
    db = Ledger(store, "tick:publish", clock)
    vault = Vault(db, key)
    for post in list(db.query_all("work", "status", "pending")):
        try:
            vault.usable("instagram:1")
        except NeedsReauth as exc:
            hold(db, "work", post, "instagram:1", exc.reason)
            continue
        post = release(db, "work", post)
        token = vault.reveal("instagram:1")["accessToken"]
        calls.append(token)
        body = {k: v for k, v in post.items() if not k.startswith("_")}
        db.put("work", {**body, "status": "done"}, post["_id"], if_rev=post["_rev"])


@respx.mock
def test_held_work_resumes_by_itself_after_a_fresh_paste(env):
    from hub.app import build_rules

    rules = build_rules()
    rules.declare(WORK)
    store = open_store(f"sqlite:///{env.path}/work.db", rules, env.clock)
    person = Vault(Ledger(store, "user:ana", env.clock), env.key)
    from vault import Maintainer

    maintainer = Maintainer(Ledger(store, "tick:vault", env.clock), env.key, env.platforms)
    me = respx.get("https://ig.test/me")
    me.mock(return_value=httpx.Response(400, json={"error": {"message": "Error validating access token", "code": 190}}))
    person.put("instagram", "1", "EXPIRED")
    maintainer.run()
    store.put("work", {"kind": "post", "status": "pending", "attempts": 0}, "p1", actor="user:ana")
    calls: list[str] = []
    publish_tick(store, env.key, calls, env.clock)
    publish_tick(store, env.key, calls, env.clock)  # held once, not again and again
    post = store.get("work", "p1")
    assert post["status"] == "pending" and post["attempts"] == 0 and calls == []
    assert post["held"]["credential"] == "instagram:1" and "needs a fresh secret" in post["held"]["reason"]
    assert len(store.history("work", "p1")) == 2
    # a person pastes a fresh token; the vault tick verifies it; the worker goes on by itself
    me.mock(return_value=httpx.Response(200, json={"user_id": "1", "username": "shop"}))
    person.put("instagram", "1", "FRESH")
    publish_tick(store, env.key, calls, env.clock)  # still waiting for the check
    assert store.get("work", "p1")["held"]["reason"].endswith("(the next vault tick)")
    maintainer.run()
    publish_tick(store, env.key, calls, env.clock)
    post = store.get("work", "p1")
    assert post["status"] == "done" and "held" not in post and calls == ["FRESH"]
    assert [c.doc["status"] for c in store.history("work", "p1")] == ["pending", "pending", "pending", "pending", "done"]
    store.close()


def test_a_consumer_reports_a_dead_credential(env):
    respx_route = None  # noqa: F841 - no platform call: the consumer saw the failure itself
    env.person.put("threads", "5", "TOK")
    doc = env.store.get(DB, "threads:5")
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    # skip the verify call: pretend the tick verified it
    from vault.credentials import new_claim

    claimed = env.store.put(DB, new_claim(doc, 60_000, env.clock.now_ms()), "threads:5", actor="tick:vault", if_rev=doc["_rev"])
    env.store.put(DB, {**body, "status": "ok", "claimId": claimed["claimId"]}, "threads:5", actor="tick:vault", if_rev=claimed["_rev"])
    Vault(Ledger(env.store, "handler:publish", env.clock), env.key).report_dead("threads:5", "Threads said 190: token expired")
    meta = env.person.show("threads:5")
    assert meta["needsReauth"] is True and meta["lastError"] == "Threads said 190: token expired"


def test_people_and_devices_cannot_reveal_secrets(env):
    env.person.put("instagram", "1", "TOK")
    import pytest

    from vault import NotRevealable

    for actor in ("user:ana", "device:builder", "admin"):
        with pytest.raises(NotRevealable):
            Vault(Ledger(env.store, actor, env.clock), env.key).reveal("instagram:1")
    assert Vault(Ledger(env.store, "tick:publish", env.clock), env.key).reveal("instagram:1") == {"accessToken": "TOK"}


@respx.mock
def test_probes_write_one_document_per_lane(env):
    rules = Rules()
    rules.allow(PROBES, free=[tick("probe"), user()])
    respx.get("https://pds.test/xrpc/_health").mock(return_value=httpx.Response(200, json={"version": "0.4"}))
    respx.get("https://graph.test/").mock(return_value=httpx.Response(400, json={"error": {"code": 1}}))
    respx.get("https://threads.test/").mock(side_effect=httpx.ConnectTimeout("slow"))
    lanes = {"bluesky-pds": "https://pds.test/xrpc/_health", "graph-api": "https://graph.test/", "threads": "https://threads.test/"}
    prober = Prober(Ledger(env.store, "tick:probe", env.clock), lanes, Fetcher(resolver=lambda host, port: ["10.0.0.7"]))  # a lane may be private
    assert prober.run() == {"bluesky-pds": True, "graph-api": True, "threads": False}
    pds, threads = env.store.get(PROBES, "bluesky-pds"), env.store.get(PROBES, "threads")
    assert pds["ok"] is True and pds["lastError"] is None and pds["checkedAt"] == env.clock.now_ms() and pds["latencyMs"] >= 0
    assert threads["ok"] is False and "in time (ConnectTimeout)" in threads["lastError"] and threads["lastOkAt"] is None
    env.clock.advance(60_000)
    prober.run()
    assert len(env.store.history(PROBES, "threads")) == 2
    try:
        env.store.get(PROBES, "nowhere")
    except NotFound:
        pass


def test_the_credential_machine_is_drawn(env):
    from vault import CREDENTIALS

    text = CREDENTIALS.mermaid()
    assert "ok --> rotating: tick:vault [lease_claim]" in text and "needs_reauth --> unverified: user:*, admin" in text
    assert handler().matches("handler:publish")
