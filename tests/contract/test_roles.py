"""Roles in the rules (``Rules.roles_from``), on every local backend: an edge that names roles is
judged by the role the writer holds when the write is made, read from a document of the same
database in the write, never from a cache; the source is asked only when an edge needs it."""

from __future__ import annotations

import pytest

from ledger import ADMIN, Edge, Forbidden, Machine, Rules, user

REVIEWED = Machine(
    "docs", type="draft",
    start=["draft"],
    edges=[
        Edge("draft", "draft", by=user()),
        Edge("draft", "approved", by=[user(roles=("approver", "admin")), ADMIN]),
        Edge("approved", "draft", by=user(roles=("approver",))),
    ],
)


def rules_with_roles(asked: list[str] | None = None) -> Rules:
    rules = Rules([REVIEWED])
    rules.allow("people", free=[ADMIN], blind=[ADMIN])

    def source(actor, read):
        if asked is not None:
            asked.append(actor)
        kind, _, name = actor.partition(":")
        if kind != "user":
            return None
        found = read("people", name)
        return (found or {}).get("role", "admin")

    rules.roles_from(source)
    return rules


def test_an_edge_that_names_roles_admits_only_those_roles(make_store):
    store = make_store(rules=rules_with_roles())
    store.put("people", {"role": "editor"}, "ed", actor="admin")
    store.put("people", {"role": "approver"}, "ann", actor="admin")
    doc = store.put("docs", {"type": "draft", "status": "draft"}, "d1", actor="user:ed")
    with pytest.raises(Forbidden) as refused:
        store.put("docs", {"type": "draft", "status": "approved"}, "d1", actor="user:ed", if_rev=doc["_rev"])
    assert refused.value.reason == ("user:ed as editor may not move a draft from draft to approved "
                                    "(only admin, user:* (approver or admin))")
    assert store.get("docs", "d1")["status"] == "draft"  # nothing written
    moved = store.put("docs", {"type": "draft", "status": "approved"}, "d1", actor="user:ann", if_rev=doc["_rev"])
    assert moved["status"] == "approved"
    # a person without a role document holds the source's default (here: admin)
    other = store.put("docs", {"type": "draft", "status": "draft"}, "d2", actor="user:newcomer")
    assert store.put("docs", {"type": "draft", "status": "approved"}, "d2", actor="user:newcomer", if_rev=other["_rev"])


def test_the_source_is_asked_only_when_an_edge_needs_a_role_and_once_per_write(make_store):
    asked: list[str] = []
    store = make_store(rules=rules_with_roles(asked))
    store.put("people", {"role": "approver"}, "ann", actor="admin")
    doc = store.put("docs", {"type": "draft", "status": "draft", "v": 1}, "d", actor="user:ann")
    doc = store.put("docs", {"type": "draft", "status": "draft", "v": 2}, "d", actor="user:ann", if_rev=doc["_rev"])
    assert asked == []  # creating and editing need no role
    store.put("docs", {"type": "draft", "status": "approved"}, "d", actor="user:ann", if_rev=doc["_rev"])
    assert asked == ["user:ann"]


def test_a_role_changed_elsewhere_holds_for_the_very_next_write(make_store):
    """Two stores on one database stand for two hub processes: nothing is cached between writes."""
    first, second = make_store(rules=rules_with_roles()), make_store(rules=rules_with_roles())
    role = first.put("people", {"role": "approver"}, "ann", actor="admin")
    a = first.put("docs", {"type": "draft", "status": "draft"}, "a", actor="user:ann")
    b = first.put("docs", {"type": "draft", "status": "draft"}, "b", actor="user:ann")
    first.put("docs", {"type": "draft", "status": "approved"}, "a", actor="user:ann", if_rev=a["_rev"])
    second.put("people", {"role": "editor"}, "ann", actor="admin", if_rev=role["_rev"])  # demoted by the other process
    with pytest.raises(Forbidden) as refused:
        first.put("docs", {"type": "draft", "status": "approved"}, "b", actor="user:ann", if_rev=b["_rev"])
    assert "as editor" in refused.value.reason


def test_without_a_role_source_an_edge_with_roles_admits_every_person(make_store):
    store = make_store(rules=Rules([REVIEWED]))
    doc = store.put("docs", {"type": "draft", "status": "draft"}, "d", actor="user:anyone")
    assert store.put("docs", {"type": "draft", "status": "approved"}, "d", actor="user:anyone", if_rev=doc["_rev"])
    assert store.role_of("user:anyone") is None


def test_role_of_reads_the_source_now(make_store):
    store = make_store(rules=rules_with_roles())
    store.put("people", {"role": "editor"}, "ed", actor="admin")
    assert store.role_of("user:ed") == "editor" and store.role_of("device:ci") is None
