"""The ``publish`` tick: one step for every queued post that is due, never twice.

Per run, in this order:

1. **The queue**, read once through the ``status`` index (``approved``, ``pending``,
   ``items-created``, ``carousel-created``, and ``needs-person``: looked at again once its rivals
   are resolved) and the ``commentDue`` index (``done`` posts whose first comment is next), page
   by page, keeping ``kind: "publish-request"`` documents that are due (``notBefore``, and
   ``at`` for raw writes, in the past). An approved post that is due is moved to ``pending``
   first (and stepped in the same run).
2. **Checked again**: a request that has not started is held to the rules once more, with the
   hub's settings now (``validate.problems``); one that breaks them ends ``error`` with the
   reason, before anything is fetched or sent.
3. **Raw duplicates**: a request written raw (``db put`` without an ``_id``) whose platform,
   account and slug an earlier request already has ends ``skipped`` with the reason.
4. **Per account**: its document in ``publish`` (read once; a block makes all its requests
   wait), its credential (checked and revealed once: missing or flagged holds every request of
   the account, visibly and not as an attempt), then one step per request, in queue order
   (``publishers.containers`` for Instagram and Threads, ``publishers.bluesky`` for Bluesky,
   ``publishers.comments`` for a first comment).
   The account document is written once at the end, only if something changed. A paused
   account or platform (``ledger/pause.py``, read once a run) is passed over: its requests
   wait as they are, not an attempt.

Everything the tick knows lives in the documents; times come from ``ctx.now()``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ledger import Conflict, Context, Forbidden, LedgerError, NotFound, TickEvent
from ledger.pause import pause_of, paused

from .accounts import Account
from .admission import Admission
from .machine import DB, KIND, STEPS
from .queue import request_id
from .steps import Run
from .validate import CREDENTIAL_PLATFORM, parse_at, problems

log = logging.getLogger(__name__)
PAGE = 200
UNWRITTEN = frozenset({"busy", "waiting"})  # outcomes of a step that wrote nothing (a hold must still be released)


@dataclass(frozen=True)
class Credential:
    """The credential a run uses for one account, or why it cannot (``held``)."""

    id: str
    secret: dict[str, Any] | None = field(default=None, repr=False)  # never in a repr, a log or an error
    held: str | None = None
    problem: str | None = None  # ``held`` without the command that fixes it (pages link the fix instead)


def publish(event: TickEvent, ctx: Context) -> dict[str, int]:
    """The ``publish`` tick (see the module docstring); how many requests ended each way."""
    run = Run(ctx)
    admission: Admission | None = None  # read when a post is checked again: a run with none to check makes no fetcher
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for doc in due(run):
        if doc["status"] == "approved":
            promoted = promote(run, doc)
            if promoted is None:
                continue
            doc = promoted
        if doc["status"] == "pending" and not doc.get("intent"):
            if admission is None:
                admission = _admission(run)
            if refused(run, doc, admission) or duplicate_of(run, doc):
                continue
        groups.setdefault((doc["platform"], doc["account"]), []).append(doc)
    stopped = paused(ctx.db.store) if groups else {}  # read once a run: a pause written meanwhile holds from the next
    for (platform, account), docs in groups.items():
        if pause_of(stopped, platform, account) is not None:
            run.counts["paused"] += len(docs)  # they wait, as for a hold: not an attempt, nothing written
            continue
        advance_account(run, platform, account, docs)
    return dict(run.counts)


def queued(run: Run) -> Iterator[dict[str, Any]]:
    """Every queued request, through the status index, and every done one whose first comment is due
    (``commentDue``), a page at a time."""
    for status in ("approved", *STEPS, "needs-person"):
        for doc in run.ctx.db.query_all(DB, "status", status, page_size=PAGE):
            if doc.get("kind") == KIND:
                yield doc
    for doc in run.ctx.db.query_all(DB, "commentDue", True, page_size=PAGE):
        if doc.get("kind") == KIND and doc.get("status") == "done":
            yield doc


def promote(run: Run, doc: dict[str, Any]) -> dict[str, Any] | None:
    """Queue an approved post whose time has come (``approved`` -> ``pending``); None when another process moved it."""
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body.update(status="pending", updatedAt=run.now())
    try:
        moved = run.ctx.db.put(DB, body, doc["_id"], if_rev=doc["_rev"])
    except (Conflict, Forbidden):
        return None
    run.counts["queued"] += 1
    return moved


def due(run: Run) -> list[dict[str, Any]]:
    """The queued requests whose time has come, oldest first."""
    now = run.now()
    out = []
    for doc in queued(run):
        when = max(_ms(doc.get("notBefore")), parse_at(doc.get("at")) or 0)
        if when > now:
            run.counts["not-yet"] += 1
            continue
        out.append(doc)
    out.sort(key=lambda d: (str(d.get("createdAt") or ""), d["_id"]))
    return out


def _ms(value: Any) -> int:
    """An epoch-ms field as written by the tick; anything else (a raw write's typo) counts as unset."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _admission(run: Run) -> Admission:
    """The hub's rules as this run sees them: its settings, and the fetcher's policy."""
    try:
        web = run.ctx.fetch.policy
    except LedgerError:  # a context without a fetcher (a test): the strictest policy
        web = Admission().web
    return dataclasses.replace(Admission.of(run.settings, None), web=web)


def refused(run: Run, doc: dict[str, Any], admission: Admission) -> bool:
    """Check a post again before its first step, with the hub's settings now (a post queued before
    a setting changed, or before a rule existed, is held to today's): nothing checked at queue time
    is trusted blindly. True when it ended in ``error``."""
    found = problems(doc, admission=admission)
    if not found:
        return False
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body.update(status="error", lastError="this post breaks the hub's rules now: " + "; ".join(found), updatedAt=run.now())
    try:
        run.ctx.db.put(DB, body, doc["_id"], if_rev=doc["_rev"])
    except (Conflict, Forbidden):
        return True  # moved meanwhile: not this run's to step
    run.counts["error"] += 1
    log.warning("publish: %s refused: %s", doc["_id"], body["lastError"], extra={"db": DB, "id": doc["_id"]})
    return True


def duplicate_of(run: Run, doc: dict[str, Any]) -> bool:
    """Skip a raw request (an id the store made) when an earlier one has its platform, account
    and slug; True when it was skipped."""
    canonical = request_id(doc["platform"], doc["account"], doc["slug"])
    if doc["_id"] == canonical:
        return False
    mine = (str(doc.get("createdAt") or ""), doc["_id"])
    first: dict[str, Any] | None = None
    for other in run.ctx.db.query_all(DB, "slug", doc["slug"]):
        if (other.get("kind") != KIND or other["_id"] == doc["_id"] or other.get("platform") != doc["platform"]
                or other.get("account") != doc["account"] or other.get("status") in ("cancelled", "skipped")):
            continue
        theirs = (str(other.get("createdAt") or ""), other["_id"])
        if other["_id"] == canonical or theirs < mine:
            first = other
            break
    if first is None:
        return False
    body = {k: v for k, v in doc.items() if not k.startswith("_")}
    body.update(status="skipped", skipReason=f"duplicate: {first['_id']} already has platform {doc['platform']}, account "
                                              f"{doc['account']} and slug {doc['slug']} ({first.get('status')})")
    try:
        run.ctx.db.put(DB, body, doc["_id"], if_rev=doc["_rev"])
    except (Conflict, Forbidden):
        return True  # moved meanwhile: not this run's to step
    run.counts["skipped"] += 1
    return True


def advance_account(run: Run, platform: str, account: str, docs: list[dict[str, Any]]) -> None:
    """One step for each of one account's due requests."""
    acct = Account.load(run.ctx.db, platform, account)
    try:
        if acct.blocked(run.now()):
            run.counts["blocked"] += len(docs)
            return
        cred = credential(run, platform, account)
        if cred.held is not None:
            for doc in docs:
                run.counts["held"] += 1
                hold(run, doc, cred)
            return
        assert cred.secret is not None
        try:
            stepper = _stepper(run, platform, acct, cred)
        except LedgerError as exc:  # the session would not load: every request of the account waits
            log.warning("publish: %s: %s", acct.id, exc.reason)
            run.counts["retry-later"] += len(docs)
            return
        for doc in docs:
            if acct.blocked(run.now()):
                run.counts["blocked"] += 1
                continue
            try:
                outcome = _comment(run, stepper, doc) if doc["status"] == "done" else stepper.advance(doc)
            except (LedgerError, ValueError, TypeError, KeyError) as exc:
                # a write the store refused, or a raw document with a field of the wrong type: that
                # request stays as it is (visible in the log), and every other request goes on
                reason = exc.reason if isinstance(exc, LedgerError) else f"{type(exc).__name__}: {exc}"
                log.warning("publish: %s was not stepped: %s", doc["_id"], reason, extra={"db": DB, "id": doc["_id"]})
                outcome = "refused"
            run.counts[outcome] += 1
            if doc.get("held") and outcome in UNWRITTEN:
                release(run, doc)
    finally:
        acct.save(run.ctx.db)


def _comment(run: Run, stepper: Any, doc: dict[str, Any]) -> str:
    from .comments import FirstComment  # loads with the first due comment

    return FirstComment(run, stepper.account, stepper.credential, stepper.client).advance(doc)


def _stepper(run: Run, platform: str, acct: Account, cred: Credential) -> Any:
    p = run.ctx.platforms
    secret = cred.secret or {}
    if platform == "bsky":
        from platforms.bluesky import Bluesky

        from .bluesky import Posts

        session = secret["session"]
        return Posts(run, acct, cred.id, Bluesky(run.ctx.http, session.get("pds") or p.bluesky_pds, session))
    from platforms.clients import publishing_client
    from platforms.graph import RetryPolicy

    from .containers import Containers

    retry = RetryPolicy(attempts=run.settings.retries, wait=run.settings.retry_wait, sleep=run.ctx.clock.sleep)
    login = "threads" if platform == "threads" else "facebook" if cred.id.startswith("facebook:") else "instagram"
    client = publishing_client(run.ctx.http, login, str(secret.get("accessToken") or ""), p, retry=retry, now_ms=run.now)
    return Containers(run, acct, cred.id, client)


def candidates(platform: str, account: str) -> list[str]:
    """The vault ids that may hold an account's credential, in the order they are tried."""
    if platform == "ig":
        return [f"instagram:{account}", f"facebook:{account}"]  # Instagram Login first, then Facebook Login
    return [f"{CREDENTIAL_PLATFORM[platform]}:{account}"]


def credential(run: Run, platform: str, account: str) -> Credential:
    """The account's usable credential, or why its requests are held."""
    from vault import NeedsReauth, VaultError

    vault = run.ctx.vault
    ids = candidates(platform, account)
    for cred_id in ids:
        try:
            vault.usable(cred_id)
        except NotFound:
            continue
        except NeedsReauth as exc:
            return Credential(cred_id, held=exc.reason, problem=exc.problem)
        try:
            secret = vault.reveal(cred_id)
        except VaultError as exc:
            return Credential(cred_id, held=exc.reason)
        if platform == "bsky" and not secret.get("session"):
            return Credential(cred_id, held=f"{cred_id} has no session yet: the vault tick makes one once the app password is verified")
        return Credential(cred_id, secret=secret)
    paste = " or ".join(f"`skyhub vault put {c.replace(':', ' ', 1)}`" for c in ids)
    missing = "no credential for this account in the vault"
    return Credential(ids[0], held=f"{missing}: paste one with {paste}", problem=missing)


def release(run: Run, doc: dict[str, Any]) -> None:
    """Clear a hold whose credential is usable again, when the step itself wrote nothing."""
    from vault import release as vault_release

    try:
        vault_release(run.ctx.db, DB, run.ctx.db.get(DB, doc["_id"]))
    except (Conflict, Forbidden, NotFound):
        pass  # moved meanwhile: that write released it


def hold(run: Run, doc: dict[str, Any], cred: Credential) -> None:
    """Hold a request for its credential (a no-op when it is already held for the same reason)."""
    from vault import hold as vault_hold

    try:
        vault_hold(run.ctx.db, DB, doc, cred.id, cred.held or "", problem=cred.problem)
    except (Conflict, Forbidden):
        pass  # moved meanwhile: the next run sees it
