"""Moves: a machine's person edges named for what an operator does, checked when declared."""

from __future__ import annotations

import pytest

from bot.machine import MENTIONS
from ledger import ADMIN, Edge, FakeClock, InvalidMachine, Ledger, Machine, Move, Rules, open_store, tick, user
from ledger.jobs import JOBS
from publishers.machine import PUBLISH


def test_a_move_needs_an_edge_a_person_may_take():
    with pytest.raises(InvalidMachine, match="move retry failed -> pending has no edge a person may take"):
        Machine("t", type="t", start=["pending"], edges=[Edge("pending", "failed", by=tick("x")), Edge("failed", "pending", by=tick("x"))],
                moves=[Move("retry", "failed", "pending")])
    with pytest.raises(InvalidMachine, match="move 'redo' is not one of retry, cancel, dismiss"):
        Machine("t", type="t", start=["a"], edges=[Edge("a", "b", by=user())], moves=[Move("redo", "a", "b")])
    Machine("t", type="t", start=["a"], edges=[Edge("a", "b", by=ADMIN)], moves=[Move("cancel", "a", "b")])


def test_the_retry_resets_what_it_says_and_records_itself():
    body = JOBS.moves["retry"].body({"_id": "j", "_rev": "3-x", "type": "job", "status": "failed", "attempts": 3, "claimId": "c",
                                      "leaseUntil": 5, "retries": 2, "input": {}}, 1234)
    assert body == {"type": "job", "status": "pending", "attempts": 0, "retries": 3, "retriedAt": 1234, "input": {}}


def test_a_failed_build_or_a_reply_in_error_is_rebuilt_keeping_the_reply_key(tmp_path):
    clock = FakeClock(1_790_000_000_000)
    store = open_store(f"sqlite:///{tmp_path}/hub.db", Rules([MENTIONS]), clock)
    ana = Ledger(store, "user:ana", clock)
    move = MENTIONS.moves["retry"]
    for status in ("build-failed", "error"):
        doc = store.put("requests", {"kind": "mention", "status": status, "uri": "at://x", "text": "make me a timer", "attempts": 3,
                                     "result": {"url": "u"}, "replyRkey": "3k2", "lastError": "no"}, f"m-{status}", actor="admin")
        out = ana.put("requests", move.body(doc, clock.now_ms()), doc["_id"], if_rev=doc["_rev"])
        assert (out["status"], out["attempts"], out["retries"], out["replyRkey"]) == ("pending-build", 0, 1, "3k2")
        assert "result" not in out
    assert move.label == "Rebuild"


def test_retrying_a_publish_that_may_have_gone_out_warns():
    warn = PUBLISH.moves["retry"].warn
    assert warn is not None
    assert warn({"status": "error", "lastError": "bad image"}) is None
    said = warn({"status": "error", "intent": {"step": "publish", "at": 1}})
    assert said is not None and "publish call may have gone out" in said and "twice" in said
    assert "published already" in (warn({"status": "error", "recordUri": "at://x/y/z"}) or "")
