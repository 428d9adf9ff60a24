from __future__ import annotations

import httpx
import pytest

from hub.app import build_rules
from ledger import FakeClock, Ledger
from platforms.graph import RetryPolicy
from platforms.settings import PlatformSettings
from skyhub_testkit.memory import memory_store
from vault import Checks, Maintainer, Policy, Vault, new_key_text, parse_key

DAY = 86_400_000
ENDPOINTS = PlatformSettings(
    bluesky_pds="https://pds.test", instagram_url="https://ig.test", threads_url="https://threads.test", facebook_url="https://graph.test",
    graph_version="v21.0",
)


@pytest.fixture
def key():
    return parse_key(new_key_text(), "test")


@pytest.fixture
def env(tmp_path, key):
    clock = FakeClock(1_800_000_000_000)
    store = memory_store(build_rules(), clock)
    person = Vault(Ledger(store, "user:ana", clock), key)
    platforms = Checks(httpx.Client(), ENDPOINTS, retry=RetryPolicy(attempts=3, wait=0, sleep=lambda s: None), now_ms=clock.now_ms)
    maintainer = Maintainer(Ledger(store, "tick:vault", clock), key, platforms, Policy())

    class Env:
        pass

    e = Env()
    e.store, e.clock, e.key, e.person, e.maintainer, e.platforms, e.path = store, clock, key, person, maintainer, platforms, tmp_path
    yield e
    platforms.http.close()
    store.close()
