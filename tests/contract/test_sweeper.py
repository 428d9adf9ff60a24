"""The sweep as it runs in `skyhub run`: woken by the earliest lease, not by a fixed tick."""

from __future__ import annotations

import threading
import time

from ledger import SYSTEM, Feed, Ledger
from ledger.lease import Sweeper, claim


def test_the_sweep_wakes_at_the_lease_not_at_its_safety_interval(make_store):
    from tests.conftest import default_rules

    rules = default_rules()
    store = make_store(rules=rules)
    sweeper = Sweeper(store, rules, safety_interval=60.0, clock=SYSTEM)
    returned = threading.Event()
    feed = Feed(store, [], clock=SYSTEM)
    unsubscribe = store.subscribe(lambda c: c and c.actor == "tick:sweep" and returned.set())
    sweeper.start()
    try:
        time.sleep(0.2)  # idle: next safety scan in 60 s
        store.put("jobs", {"type": "job", "status": "pending", "input": 1}, "j", actor="user:ana")
        held = claim(Ledger(store, "handler:on_change", SYSTEM), "jobs", store.get("jobs", "j"), "running", 300, SYSTEM.now_ms())
        assert returned.wait(10), "the sweep did not take the expired lease back"
        job = store.get("jobs", "j")
        assert job["status"] == "pending" and job["attempts"] == 1
        swept = store.history("jobs", "j")[-1]
        assert swept.at >= held["leaseUntil"]
    finally:
        sweeper.stop()
        unsubscribe()
        feed.stop()
