"""The test kit's pytest fixtures, as a user's conftest gets them (tests/conftest.py names the plugin)."""

from __future__ import annotations

import httpx

from ledger import Rules


def test_a_memory_database_and_a_fake_clock_make_a_store_for_one_test(memory_database, fake_clock):
    store = memory_database.open(Rules(), fake_clock)
    fake_clock.advance(5_000)
    store.put("notes", {"v": 1}, "n", actor="user:ana")
    assert store.history("notes", "n")[0].at == fake_clock.now_ms()
    store.close()


def test_a_hub_for_one_test_answers_with_a_token(skyhub_hub):
    token = skyhub_hub.token("ana")
    answer = httpx.get(f"{skyhub_hub.url}/v1/whoami", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert answer.json()["actor"] == "user:ana"
