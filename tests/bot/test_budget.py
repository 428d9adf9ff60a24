"""The builder lane with a language model (the test kit's FakeModel) and the daily token budget:
tokens recorded on the mention and added to the day's ledger document; a spent budget makes
builds wait unclaimed (no attempt, no failure) until the next UTC day, and the overview says so;
racing builders both count; the budget only counts up; a failed build's sentence and tokens are
kept; `skyhub build run` refuses to start without the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bot.budget import TokenBudget, day_of
from bot.build import Builder, BuildSettings
from bot.codegen.settings import CodegenSettings
from bot.services import offered
from hub.app import build_rules
from ledger import SYSTEM, Conflict, FakeClock, Forbidden, Ledger, open_store
from skyhub_testkit.fakemodel import FakeModel
from skyhub_testkit.hub import ROOT

NOW = 1_800_000_000_000  # 2027-01-15, 08:00 UTC
KEY = "sk-budget-test-1a2b3c4d"


@pytest.fixture
def env(tmp_path):
    clock = FakeClock(NOW)
    store = open_store(f"sqlite:///{tmp_path}/bot.db", build_rules(), clock)
    yield store, clock, tmp_path
    store.close()


@pytest.fixture
def fake():
    model = FakeModel(key=KEY)
    served = model.serve()
    model.url = served.url
    yield model
    served.stop()


def pending(store, n=1, text="@skybot.test make me a pomodoro timer"):
    ids = []
    for i in range(n):
        uri = f"at://did:plc:alice/app.bsky.feed.post/3kb{i}"
        doc = {"kind": "mention", "status": "pending-build", "uri": uri, "cid": f"bafy{i}", "text": text, "authorDid": "did:plc:alice",
               "authorHandle": "alice.test", "root": {"uri": uri, "cid": f"bafy{i}"}, "parent": {"uri": uri, "cid": f"bafy{i}"}, "attempts": 0}
        ids.append(store.put("requests", doc, f"did:plc:alice:3kb{i}", actor="tick:ingest", create_only=True)["_id"])
    return ids


def model_builder(store, clock, fake, tmp_path, *, budget=1_000_000, provider="openai"):
    base = fake.url + "/v1" if provider == "openai" else fake.url
    codegen = CodegenSettings(provider=provider, base_url=base, model="fake-1", daily_token_budget=budget, browser="/usr/bin/chromium")
    command = f"{sys.executable} -m bot.codegen --out {tmp_path / 'site'} --base-url https://me.example/b"
    settings = BuildSettings(command=command, lease_ms=120_000, timeout_s=120, budget=budget,
                             env={**codegen.as_env(), "SKYHUB_CODEGEN_API_KEY": KEY})
    return Builder(Ledger(store, "device:builder", clock), settings)


def test_a_built_mention_keeps_its_title_and_tokens_and_the_day_counts_them(env, fake):
    store, clock, tmp = env
    (job,) = pending(store)
    assert model_builder(store, clock, fake, tmp, provider="anthropic").run() == {"built": 1}
    d = store.get("requests", job)
    assert d["status"] == "built" and d["result"]["title"] == "Pomodoro timer" and d["result"]["browser"] == "loaded"
    assert d["tokens"] == d["result"]["tokens"] and d["tokens"]["in"] > 0 and d["tokens"]["out"] > 0
    day = store.get("bot", f"token-budget-{day_of(NOW)}")
    assert (day["used"], day["builds"], day["limit"]) == (d["tokens"]["in"] + d["tokens"]["out"], 1, 1_000_000)
    assert [(c.doc["status"], c.actor) for c in store.history("bot", day["_id"])] == [("counting", "device:builder")]
    assert offered(None).attention(store, NOW) == []  # not spent


def test_a_spent_budget_makes_builds_wait_for_the_next_day_without_an_attempt(env, fake):
    store, clock, tmp = env
    first, second, third = pending(store, 3)
    lane = model_builder(store, clock, fake, tmp, budget=500)  # one build spends more than that
    assert lane.run(1) == {"built": 1}
    writes = {j: len(store.history("requests", j)) for j in (second, third)}
    assert lane.run() == {"waiting": 2}
    for j in (second, third):
        d = store.get("requests", j)
        assert (d["status"], d["attempts"]) == ("pending-build", 0) and len(store.history("requests", j)) == writes[j]
    (item,) = offered(None).attention(store, NOW)
    assert item["what"] == "token-budget" and item["title"] == "today's codegen token budget is spent (2027-01-15, UTC)"
    assert "of 500 tokens used: 2 pending builds wait for the next day (00:00 UTC)" in item["reason"]
    assert "without using an attempt" in item["reason"] and item["id"] == "token-budget-2027-01-15"
    calls = len(fake.calls)
    clock.advance(16 * 3_600_000)  # past midnight, UTC
    assert offered(None).attention(store, clock.now_ms()) == []
    assert lane.run(1) == {"built": 1} and len(fake.calls) > calls
    assert store.get("requests", second)["attempts"] == 1


def test_the_overview_says_the_budget_is_spent(tmp_path, monkeypatch):
    from hub.app import build_app
    from hub.console.overview import overview
    from hub.settings import load_settings

    app = build_app(load_settings(None, database_url=f"sqlite:///{tmp_path}/x.db"), clock=SYSTEM)
    try:
        store, now = app.store, app.clock.now_ms()
        pending(store, 2)
        TokenBudget(Ledger(store, "device:builder", app.clock), 1000).add(now, 900, 300)
        data = overview(app, started_at=now)
        (item,) = [a for a in data["attention"] if a["what"] == "token-budget"]
        assert "1,200 of 1,000 tokens used: 2 pending builds wait for the next day" in item["reason"]
    finally:
        app.stop()


def test_racing_builders_both_count(env):
    store, clock, _ = env
    a, b = TokenBudget(Ledger(store, "device:builder", clock), 10_000), TokenBudget(Ledger(store, "device:builder", clock), 10_000)
    a.add(NOW, 10, 5)
    original = a.today
    raced = []

    def read_then_lose_the_race(now_ms):
        head = original(now_ms)
        if not raced:  # another builder adds between this read and this write
            raced.append(b.add(NOW, 100, 50))
        return head

    a.today = read_then_lose_the_race
    doc = a.add(NOW, 1000, 500)
    assert (doc["tokensIn"], doc["tokensOut"], doc["used"], doc["builds"]) == (1110, 555, 1665, 3)


def test_the_budget_only_counts_up_and_only_the_builder_keeps_it(env):
    store, clock, _ = env
    builder = Ledger(store, "device:builder", clock)
    head = TokenBudget(builder, 1000).add(NOW, 800, 400)
    body = {k: v for k, v in head.items() if not k.startswith("_")}
    with pytest.raises(Forbidden, match="a token budget's tokensIn only counts up"):
        builder.put("bot", {**body, "tokensIn": 0, "used": 400}, head["_id"], if_rev=head["_rev"])
    with pytest.raises(Forbidden, match="user:mallory may not move a token-budget"):
        Ledger(store, "user:mallory", clock).put("bot", {**body, "used": 0}, head["_id"], if_rev=head["_rev"])
    with pytest.raises(Forbidden, match="user:mallory may not create a token-budget"):
        Ledger(store, "user:mallory", clock).put("bot", {**body, "day": "2027-01-16"}, "token-budget-2027-01-16", create_only=True)
    with pytest.raises(Forbidden, match="id must be 'token-budget-2027-01-16'"):
        builder.put("bot", {**body, "day": "2027-01-16"}, "token-budget-elsewhere", create_only=True)
    with pytest.raises(Conflict):
        builder.put("bot", body, head["_id"], create_only=True)


def test_a_failed_build_keeps_the_generators_sentence_and_its_tokens(env, fake):
    store, clock, tmp = env
    (job,) = pending(store)
    fake.answers = ["leak", "leak"]
    assert model_builder(store, clock, fake, tmp).run() == {"build-failed": 1}
    d = store.get("requests", job)
    assert d["lastError"] == ("the page was refused after one repair round: the page repeats the private instructions "
                              "(a prompt leak): never write them into a page")
    assert d["tokens"]["in"] > 0 and store.get("bot", f"token-budget-{day_of(NOW)}")["used"] == d["tokens"]["in"] + d["tokens"]["out"]


def test_build_run_refuses_to_start_without_the_key_and_claims_nothing(tmp_path):
    url = f"sqlite:///{tmp_path}/hub.db"
    store = open_store(url, build_rules(), SYSTEM)
    (job,) = pending(store)
    store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYHUB_CODEGEN")}
    env.update({"PYTHONPATH": str(ROOT), "SKYHUB_DATABASE_URL": url, "SKYHUB_CODEGEN__PROVIDER": "openai", "SKYHUB_CODEGEN__MODEL": "m"})
    run = subprocess.run([sys.executable, "-m", "hub", "build", "run"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == ("skyhub: usage: codegen.provider is openai, which needs an API key, and SKYHUB_CODEGEN_API_KEY is not set: "
                                  "put the key in that environment variable (in the workflow, the repository secret SKYHUB_CODEGEN_API_KEY); "
                                  "a local server that takes none accepts any value")
    store = open_store(url, build_rules(), SYSTEM)
    try:
        assert store.get("requests", job)["attempts"] == 0
    finally:
        store.close()
    assert json.dumps(dict(CodegenSettings().as_env())).count("API_KEY") == 0
