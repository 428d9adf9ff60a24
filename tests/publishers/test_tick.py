"""The tick over many requests: one step each, the queue read once per run a page at a time,
each account's document and credential read once, written once (benchmarks/bench_publish.py
measures the time; no timing here)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from ledger import Forbidden, Ledger
from publishers.accounts import Account
from vault import Vault


class Counting:
    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()
        self.put_dbs: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in ("get", "put", "query"):
            return attr

        def counted(db: str, *args: Any, **kwargs: Any) -> Any:
            self.calls[f"{name}:{db}"] += 1
            return attr(db, *args, **kwargs)

        return counted


def test_one_tick_over_many_requests_of_20_accounts_does_one_step_each(env):
    accounts = [f"178414{i:011d}" for i in range(20)]
    for account in accounts:
        env.credential("instagram", account, {"accessToken": "good-token"})
    ids = [env.queue("ig", f"post-{i}", images=1, caption=f"Post {i}", account=accounts[i % 20]) for i in range(400)]
    counting = Counting(env.store)
    ctx = env.context()
    ctx.db = Ledger(counting, "tick:publish", env.clock)
    ctx.vault = Vault(Ledger(counting, "tick:publish", env.clock), env.key)
    from datetime import UTC, datetime

    from ledger import TickEvent
    from publishers.tick import publish

    assert publish(TickEvent("publish", datetime.now(UTC)), ctx) == {"carousel-created": 400}
    assert all(env.statuses(i) == ["pending", "pending", "carousel-created"] for i in ids)
    calls = counting.calls
    # pending in two pages of 200, then one for each of the other four statuses (approved, items-created,
    # carousel-created, needs-person) and one for the first comments due
    assert calls["query:requests"] == 2 + 1 + 1 + 1 + 1 + 1
    assert calls["get:publish"] == 20 and calls["put:publish"] == 20  # each account document: read once, written once
    assert calls["get:vault"] == 40  # each credential: checked and revealed once
    assert calls["put:requests"] == 800 and env.meta.calls["create"] == 400
    assert all(len(Account.load(ctx.db, "ig", a).containers) == 20 for a in accounts)


def test_nothing_due_writes_nothing(env):
    env.credential("instagram", "17841400000000000", {"accessToken": "good-token"})
    env.queue("ig", "later", images=1, caption="x", at="2099-01-01T00:00:00+00:00")
    before = env.store.head_seq()
    assert env.tick() == {"not-yet": 1}
    assert env.store.head_seq() == before and sum(env.meta.calls.values()) == 0


def test_a_malformed_raw_request_does_not_stop_the_others(env):
    env.credential("instagram", "17841400000000000", {"accessToken": "good-token"})
    raw = {"kind": "publish-request", "platform": "ig", "account": "17841400000000000", "slug": "odd", "status": "pending",
           "attempts": 0, "images": [{"url": "https://cdn.example.org/p/1.jpg", "alt": ""}], "caption": "Odd",
           "createdAt": "2026-01-01T00:00:00Z", "notBefore": "soon", "checks": "many", "intent": {"step": "container", "at": "x"}}
    with pytest.raises(Forbidden) as refused:  # a person cannot write the tick's fields: the machine refuses it
        env.store.put("requests", raw, actor="user:maya")
    assert "a new post cannot carry 'checks'" in refused.value.reason
    odd = env.store.put("requests", raw, actor="admin")["_id"]  # an admin's repair (or a document from before the rule)
    good = env.queue("ig", "good", images=1, caption="Good")
    assert env.tick() == {"refused": 1, "carousel-created": 1}
    assert env.doc(good)["status"] == "carousel-created" and env.doc(odd)["status"] == "pending"


def test_no_secret_reaches_a_document_a_log_or_a_repr(env, caplog):
    import logging

    from publishers.tick import Credential

    env.credential("instagram", "17841400000000000", {"accessToken": "sekret-token-123"})
    env.meta.tokens = {"other"}
    doc_id = env.queue("ig", "leak", images=1, caption="x")
    with caplog.at_level(logging.DEBUG):
        assert env.tick() == {"held": 1}
    assert "sekret-token-123" not in repr(Credential("instagram:1", secret={"accessToken": "sekret-token-123"}))
    everything = "".join(str(c.doc) for c in env.store.history("requests", doc_id)) + caplog.text
    everything += str(env.store.get("vault", "instagram:17841400000000000").get("lastError"))
    assert "sekret-token-123" not in everything and "code 190" in everything


def test_two_processes_writing_one_account_document_merge(env):
    db = Ledger(env.store, "tick:publish", env.clock)
    one, two = Account.load(db, "ig", "1"), Account.load(db, "ig", "1")
    one.created(2, env.clock.now_ms())
    one.save(db)
    two.created(1, env.clock.now_ms() + 5)
    two.block(env.clock.now_ms() + 60_000, "code 17")
    two.save(db)  # a conflict, merged: nothing the first wrote is lost
    head = Account.load(db, "ig", "1")
    assert head.containers == [env.clock.now_ms()] * 2 + [env.clock.now_ms() + 5]
    assert head.blocked_until == env.clock.now_ms() + 60_000 and head.blocked_reason == "code 17"
    assert len(env.store.history("publish", "ig:1")) == 2


def test_a_paused_account_or_platform_waits_without_an_attempt_and_goes_on_once_resumed(env):
    from ledger.pause import pause, resume

    env_ig, other = "17841400000000001", "17841400000000999"
    for account in (env_ig, other):
        env.credential("instagram", account, {"accessToken": "good-token"})
    stopped = env.queue("ig", "stopped", images=1, caption="Stopped", account=env_ig)
    going = env.queue("ig", "going", images=1, caption="Going", account=other)
    operator = Ledger(env.store, "user:ana", env.clock)
    pause(operator, f"ig:{env_ig}", "checking the account")
    counts = env.tick()
    assert counts["paused"] == 1
    assert env.statuses(stopped) == ["pending"]  # not stepped, not held, no attempt written
    assert "attempts" not in env.doc(stopped) or env.doc(stopped)["attempts"] == 0
    assert env.statuses(going)[-1] == "carousel-created"
    pause(operator, "ig")  # the platform: every account of it waits
    assert env.tick() == {"paused": 2}
    assert env.statuses(going)[-1] == "carousel-created"
    resume(operator, "ig")
    resume(operator, f"ig:{env_ig}")
    env.tick()
    assert env.statuses(stopped)[-1] == "carousel-created"
    assert env.meta.calls["create"] == 2
