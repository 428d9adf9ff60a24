"""The publishing machine: database ``requests``, ``kind: "publish-request"``.

One document is one post on one network: a *variant*. A post for several networks is several
variants sharing ``post`` (the post's slug, see ``publishers.posts``); each walks this machine.

    draft --> in-review --> approved --> pending              review: editors write, approvers approve
    draft | in-review --> pending                              queued directly (an approver; an editor unless
                                                               publish.require_review)
    in-review --> draft                                        rejected (an approver, with a reason) or withdrawn
    approved | pending --> in-review                           an editor's change goes back to review
    approved --> pending                                       the tick, once the post's time has come
    pending --> items-created --> carousel-created --> done    an Instagram or Threads carousel
    pending --> carousel-created --> done                      one container (one image, or text)
    pending --> done                                           Bluesky: one record
    done --> commented                                         the first comment, when the post has one
    pending --> skipped                                        a raw duplicate of an earlier request
    X --> X                                                    intents, holds, waits (tick:publish); edits
                                                               and comments (people, before the first step)
    X --> error                                                with a lastError (tick:publish)
    items-created | carousel-created --> pending               recreate (expired or failed containers), at most twice
    carousel-created --> needs-person --> done                 a publish that went live and cannot be told apart
                                                               from another post's: an approver picks its media
    draft | in-review | approved | pending --> cancelled       people: cancel (not while a call is in flight)
    error --> pending                                          people: retry

**Roles** (``hub.auth``: editor, approver, admin; a person without one is admin): every person
writes drafts, submits them, edits them and comments; approvers and admins approve, reject,
resolve and edit an approved post in place; ``publish.require_review`` makes an editor's post
wait for an approver (it can be created ``draft`` or ``in-review``, never ``pending``). The
edges name the roles (``user(roles=...)``) and the guards read them in the write's transaction,
so every door (the CLI, the API, the console, a raw ``db put``) meets the same rules.

**Content** (caption, images, alt texts, first comment, time) may change while no step has been
taken: in ``draft``, ``in-review``, ``approved``, and ``pending`` until the tick writes its first
intent (``startedAt``). From then on it is fixed (the ``content`` invariant); a person changes
such a post by cancelling and duplicating it. Every change is a revision in the history.

The tick walks one step per request per run; intents are written with ``if_rev`` before any
call that creates something remote, so a crash, a timeout or a second process never makes it
publish (or comment) twice. ``done`` is where a post is published; ``commented`` follows it
when the post has a first comment, so both count as published (``PUBLISHED``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ledger import ADMIN, Edge, Guard, GuardContext, Machine, Move, fresh, tick, user

DB = "requests"
KIND = "publish-request"
MAX_RECREATES = 2
PUBLISHER = tick("publish")
EDITOR, APPROVER, ADMIN_ROLE = "editor", "approver", "admin"  # the roles of hub.auth
APPROVING = (APPROVER, ADMIN_ROLE)
PEOPLE = [user(), ADMIN]  # every person, whatever their role
APPROVERS = [user(roles=APPROVING), ADMIN]
REVIEW = ("draft", "in-review", "approved")  # before the queue: the manager's, not the tick's
EDITABLE = (*REVIEW, "pending")  # where content may change (pending: until the first intent)
PUBLISHED = ("done", "commented")  # a post that is live
CONTENT = ("caption", "text", "images", "replyTo", "at", "firstComment", "day")
COMMENT_FIELDS = ("commentDue", "commentId", "commentUri", "commentCid", "commentRkey", "commentContainer", "commentedAt",
                  "commentAttempts", "commentError")
# What the tick writes as it walks a post: a retried post starts over without any of them.
TICK_FIELDS = ("mediaId", "recordUri", "recordCid", "permalink", "publishedAt", "intent", "containers", "carouselId",
               "carouselAt", "checks", "held", "rkey", "recreates", "fetchedAgain", "candidates", "lastError", "notBefore",
               "startedAt", *COMMENT_FIELDS)
MAX_COMMENTS = 200
COMMENT_CHARS = 2000
REASON_CHARS = 1000
CLOCK_SLACK_MS = 600_000  # a comment's or a review's time may be this far from the store's (a client's clock)


def _people(ctx: GuardContext) -> bool:
    return ctx.actor == "admin" or ctx.actor.startswith("user:")


def require_review(ctx: GuardContext) -> bool:
    """Whether the hub's ``publish.require_review`` is on (off for a store opened without settings)."""
    return bool(getattr(ctx.section("publish"), "require_review", False))


def started(doc: dict[str, Any]) -> str | None:
    """Why a post's content is fixed (the tick has taken a step), or None while it may change."""
    if doc.get("status") not in EDITABLE:
        return f"it is {doc.get('status')}"
    if doc.get("startedAt") or isinstance(doc.get("intent"), dict):
        return "the publish tick has started it"
    for name in ("rkey", "containers", "carouselId", "mediaId", "recordUri"):
        if doc.get(name):
            return "the publish tick has started it"
    return None


