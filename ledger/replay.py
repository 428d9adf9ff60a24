"""Replaying dead letters: the feed's ``replay`` handler.

A person moves a dead letter ``open -> replay`` (``skyhub db bulk retry --db deadletters``, or the
console). This handler, subscribed to ``deadletters``, finds the change the letter is about in the
document's history (by its revision), calls the handler that gave up with that same change, as
that handler (its actor, its settings), and writes the letter ``replayed``, or ``open`` again with
the new error. Handlers guard on status, so replaying a change whose document has moved on since
is as harmless as any redelivery (the feed is at-least-once).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .context import Context, Services, make_context
from .errors import Conflict, LedgerError
from .feed import DEADLETTERS, Handler
from .store import Change, Ledger

log = logging.getLogger(__name__)
NAME = "replay"


def replayer(handlers: Sequence[Handler], services: Services | None = None) -> Handler:
    """The handler that replays dead letters for ``handlers`` (see the module docstring)."""
    by_name = {h.name: h for h in handlers}

    def replay(change: Change, ctx: Context) -> None:
        letter = change.doc
        if change.deleted or letter.get("kind") != "dead-letter" or letter.get("status") != "replay":
            return
        target = by_name.get(str(letter.get("handler")))
        if target is None:
            _back(ctx, letter, f"no handler {letter.get('handler')!r} runs in this hub: dismiss the letter")
            return
        store = ctx.db.store
        db, doc_id, rev = str(letter.get("db")), str(letter.get("docId")), letter.get("rev")
        original = next((c for c in store.history(db, doc_id) if c.rev == rev), None)
        if original is None:
            _back(ctx, letter, f"{db}/{doc_id} has no revision {rev}: nothing to replay; dismiss the letter")
            return
        as_target = make_context(Ledger(store, target.actor, ctx.clock), target.name, services, settings=target.settings)
        try:
            target.fn(original, as_target)
        except Exception as exc:  # noqa: BLE001 - the handler's failure is recorded on the letter, as the feed does
            log.warning("replay of %s failed again: %s", change.id, exc, extra={"db": db, "id": doc_id, "handler": target.name})
            _back(ctx, letter, f"replayed and failed again: {type(exc).__name__}: {exc}")
            return
        _write(ctx, letter, status="replayed", replayedAt=ctx.now(), replays=_replays(letter) + 1)

    return Handler(NAME, [DEADLETTERS], replay, skip_own=True)


def _replays(letter: dict[str, Any]) -> int:
    n = letter.get("replays", 0)
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def _back(ctx: Context, letter: dict[str, Any], error: str) -> None:
    _write(ctx, letter, status="open", error=error, replays=_replays(letter) + 1)


def _write(ctx: Context, letter: dict[str, Any], **fields: Any) -> None:
    body = {k: v for k, v in letter.items() if not k.startswith("_")}
    body.update(fields)
    try:
        ctx.db.put(DEADLETTERS, body, letter["_id"], if_rev=letter["_rev"])
    except Conflict:
        pass  # a person moved the letter meanwhile (dismissed it): theirs stands
    except LedgerError as exc:
        log.warning("replay: could not record %s: %s", letter["_id"], exc.reason)
