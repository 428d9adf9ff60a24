"""Pauses: a tick, an account or a platform stopped on purpose while something is being fixed.

A pause is a document in the ``pauses`` database, one per target, so that every process of a
hub sees it at its next look (no process keeps one in memory): the scheduler reads a tick's
before each run and records the run as ``paused`` instead of running it; a product reads the
pauses once per run of its tick and lets the work of a paused account or platform wait (not an
attempt, as a hold). Resuming is the same document moved on, so its history says who paused
what, why, and who resumed it.

Targets (the document's id):

    tick:NAME           the tick NAME (every process, every slot, also ``skyhub tick NAME``)
    PLATFORM            every account of a platform a product declares pausable (``ig``)
    PLATFORM:ACCOUNT    one account (``ig:17841400000000000``, ``bsky:shop.bsky.social``)

    (new) --person (admin role) or admin--> paused <--> resumed
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from .actor import ADMIN, user
from .errors import Invalid, NotFound
from .machine import Edge, Machine
from .store import Doc, Documents, Ledger

PAUSES = "pauses"
KIND = "pause"
REASON_MAX = 500
_SCOPE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")

NOT_PAUSED = {"sweep": "the sweep returns expired leases (it also wakes at the earliest lease, outside its slots): it is never "
                       "paused; pause the tick whose work should stop instead"}
_OPERATORS = (user(roles=("admin",)), ADMIN)
PAUSE = Machine(
    PAUSES, kind=KIND,
    start={"paused": None},
    edges=[Edge("paused", "resumed", by=_OPERATORS), Edge("resumed", "paused", by=_OPERATORS)],
    create_by=_OPERATORS,
    fixed=["target"],
    terminal=(),
)


def parse_target(text: object, ticks: Collection[str], scopes: Mapping[str, str]) -> str:
    """``text`` as a target's id (see the module docstring), checked against the hub's ``ticks`` and the
    pausable ``scopes`` (platform -> what pausing it means). A bare tick name is ``tick:NAME``."""
    known = f"ticks: {', '.join(sorted(set(ticks) - set(NOT_PAUSED))) or 'none'}; platforms: {', '.join(sorted(scopes)) or 'none'}"
    if not isinstance(text, str) or not text.strip():
        raise Invalid(f"name what to pause: tick:NAME, PLATFORM or PLATFORM:ACCOUNT ({known})")
    text = text.strip()
    head, sep, rest = text.partition(":")
    name = rest if head == "tick" and sep else text
    if name in NOT_PAUSED and name in ticks:
        raise Invalid(f"tick {name!r} cannot be paused: {NOT_PAUSED[name]}")
    if head == "tick" and sep:
        if rest not in ticks:
            raise Invalid(f"no tick named {rest!r} ({known})")
        return text
    if not sep:
        if text in ticks and text not in scopes:
            return f"tick:{text}"
        if text in scopes:
            return text
        raise Invalid(f"nothing to pause is named {text!r}: give tick:NAME, PLATFORM or PLATFORM:ACCOUNT ({known})")
    if head not in scopes or not _SCOPE.match(head):
        raise Invalid(f"no platform named {head!r} ({known})")
    if not rest or len(text) > 200 or any(c.isspace() or ord(c) < 32 for c in rest):
        raise Invalid(f"{text!r} is not an account: write {head}:ACCOUNT (the account as the post names it, no spaces)")
    return text


def pause(db: Ledger, target: str, reason: str | None = None) -> Doc:
    """Pause ``target`` (a checked id, ``parse_target``) as ``db``'s actor; a target already paused stays as it is."""
    reason = _reason(reason)
    head = _head(db, target)
    if head is not None and head.get("status") == "paused":
        return head
    body: dict[str, Any] = {"kind": KIND, "target": target, "status": "paused", "reason": reason, "by": db.actor,
                            "pausedAt": db.now()}
    if head is None:
        return db.put(PAUSES, body, target, create_only=True)
    return db.put(PAUSES, body, target, if_rev=head["_rev"])


def resume(db: Ledger, target: str) -> Doc:
    """Resume ``target`` as ``db``'s actor; NotFound when it is not paused."""
    head = _head(db, target)
    if head is None or head.get("status") != "paused":
        raise NotFound(f"{target} is not paused")
    body = {k: v for k, v in head.items() if not k.startswith("_")}
    body.update(status="resumed", resumedBy=db.actor, resumedAt=db.now())
    return db.put(PAUSES, body, target, if_rev=head["_rev"])


def paused(store: Documents) -> dict[str, Doc]:
    """Every target paused now (id -> its document), through the status index."""
    found: dict[str, Doc] = {}
    after = None
    while True:
        page = store.query(PAUSES, "status", "paused", 200, after)
        found.update((d["_id"], d) for d in page.docs if d.get("kind") == KIND)
        if page.next is None:
            return found
        after = page.next


def tick_paused(store: Documents, name: str) -> Doc | None:
    """The pause of tick ``name``, if it is paused now (one read)."""
    try:
        doc = store.get(PAUSES, f"tick:{name}")
    except NotFound:
        return None
    return doc if doc.get("status") == "paused" and doc.get("kind") == KIND else None


def pause_of(active: Mapping[str, Doc], platform: str, account: str) -> Doc | None:
    """Of the targets paused now (``paused``), the one that stops ``account`` of ``platform``: the account's, else
    the platform's."""
    return active.get(f"{platform}:{account}") or active.get(platform)


def _head(db: Ledger, target: str) -> Doc | None:
    try:
        return db.get(PAUSES, target)
    except NotFound:
        return None


def _reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise Invalid("a pause's reason is text")
    reason = " ".join(reason.split())
    if len(reason) > REASON_MAX:
        raise Invalid(f"a pause's reason is at most {REASON_MAX} characters, not {len(reason)}")
    return reason or None
