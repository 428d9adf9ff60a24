"""Calls under a lease (ledger/keeper.py): renewed while they run, abandoned past their limit,
told when their lease was lost, and never renewed once they have returned."""

from __future__ import annotations

import threading

from ledger import BackendError, FakeClock
from ledger.keeper import Keeper, Lease

WAIT = 10.0  # how long a test waits for something that happens at once (a bound, not a measure)


def test_a_long_call_keeps_its_lease_and_nothing_renews_it_once_it_returned():
    clock = FakeClock()
    renewed = []
    twice = threading.Event()

    def renew():
        renewed.append(clock.now_ms())
        if len(renewed) >= 2:
            twice.set()
        return True

    lease = Lease(renew, 1_000, clock)

    def work():
        for _ in range(2):
            clock.advance(600)  # past half the lease: the keeper renews it
            seen = len(renewed)
            for _ in range(int(WAIT / 0.01)):
                if len(renewed) > seen:
                    break
                threading.Event().wait(0.01)
        return "built"

    start = clock.now_ms()
    keeper = Keeper(tick=0.005)
    outcome = keeper.call(work, lease=lease)
    at_return = list(renewed)
    clock.advance(10_000)  # due again: but the call is over
    keeper.close()  # its thread has stopped: whatever it was going to renew, it has
    assert outcome.value == "built" and outcome.error is None and not outcome.lost
    assert twice.is_set() and at_return == [start + 600, start + 1_200] and lease.until == start + 2_200
    assert renewed == at_return


def test_an_inline_call_past_its_limit_is_abandoned_and_told_so_when_it_returns():
    clock = FakeClock()
    took_over = threading.Event()
    callers = []

    def on_abandon():
        callers.append(threading.current_thread())
        took_over.set()

    def hang():
        took_over.wait(WAIT)  # returns once the keeper has given up on it
        return "late"

    with Keeper(tick=0.005) as keeper:
        outcome = keeper.call(hang, lease=Lease(lambda: True, 60_000, clock), timeout=0.05, on_abandon=on_abandon)
    assert took_over.is_set() and callers[0] is not threading.current_thread()
    assert outcome.abandoned and outcome.timed_out and outcome.value is None
    assert outcome.error == "timed out after 0.05 s"


def test_a_call_on_a_thread_of_its_own_is_answered_at_its_limit_and_left_running():
    release = threading.Event()
    with Keeper(tick=0.005) as keeper:
        outcome = keeper.call(release.wait, WAIT, lease=Lease(lambda: True, 60_000, FakeClock()), timeout=0.05, inline=False)
        assert not release.is_set()  # still running when the caller has its answer
        release.set()
    assert outcome.timed_out and not outcome.abandoned and outcome.error == "timed out after 0.05 s"


def test_a_failing_call_brings_its_error_and_its_exception():
    def fail():
        raise ValueError("no page")

    with Keeper() as keeper:
        for inline in (True, False):
            outcome = keeper.call(fail, lease=Lease(lambda: True, 60_000, FakeClock()), inline=inline)
            assert outcome.error == "ValueError: no page" and isinstance(outcome.exception, ValueError)


def test_a_lease_lost_during_the_call_is_in_the_outcome():
    clock = FakeClock()
    lease = Lease(lambda: False, 1_000, clock)  # another consumer has it now

    def work():
        clock.advance(600)
        for _ in range(int(WAIT / 0.01)):
            if lease.lost:
                break
            threading.Event().wait(0.01)
        return "done anyway"

    with Keeper(tick=0.005) as keeper:
        outcome = keeper.call(work, lease=lease)
    assert outcome.lost and outcome.value == "done anyway"


def test_a_renewal_the_store_did_not_answer_is_tried_again_not_taken_as_lost():
    clock = FakeClock()
    tries = []
    kept = threading.Event()

    def renew():
        tries.append(1)
        if len(tries) == 1:
            raise BackendError("the database did not answer")
        kept.set()
        return True

    lease = Lease(renew, 1_000, clock)

    def work():
        clock.advance(600)
        kept.wait(WAIT)

    with Keeper(tick=0.005) as keeper:
        outcome = keeper.call(work, lease=lease)
    assert kept.is_set() and not outcome.lost and len(tries) == 2
