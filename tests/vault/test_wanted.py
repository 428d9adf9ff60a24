"""A hold says what to paste (``fix``) and what is wrong without the command (``problem``); the
vault lists what the settings and held work want and it does not have."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from hub.settings import load_settings
from ledger import Ledger
from publishers.queue import new_request, queue
from vault import NeedsReauth, fix_for, held_for, hold, paste_url
from vault.wanted import missing


def test_a_hold_names_its_fix_and_its_problem_next_to_the_cli_sentence(env):
    store = env.store
    maya = Ledger(store, "user:maya", env.clock)
    doc, _ = queue(maya, new_request("bsky", account="shop.bsky.social", slug="a", caption="Hi", now_ms=env.clock.now_ms()))
    db = Ledger(store, "tick:publish", env.clock)
    reason = "no credential for this account in the vault: paste one with `skyhub vault put bluesky shop.bsky.social`"
    held = hold(db, "requests", doc, "bluesky:shop.bsky.social", reason, problem="no credential for this account in the vault")["held"]
    assert held == {"credential": "bluesky:shop.bsky.social", "reason": reason, "problem": "no credential for this account in the vault",
                    "fix": {"platform": "bluesky", "account": "shop.bsky.social"}, "since": env.clock.now_ms()}
    again = store.get("requests", doc["_id"])
    env.clock.advance(60_000)
    assert hold(db, "requests", again, "bluesky:shop.bsky.social", reason, problem=held["problem"]) == again  # the same hold: no write
    # a hold written before holds had a fix is written again, with one (its first time kept)
    old = store.put("requests", {**{k: v for k, v in again.items() if not k.startswith("_")},
                                 "held": {"credential": "bluesky:shop.bsky.social", "reason": reason, "since": 5}}, doc["_id"], actor="admin")
    assert hold(db, "requests", old, "bluesky:shop.bsky.social", reason, problem=held["problem"])["held"] == {**held, "since": 5}


def test_fix_for_knows_only_vault_ids_and_the_paste_url_fills_the_form():
    assert fix_for("instagram:17841400000000000") == {"platform": "instagram", "account": "17841400000000000"}
    assert fix_for("nowhere:x") is None and fix_for("bluesky:") is None and fix_for("") is None
    assert held_for("nowhere:x", "r", 1) == {"credential": "nowhere:x", "reason": "r", "problem": "r", "since": 1}
    url = urlsplit(paste_url("bluesky", "a&b=c#d"))
    assert url.path == "/console/credentials" and parse_qs(url.query) == {"platform": ["bluesky"], "account": ["a&b=c#d"]}


def test_needs_reauth_says_the_problem_without_the_command(env):
    env.person.put("instagram", "1", "TOK")
    head = env.store.get("vault", "instagram:1")
    env.store.put("vault", {**head, "status": "needs-reauth", "needsReauth": True, "lastError": "Meta 190"}, "instagram:1", actor="admin")
    with pytest.raises(NeedsReauth) as found:
        env.person.usable("instagram:1")
    assert "skyhub vault put" in found.value.reason  # the CLI's sentence
    assert found.value.problem == "instagram:1 needs a fresh secret: Meta 190"  # the page's


def test_missing_lists_what_the_settings_name_and_held_work_waits_for(env, tmp_path, monkeypatch):
    from hub.app import build_rules

    monkeypatch.setenv("SKYHUB_PUBLISH__ACCOUNTS", '{"bsky": "default.bsky.social", "ig": "178", "threads": "29"}')
    monkeypatch.setenv("SKYHUB_BOT__HANDLE", "ourbot.bsky.social")
    settings = load_settings(None, database_url=f"sqlite:///{tmp_path}/x.db")
    rules = build_rules()
    store, db = env.store, Ledger(env.store, "tick:publish", env.clock)
    env.person.put("facebook", "178", "TOK")  # Instagram through Facebook Login: the ig account is not missing
    env.person.put("threads", "29", "TOK")
    maya = Ledger(store, "user:maya", env.clock)
    for slug in ("a", "b", "c"):
        doc, _ = queue(maya, new_request("bsky", account="shop.bsky.social", slug=slug, caption="Hi", now_ms=env.clock.now_ms()))
        hold(db, "requests", doc, "bluesky:shop.bsky.social", "r")
    doc, _ = queue(maya, new_request("threads", account="29", slug="t", caption="Hi", now_ms=env.clock.now_ms()))
    hold(db, "requests", doc, "threads:29", "needs a fresh secret")  # held for a credential the vault has: not missing
    done, _ = queue(maya, new_request("bsky", account="gone.bsky.social", slug="d", caption="Hi", now_ms=env.clock.now_ms()))
    held = hold(db, "requests", done, "bluesky:gone.bsky.social", "r")
    store.put("requests", {**{k: v for k, v in held.items() if not k.startswith("_")}, "status": "cancelled"}, done["_id"], actor="admin")

    have = [d["_id"] for d in store.query("vault", "kind", "credential").docs]
    found = {m.id: m.why() for m in missing(store, settings, rules.machine_for, have)}
    assert found == {
        "bluesky:default.bsky.social": "named in publish.accounts.bsky",
        "bluesky:ourbot.bsky.social": "named in bot.handle",
        "bluesky:shop.bsky.social": "3 held documents in requests",  # a cancelled post waits for nothing
    }
    env.person.put("bluesky", "shop.bsky.social", "app-password")
    have = [d["_id"] for d in store.query("vault", "kind", "credential").docs]
    assert "bluesky:shop.bsky.social" not in {m.id for m in missing(store, settings, rules.machine_for, have)}
