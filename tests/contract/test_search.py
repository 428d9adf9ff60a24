"""Search: documents found by a prefix of their id or by words of their text, caption or
lastError, from an index kept in the write's transaction, paged with a total (every backend)."""

from __future__ import annotations

import psycopg
import pytest

from ledger import SYSTEM, Invalid, NotFound, Rules, open_store
from ledger.search import COUNT_CAP, QUERY_MAX
from tests.contract.test_migrations import make_v3


def ids(page):
    return [d["_id"] for d in page.docs]


def test_words_of_text_caption_and_last_error_find_documents(store):
    store.put("notes", {"kind": "mention", "text": "@bot make me a Pomodoro timer"}, "m1", actor="user:ana")
    store.put("notes", {"kind": "publish-request", "caption": "Sunset at the beach, day 3"}, "p1", actor="user:ana")
    store.put("notes", {"kind": "mention", "status": "error", "lastError": "reply failed: HTTP 502 from the PDS"}, "m2",
              actor="user:ana")
    store.put("notes", {"kind": "mention", "note": "pomodoro in a field nobody searches"}, "m3", actor="user:ana")
    assert ids(store.search("notes", "pomodoro")) == ["m1"]
    assert ids(store.search("notes", "BEACH")) == ["p1"]  # case does not matter
    assert ids(store.search("notes", "502")) == ["m2"]
    assert ids(store.search("notes", "pomo tim")) == ["m1"]  # every word, each as the start of a word
    assert ids(store.search("notes", "pomodoro beach")) == []
    assert ids(store.search("notes", "odoro")) == []  # words match from their start
    assert ids(store.search("notes", "reply-failed!")) == ["m2"]  # punctuation separates words, in the search too
    page = store.search("notes", "sunset")
    assert page.total == 1 and page.next is None and not page.capped
    assert page.docs[0]["caption"] == "Sunset at the beach, day 3" and page.docs[0]["_rev"].startswith("1-")


def test_an_id_prefix_finds_documents_and_a_document_found_twice_is_one_hit(store):
    for doc_id in ("ig:shop:spring", "ig:shop:summer", "ig:other:spring", "bsky:shop:spring"):
        store.put("notes", {"kind": "publish-request", "caption": "spring things"}, doc_id, actor="user:ana")
    assert ids(store.search("notes", "ig:shop:")) == ["ig:shop:spring", "ig:shop:summer"]
    assert ids(store.search("notes", "IG:shop:")) == []  # ids are exact
    assert ids(store.search("notes", "ig:other:spring")) == ["ig:other:spring"]  # a whole id
    page = store.search("notes", "spring")  # by its caption and (for none here) its id
    assert page.total == 4
    store.put("notes", {"kind": "x", "caption": "springtime"}, "spring-1", actor="user:ana")
    assert ids(store.search("notes", "spring")) == ["bsky:shop:spring", "ig:other:spring", "ig:shop:spring", "ig:shop:summer",
                                                       "spring-1"]  # by id and by caption: once


def test_the_index_follows_edits_deletes_and_other_databases_are_apart(store):
    a = store.put("tasks", {"type": "job", "status": "failed", "lastError": "disk quota exceeded"}, "j1", actor="user:ana")
    store.put("other", {"lastError": "disk quota exceeded"}, "j1", actor="user:ana")
    assert ids(store.search("tasks", "quota")) == ["j1"]
    a = store.put("tasks", {"type": "job", "status": "pending", "lastError": None}, "j1", actor="user:ana", if_rev=a["_rev"])
    assert ids(store.search("tasks", "quota")) == []
    a = store.put("tasks", {"type": "job", "status": "failed", "lastError": "network unreachable"}, "j1", actor="user:ana",
                  if_rev=a["_rev"])
    assert ids(store.search("tasks", "unreach")) == ["j1"] and ids(store.search("tasks", "quota")) == []
    store.delete("tasks", "j1", actor="user:ana", if_rev=a["_rev"])
    assert store.search("tasks", "unreach").total == 0 and store.search("tasks", "j1").total == 0
    store.put("tasks", {"type": "job", "lastError": "back again"}, "j1", actor="user:ana")  # made again after its delete
    assert ids(store.search("tasks", "back")) == ["j1"]
    assert ids(store.search("other", "quota")) == ["j1"]
    store.put("tasks", {"lastError": {"nested": "quota"}, "text": 7, "caption": ["quota"]}, "j2", actor="user:ana")
    assert store.search("tasks", "quota").total == 0  # only text values are searched


