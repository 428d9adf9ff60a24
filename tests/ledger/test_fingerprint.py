"""Error fingerprints: the same failure with other ids, numbers and times is one group."""

from __future__ import annotations

from ledger.fingerprint import fingerprint, group, matches, pattern


def test_what_differs_between_occurrences_is_normalised():
    assert pattern("lease expired during attempt 3 of 3 (job 4f1c2d9e0a7b)") == "lease expired during attempt <n> of <n> (job <id>)"
    assert pattern("boom: job 17 at 2026-12-02T08:00:00.120Z") == "boom: job <n> at <time>"
    assert pattern("GET https://graph.example/v21/178414?x=1 failed: 500") == "GET <url> failed: <n>"
    assert pattern("no post 'ig:1784:launch' for did:plc:abc123xyz") == "no post '<text>' for <did>"
    assert pattern("id 0b7e6a4c-1d2e-4f00-9a8b-7c6d5e4f3a2b\n\n   gone") == "id <id> gone"
    assert pattern("ValueError: cafe is fine") == "ValueError: cafe is fine"  # a word is not an id


def test_the_same_failure_has_one_fingerprint_and_another_has_another():
    a = fingerprint("boom: job 1 died at 2026-12-02T08:00:01Z")
    assert a == fingerprint("boom:  job 22 died at 2026-12-03T09:10:11Z")
    assert a != fingerprint("bang: job 1 died at 2026-12-02T08:00:01Z")
    assert a.startswith("fp:") and len(a) == 13


def test_groups_count_and_say_when_they_were_first_and_last_seen_largest_first():
    docs = [{"_id": f"j{i}", "lastError": f"boom {i}", "sweptAt": 1000 + i} for i in range(5)]
    docs += [{"_id": "k", "lastError": "lease expired", "updatedAt": 50}, {"_id": "clean"}]
    docs += [{"_id": "letter", "error": "boom 9", "at": 900}]  # a dead letter's error counts too
    groups = group(docs, "jobs", "failed", "job")
    assert [(g.pattern, g.count) for g in groups] == [("boom <n>", 6), ("lease expired", 1)]
    boom = groups[0]
    assert (boom.first_seen, boom.last_seen, boom.examples, boom.example_error) == (900, 1004, ["j0", "j1", "j2"], "boom 4")
    assert boom.filter() == {"status": "failed", "error": boom.fingerprint, "kind": "job"}


def test_the_error_filter_takes_a_fingerprint_exactly_or_words_in_any_case():
    doc = {"lastError": "Lease expired during attempt 3 of 3"}
    assert matches(doc, "lease EXPIRED")
    assert matches(doc, fingerprint("Lease expired during attempt 1 of 3"))
    assert not matches(doc, fingerprint("Lease expired"))
    assert not matches({"status": "failed"}, "lease")
