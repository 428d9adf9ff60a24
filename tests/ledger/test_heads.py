"""The heads a process remembers so that its writes can skip a read (ledger/heads.py)."""

from __future__ import annotations

from ledger.heads import Heads


def test_the_newest_revision_seen_is_kept_and_an_older_one_does_not_replace_it():
    heads = Heads()
    heads.seen("jobs", "j", "2-bb", '{"v": 2}', False)
    heads.seen("jobs", "j", "1-aa", '{"v": 1}', False)  # a feed delivering an older change
    assert heads.get("jobs", "j") == ("2-bb", '{"v": 2}', False)
    heads.seen("jobs", "j", "1-cc", '{"v": 9}', False, head=True)  # what the database has now wins
    assert heads.get("jobs", "j") == ("1-cc", '{"v": 9}', False)
    heads.forget("jobs", "j")
    assert heads.get("jobs", "j") is None


def test_heads_are_bounded_by_count_and_by_the_size_of_their_bodies():
    heads = Heads(size=3, text=100)
    for i in range(5):
        heads.seen("d", f"n{i}", "1-aa", "{}", False)
    assert [heads.get("d", f"n{i}") is not None for i in range(5)] == [False, False, True, True, True]
    heads.seen("d", "big", "1-aa", "x" * 97, False)
    assert heads.get("d", "big") is not None
    assert sum(heads.get("d", f"n{i}") is not None for i in range(5)) <= 1  # evicted to fit the text budget
    heads.seen("d", "huge", "1-aa", "x" * 70_000, False)  # over BODY_KEPT: never kept
    assert heads.get("d", "huge") is None
