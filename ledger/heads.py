"""Heads: the last revision of a document this process saw, so that a write can skip its read.

A write is checked against the head (the machine rules need the old body). On PostgreSQL the
write is one statement that commits only if the head is still at the revision the check used,
and hands back the head as it is otherwise; so the check may use a *guess*, and a wrong guess
costs one more round trip (the same as reading first). The guess comes from here: the
revisions this process wrote, read, or had delivered by the feed (a handler's claim writes
with the ``_rev`` of the change it was given).

A revision names its body: ``_rev`` is ``<n>-<hash>`` with a 64-bit hash over the previous
revision and the body, and ``n`` grows with every write to the document, so a head still at a
remembered revision still has the remembered body.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .document import rev_number

HEADS_KEPT = 4096  # documents remembered per store (the most recently seen)
BODY_KEPT = 64 * 1024  # larger bodies are read again rather than kept
TEXT_KEPT = 8 * 1024 * 1024  # characters of bodies kept in all, at most


class Heads:
    """A bounded, thread-safe map of (db, id) to the newest (rev, JSON text, deleted) seen."""

    def __init__(self, size: int = HEADS_KEPT, text: int = TEXT_KEPT) -> None:
        self._size = size
        self._text = text
        self._kept = 0  # characters of the bodies kept
        self._lock = threading.Lock()
        self._known: OrderedDict[tuple[str, str], tuple[str, str, bool]] = OrderedDict()

    def get(self, db: str, id: str) -> tuple[str, str, bool] | None:
        """The newest (rev, text, deleted) seen for ``db``/``id``, if any."""
        with self._lock:
            return self._known.get((db, id))

    def seen(self, db: str, id: str, rev: str, text: str, deleted: bool, *, head: bool = False) -> None:
        """Remember ``rev`` of ``db``/``id`` unless a newer one is known (``head``: it is the
        head the database has now, so it replaces whatever is known)."""
        if len(text) > BODY_KEPT:
            return
        key = (db, id)
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                if not head and rev_number(known[0]) > rev_number(rev):
                    return
                self._kept -= len(known[1])
            self._known[key] = (rev, text, deleted)
            self._known.move_to_end(key)
            self._kept += len(text)
            while len(self._known) > self._size or self._kept > self._text:
                self._kept -= len(self._known.popitem(last=False)[1][1])

    def forget(self, db: str, id: str) -> None:
        """Drop what is known of ``db``/``id`` (it proved wrong)."""
        with self._lock:
            known = self._known.pop((db, id), None)
            if known is not None:
                self._kept -= len(known[1])