def test_pages_in_id_order_with_the_total_on_every_page(store):
    for i in range(25):
        store.put("tasks", {"type": "job", "lastError": f"timeout after {i} s"}, f"job-{i:02d}", actor="user:ana")
    store.put("tasks", {"type": "job", "lastError": "something else"}, "job-99", actor="user:ana")
    seen, after, totals = [], None, set()
    while True:
        page = store.search("tasks", "timeout", limit=10, after=after)
        seen += ids(page)
        totals.add(page.total)
        if page.next is None:
            break
        after = page.next
    assert seen == [f"job-{i:02d}" for i in range(25)]
    assert totals == {25}
    assert store.search("tasks", "timeout", limit=25).next is None


def test_a_total_past_the_cap_says_so(store, monkeypatch):
    import ledger.search

    monkeypatch.setattr(ledger.search, "COUNT_CAP", 5)
    monkeypatch.setattr("ledger.sql.COUNT_CAP", 5)
    for i in range(8):
        store.put("tasks", {"lastError": "boom"}, f"j{i}", actor="user:ana")
    page = store.search("tasks", "boom", limit=2)
    assert (page.total, page.capped) == (5, True)
    assert COUNT_CAP == 10_000


def test_past_the_cap_the_pages_are_the_same_ids_in_the_same_order(store, monkeypatch):
    """Past COUNT_CAP the page is read another way (the ids in order, each checked): what it shows may not change."""
    import ledger.search

    for i in range(30):  # ids that match by prefix, by text, by both, and neither, written out of order
        doc_id = f"boom-{(i * 7) % 30:02d}" if i % 3 else f"job-{(i * 11) % 30:02d}"
        store.put("tasks", {"lastError": "boom at step" if i % 4 else "quiet"}, doc_id, actor="user:ana")
    store.put("other", {"lastError": "boom elsewhere"}, "boom-99", actor="user:ana")
    gone = store.put("tasks", {"lastError": "boom deleted"}, "boom-50", actor="user:ana")
    store.delete("tasks", "boom-50", actor="user:ana", if_rev=gone["_rev"])

    def pages(text):
        seen, after = [], None
        while True:
            page = store.search("tasks", text, limit=4, after=after)
            seen.append((ids(page), page.capped))
            if page.next is None:
                return seen
            after = page.next

    few = {text: pages(text) for text in ("boom", "boom step", "job-")}
    monkeypatch.setattr(ledger.search, "COUNT_CAP", 3)
    monkeypatch.setattr("ledger.sql.COUNT_CAP", 3)
    for text, expected in few.items():
        got = pages(text)
        assert [p for p, _ in got] == [p for p, _ in expected], text
        assert all(capped for _, capped in got) and not any(capped for _, capped in expected)
    every = [i for p, _ in few["boom"] for i in p]
    assert every == sorted(every) and "boom-99" not in every and "boom-50" not in every and len(every) == len(set(every))


@pytest.mark.parametrize("text, says", [
    ("", "at least one character"), ("   ", "at least one character"), ("x" * (QUERY_MAX + 1), f"at most {QUERY_MAX}"),
    ("a b c d e f g h i", "at most 8 words"), ("nul\x00", "without NUL"),
])
def test_a_bad_search_is_refused_with_a_reason(store, text, says):
    store.put("tasks", {"lastError": "x"}, "j", actor="user:ana")
    with pytest.raises(Invalid, match=says):
        store.search("tasks", text)


def test_a_search_of_a_database_never_written_says_so(store):
    with pytest.raises(NotFound, match="no database 'nothing'"):
        store.search("nothing", "word")
    store.put("tasks", {"lastError": "x"}, "j", actor="user:ana")
    assert store.search("tasks", "absent").total == 0


@pytest.mark.durable
def test_a_database_made_before_search_is_indexed_when_opened(backend_url):
    make_v3(backend_url)
    body = '{"status":"failed","lastError":"certificate expired"}'
    if backend_url.startswith("sqlite:///"):
        import sqlite3

        conn = sqlite3.connect(backend_url[len("sqlite:///"):])
        with conn:
            conn.execute("INSERT INTO docs VALUES ('tasks', 'old-1', '1-bbbbbbbbbbbbbbbb', ?, 0)", (body,))
        conn.close()
    else:
        with psycopg.connect(backend_url, autocommit=True) as conn:
            conn.execute("INSERT INTO docs VALUES ('tasks', 'old-1', '1-bbbbbbbbbbbbbbbb', %s, 0)", (body,))
    store = open_store(backend_url, Rules(), SYSTEM)
    try:
        assert ids(store.search("tasks", "certif")) == ["old-1"]
        assert ids(store.search("tasks", "old-")) == ["old-1"]
        doc = store.get("tasks", "old-1")
        store.put("tasks", {"status": "failed", "lastError": "renewed"}, "old-1", actor="user:ana", if_rev=doc["_rev"])
        assert ids(store.search("tasks", "certif")) == [] and ids(store.search("tasks", "renewed")) == ["old-1"]
    finally:
        store.close()