def iso_ms(value: Any) -> int | None:
    """An ISO 8601 time with its offset (``...Z``) as epoch ms; None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(when.timestamp() * 1000) if when.tzinfo is not None else None


def _signed(entry: Any, ctx: GuardContext, what: str) -> str | None:
    """A record people write (a comment, a review): by the writer, now."""
    if not isinstance(entry, dict):
        return f"{what} must be an object with by, at and text"
    if entry.get("by") != ctx.actor:
        return f"{what} must be signed by its writer: by must be {ctx.actor!r}"
    at = iso_ms(entry.get("at"))
    if at is None or abs(at - ctx.now_ms) > CLOCK_SLACK_MS:
        return f"{what} needs at: the time it is written (ISO 8601 UTC, like 2026-12-01T09:00:00Z)"
    return None


# ---- guards of new posts ------------------------------------------------------------------------
def _valid(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    refused = fresh(old, new, ctx)
    if refused:
        return refused
    from .admission import Admission, creator_problem  # each platform's rules load with the first new post
    from .validate import new_problems

    refused = creator_problem(ctx)
    if refused:
        return refused
    found = new_problems(new, Admission.for_guard(ctx))
    if "comments" in new:
        found.append("a new post starts without comments: add them once it is written")
    if "review" in new and new.get("status") != "in-review":
        found.append("a new post carries a review only when it is created in review (status in-review)")
    return "; ".join(found) if found else None


def _may_queue(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    if require_review(ctx) and not ctx.holds(*APPROVING):
        return (f"{ctx.actor} is an editor and this hub requires review (publish.require_review): the post waits for an "
                "approver; save it as a draft or submit it for review")
    return None


def _new_queued(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    return _valid(old, new, ctx) or _may_queue(old, new, ctx)


def _verdict(verdict: str) -> Guard:
    def check(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
        review = new.get("review")
        refused = _signed(review, ctx, "the review")
        if refused:
            return refused
        assert isinstance(review, dict)
        if review.get("verdict") != verdict:
            return f"this move records a review with verdict {verdict!r}, not {review.get('verdict')!r}"
        if set(review) - {"by", "at", "verdict", "reason"}:
            return "a review is {by, at, verdict, reason}"
        reason = review.get("reason")
        if verdict == "rejected" and not (isinstance(reason, str) and reason.strip()):
            return "a rejection needs a reason: say what to change"
        if reason is not None and (not isinstance(reason, str) or len(reason) > REASON_CHARS):
            return f"a review's reason is text of at most {REASON_CHARS:,} characters"
        return None

    return Guard(verdict, check)


def _new_in_review(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    return _valid(old, new, ctx) or submitted(old, new, ctx)


def _withdrawn(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    review = new.get("review")
    if review == (old or {}).get("review"):
        return None
    if isinstance(review, dict) and review.get("verdict") == "rejected":
        return f"{ctx.actor} may not reject a post: approvers and admins do (an editor withdraws it instead)"
    return _verdict("withdrawn")(old, new, ctx)


def _not_started(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    why = started(old or {})
    return f"{ctx.doc_id or 'this post'} cannot be changed by a person now: {why}" if why else None


def _editor_change(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    """A person who is not an approver changes a queued or approved post: only comments, unless review is not required."""
    refused = _not_started(old, new, ctx)
    if refused:
        return refused
    changed = [f for f in CONTENT if (old or {}).get(f) != new.get(f)]
    if not changed or (old or {}).get("status") == "pending" and not require_review(ctx):
        return None
    what = "an approved post" if (old or {}).get("status") == "approved" else "a queued post (publish.require_review)"
    return f"{ctx.actor} is an editor: a change to {what} goes back to review; submit the change (status in-review)"


def _no_call_in_flight(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    doc = old or {}
    if isinstance(doc.get("intent"), dict):
        return f"a call for this post is under way ({doc['intent'].get('step')}): it cannot be cancelled until it is read back"
    if doc.get("rkey"):
        return "this Bluesky post may already be live under its record key: it cannot be cancelled (its steps show what happened)"
    return None


# ---- what every write of an existing post holds (the invariants) -------------------------------
def _content(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    """Content changes only by people, only while no step was taken; the schedule follows ``at``; the tick's fields are the tick's."""
    from .validate import day_of, parse_at

    old = old or {}
    person = _people(ctx)
    changed = [f for f in CONTENT if old.get(f) != new.get(f)]
    if changed and not person:
        return f"{ctx.actor} may not change a post's {changed[0]}: only people edit posts"
    at = new.get("at")
    rescheduled = "at" in changed and new.get("notBefore") == (parse_at(at) if at is not None else None)
    if changed:
        why = started(old)
        if why:
            return (f"the content of {ctx.doc_id or 'this post'} is fixed ({why}): cancel it and duplicate it to post "
                    "something else")
        if "at" in changed and not rescheduled:
            return "notBefore is written from at: give at (a time with its zone) and notBefore with it"
        if "day" in new and new["day"] != day_of(new):
            return "day is the UTC date of the post's time (at, else createdAt)"
    retried = old.get("status") == "error" and new.get("status") == "pending"
    resolved = old.get("status") == "needs-person"
    if person and not retried and not resolved:
        touched = [f for f in (*TICK_FIELDS, "attempts") if old.get(f) != new.get(f) and not (f == "notBefore" and rescheduled)]
        if touched:
            return f"{touched[0]} is the publish tick's to write, not a person's"
    return None


REVIEW_MOVES = {("draft", "in-review"), ("approved", "in-review"), ("pending", "in-review"), ("in-review", "approved"),
                ("draft", "approved"), ("in-review", "draft")}


def _conversation(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    """Comments are kept: people add one at a time, signed and dated; a review is written only by a review move."""
    old = old or {}
    if old.get("review") != new.get("review") and (old.get("status"), new.get("status")) not in REVIEW_MOVES:
        return "a review is written only when a post is submitted, approved, rejected or withdrawn"
    before = old.get("comments") or []
    after = new.get("comments") or []
    if before == after:
        return None
    if not _people(ctx):
        return f"{ctx.actor} may not write a post's comments: people do"
    if not isinstance(after, list) or after[:len(before)] != before:
        return "comments are kept: add one at the end, never change or remove one"
    if len(after) != len(before) + 1:
        return "add one comment at a time"
    if len(after) > MAX_COMMENTS:
        return f"a post keeps at most {MAX_COMMENTS} comments"
    entry = after[-1]
    refused = _signed(entry, ctx, "a comment")
    if refused:
        return refused
    if set(entry) - {"by", "at", "text"}:
        return "a comment is {by, at, text}"
    text = entry.get("text")
    if not isinstance(text, str) or not text.strip() or len(text) > COMMENT_CHARS:
        return f"a comment is text of 1 to {COMMENT_CHARS:,} characters"
    return None


# ---- guards of the tick's edges ---------------------------------------------------------------------
def _published(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    if not (new.get("mediaId") or new.get("recordUri")):
        return "a done post needs its mediaId (Instagram, Threads) or recordUri (Bluesky)"
    if not new.get("permalink"):
        return "a done post needs its permalink"
    if (old or {}).get("status") != "done" and new.get("firstComment") and new.get("commentDue") is not True:
        return "a post with a first comment is done with commentDue: true (the comment is the next step)"
    return None


def _commented(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    if not new.get("firstComment"):
        return "only a post with a first comment is commented"
    if not (new.get("commentId") or new.get("commentUri")):
        return "a commented post needs its commentId (Instagram, Threads) or commentUri (Bluesky)"
    if "commentDue" in new:
        return "a commented post has no comment due"
    return None


def _has_error(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    return None if new.get("lastError") else "an error needs a lastError saying what went wrong"


def _has_reason(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    return None if new.get("skipReason") else "a skipped post needs a skipReason"


def _recreate(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    done = int((old or {}).get("recreates") or 0)
    if done >= MAX_RECREATES:
        return f"containers were recreated {done} times already; the limit is {MAX_RECREATES}"
    if new.get("recreates") != done + 1:
        return f"a recreate counts itself: recreates must go from {done} to {done + 1}"
    return None


def _retry(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    for field in TICK_FIELDS:
        if field in new and field not in ("lastError", "notBefore"):
            return f"a retried post starts over without {field}"
    if new.get("attempts") != 0:
        return "a retried post starts over with attempts at 0"
    return None


def _candidates(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    found = new.get("candidates")
    if not isinstance(found, list) or not found or not all(isinstance(c, dict) and c.get("mediaId") for c in found):
        return "a post that needs a person lists the candidate media (candidates: [{mediaId, permalink, timestamp}])"
    return None


def _chosen(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    refused = _published(old, new, ctx)
    if refused:
        return refused
    offered = {str(c.get("mediaId")) for c in (old or {}).get("candidates") or [] if isinstance(c, dict)}
    if str(new.get("mediaId")) not in offered:
        return f"choose one of the candidate media ({', '.join(sorted(offered))})"
    return None


def _due(old: dict[str, Any] | None, new: dict[str, Any], ctx: GuardContext) -> str | None:
    at = (old or {}).get("notBefore")
    if isinstance(at, int) and not isinstance(at, bool) and at > ctx.now_ms:
        return "an approved post is queued once its time has come"
    return None


def repeats_publish(doc: dict[str, Any]) -> str | None:
    """Why retrying a post in error may publish it twice (None: nothing went out): a publish call whose
    outcome was never read back (its ``intent`` is kept on the error), or a post the platform already has."""
    intent = doc.get("intent")
    if isinstance(intent, dict):
        return (f"its {intent.get('step', 'last')} call may have gone out (its outcome was never read back): "
                "a retry repeats it, and the post may appear twice")
    for field in ("publishedAt", "mediaId", "recordUri"):
        if doc.get(field):
            return f"it was published already ({field} is set): a retry publishes it again"
    return None


valid_request = Guard("valid", _valid)
new_queued = Guard("valid, may queue", _new_queued)
new_in_review = Guard("valid, submitted", _new_in_review)
may_queue = Guard("may queue", _may_queue)
submitted = _verdict("submitted")
approved = _verdict("approved")
rejected = _verdict("rejected")
withdrawn = Guard("withdrawn", _withdrawn)
not_started = Guard("not started", _not_started)
editor_change = Guard("not started, editor's change", _editor_change)
no_call_in_flight = Guard("no call in flight", _no_call_in_flight)
content = Guard("content", _content)
conversation = Guard("comments", _conversation)
published = Guard("published", _published)
commented = Guard("commented", _commented)
has_error = Guard("lastError", _has_error)
has_reason = Guard("skipReason", _has_reason)
recreate = Guard("recreate", _recreate)
retry = Guard("retry", _retry)
has_candidates = Guard("candidates", _candidates)
chosen = Guard("one of the candidates", _chosen)
due = Guard("due", _due)

STEPS = ("pending", "items-created", "carousel-created")

PUBLISH = Machine(
    DB,
    kind=KIND,
    start={"draft": valid_request, "in-review": new_in_review, "pending": new_queued},
    edges=[
        # review: drafts, submissions, approvals, rejections (people; the roles decide)
        Edge("draft", "draft", by=PEOPLE),  # edits and comments
        Edge("draft", "in-review", by=PEOPLE, guards=[submitted]),
        Edge(["draft", "in-review"], "approved", by=APPROVERS, guards=[approved]),
        Edge(["draft", "in-review"], "pending", by=PEOPLE, guards=[may_queue]),
        Edge("in-review", "in-review", by=PEOPLE),
        Edge("in-review", "draft", by=APPROVERS, guards=[rejected]),
        Edge("in-review", "draft", by=PEOPLE, guards=[withdrawn]),
        Edge("approved", "approved", by=APPROVERS),
        Edge("approved", "approved", by=PEOPLE, guards=[editor_change]),
        Edge(["approved", "pending"], "in-review", by=PEOPLE, guards=[not_started, submitted]),
        Edge("approved", "pending", by=PUBLISHER, guards=[due]),
        Edge("pending", "pending", by=APPROVERS, guards=[not_started]),
        Edge("pending", "pending", by=PEOPLE, guards=[editor_change]),
        Edge(list(REVIEW), "cancelled", by=PEOPLE),
        Edge("pending", "cancelled", by=PEOPLE, guards=[no_call_in_flight]),
        # the platform walk (tick:publish)
        Edge("pending", "items-created", by=PUBLISHER),
        Edge(["pending", "items-created"], "carousel-created", by=PUBLISHER),
        Edge(["pending", "carousel-created"], "done", by=PUBLISHER, guards=[published]),
        Edge("pending", "skipped", by=PUBLISHER, guards=[has_reason]),
        Edge(list(STEPS), "error", by=PUBLISHER, guards=[has_error]),
        Edge(["items-created", "carousel-created"], "pending", by=PUBLISHER, guards=[recreate]),
        Edge("pending", "pending", by=PUBLISHER),  # intents, holds, waits on each step
        Edge("items-created", "items-created", by=PUBLISHER),
        Edge("carousel-created", "carousel-created", by=PUBLISHER),
        Edge("carousel-created", "needs-person", by=PUBLISHER, guards=[has_candidates]),
        Edge("needs-person", "needs-person", by=PUBLISHER, guards=[has_candidates]),
        Edge("needs-person", "done", by=[*APPROVERS, PUBLISHER], guards=[chosen]),
        Edge("done", "done", by=PUBLISHER),  # the first comment's intents, holds and waits
        Edge("done", "commented", by=PUBLISHER, guards=[commented]),
        Edge("error", "pending", by=PEOPLE, guards=[retry]),
    ],
    fixed=["platform", "account", "slug", "post"],
    invariants=[content, conversation],
    settled=["done"],
    moves=[
        Move("retry", "error", "pending", reset={"attempts": 0, **dict.fromkeys(TICK_FIELDS)}, warn=repeats_publish),
        Move("cancel", list(EDITABLE), "cancelled"),
    ],
    max_attempts=3,
    indexes=["post", "day", "commentDue"],
)
