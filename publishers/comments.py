"""The first comment: one more step after ``done``, taken once, by the same rule as the publish
(``publishers.steps``: intent, then call, then read back).

    platform   status  intent (written first)          call                                          then
    Instagram  done    comment                         POST /{ig-media-id}/comments (message)        commented
    Threads    done    comment-container               a TEXT container with reply_to_id              done, commentContainer
               done    comment {container}             threads_publish, 30 s after the container      commented
    Bluesky    done    comment {rkey} (commentRkey)    a reply in the post's thread, under the key    commented

A post with a ``firstComment`` is written ``done`` with ``commentDue: true`` (the machine checks
it), and the tick finds it through that field's index; ``commented`` clears it. The post is
published either way: ``done`` and ``commented`` both count as published.

**An unfinished comment is resolved by reading, never by calling again blind**: Instagram: the
media's comments (the account's, with this text, from a little before the intent on); Threads:
the reply container's status (PUBLISHED: posted; the reply's id from the account's replies);
Bluesky: the record under its fixed key (read before every call). What a failure means:

    the credential refused, a rate limit, a quota, not ready   nothing was posted: held or tried again,
                                                                not an attempt
    refused for its content (Rejected; a 4xx answer)            the step ends: the post stays done, with
                                                                commentError
    a timeout, a 5xx, a lost answer, a process killed mid-call  ambiguous: the intent stays and is read back;
                                                                ``republish_after`` after the intent with
                                                                nothing found, posted again as an attempt
                                                                (``commentAttempts``; after 3, commentError)

A failed read (the comments, a status) leaves everything as it is for the next run.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from platforms.bluesky import POST, Bluesky, new_rkey
from platforms.errors import AuthFailure, Failed, NotReady, PlatformError, QuotaExceeded, RateLimited, Rejected, Transient
from platforms.meta import Instagram, Threads
from platforms.richtext import facets

from .accounts import Account
from .errors import ContentProblem
from .listing import iso
from .machine import iso_ms
from .steps import Run, Step

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 3
THREADS_SETTLE_MS = 30_000  # as for a post: Meta advises about 30 s between a container and its publish
MATCH_SLACK_MS = 300_000  # Meta's timestamps are whole seconds on Meta's clock: look a little before the intent
PAGES = 3


class FirstComment:
    """One account's due first comments during one run (see the module docstring); ``client`` is the
    account's platform client (the one its posts were published with)."""

    def __init__(self, run: Run, account: Account, credential: str, client: Instagram | Threads | Bluesky) -> None:
        self.run = run
        self.account = account
        self.credential = credential
        self.client = client

    @property
    def name(self) -> str:
        """The platform's name for people."""
        return "Bluesky" if isinstance(self.client, Bluesky) else "Threads" if isinstance(self.client, Threads) else "Instagram"

    def advance(self, doc: dict[str, Any]) -> str:
        """One step of one post's first comment; the outcome, for the run's counts."""
        step = Step(self.run, doc, self.account, self.credential)
        try:
            if isinstance(self.client, Bluesky):
                return self._bluesky(step, self.client)
            if isinstance(self.client, Threads):
                return self._threads(step, self.client)
            return self._instagram(step, self.client)
        except PlatformError as exc:  # a read failed: everything stays as it is for the next run
            return self._read_failed(step, exc)

    # ---- what every platform shares ----------------------------------------------------------
    def _text(self, step: Step) -> str:
        return str(step.doc.get("firstComment") or "")

    def _young(self, step: Step, intent: dict[str, Any]) -> bool:
        return step.now() - int(intent.get("at") or 0) < self.run.ms(self.run.settings.republish_after)

    def _posted(self, step: Step, *, comment_id: str | None = None, uri: str | None = None, cid: str | None = None) -> str:
        step.settle("commented", commentId=comment_id, commentUri=uri, commentCid=cid, commentedAt=iso(step.now()), commentDue=None,
                    intent=None, lastError=None)
        log.info("publish: %s's first comment is posted", step.doc["_id"], extra={"id": step.doc["_id"]})
        return "commented"

    def _give_up(self, step: Step, reason: str) -> str:
        step.settle("done", commentDue=None, commentError=reason, intent=None, lastError=None)
        log.warning("publish: %s's first comment was not posted: %s", step.doc["_id"], reason, extra={"id": step.doc["_id"]})
        return "comment-failed"

    def _attempt(self, step: Step, reason: str) -> int | None:
        """The number of one more attempt, or None (after giving up) when they are used up."""
        used = int(step.doc.get("commentAttempts") or 0)
        if used >= MAX_ATTEMPTS:
            self._give_up(step, f"gave up after {used} attempts: {reason}")
            return None
        return used + 1

    def _refused(self, step: Step, exc: PlatformError) -> str | None:
        """A failed call whose answer says nothing was posted: what is done about it (the intent cleared);
        None when the failure is ambiguous (the comment may be live)."""
        if isinstance(exc, AuthFailure):
            step.report_dead(exc.reason)
            return step.hold(exc.reason, intent=None)
        if isinstance(exc, RateLimited):
            self.account.block(exc.reset_at or step.now() + self.run.ms(self.run.settings.rate_limit_wait), exc.reason)
            step.write(lastError=exc.reason, intent=None)
            return "rate-limited"
        if isinstance(exc, (QuotaExceeded, NotReady)):
            return step.retry_later(exc.reason, intent=None)
        if isinstance(exc, Rejected) or (isinstance(exc, Failed) and exc.http_status is not None and exc.http_status < 500):
            return self._give_up(step, f"{self.name} refused the first comment: {exc.reason}")
        return None

    def _call_failed(self, step: Step, exc: PlatformError) -> str:
        """A call that posts failed: handled when the answer is clear; else the intent stays, noting the
        failure, and the next run reads the comment back."""
        handled = self._refused(step, exc)
        if handled is not None:
            return handled
        intent = {**(step.intent or {}), "failed": {"code": exc.code, "reason": exc.reason}}
        step.settle("done", intent=intent,
                    lastError=f"{exc.reason} (the first comment may still have been posted: it is read back on the next run)")
        return "unknown"

    def _read_failed(self, step: Step, exc: PlatformError) -> str:
        if isinstance(exc, AuthFailure):
            step.report_dead(exc.reason)
            return step.hold(exc.reason)
        if isinstance(exc, RateLimited):
            self.account.block(exc.reset_at or step.now() + self.run.ms(self.run.settings.rate_limit_wait), exc.reason)
            step.write(lastError=exc.reason)
            return "rate-limited"
        if isinstance(exc, (Transient, NotReady, QuotaExceeded)):
            return step.retry_later(exc.reason)
        return self._give_up(step, f"{self.name}: {exc.reason}")

    def _again(self, step: Step, intent: dict[str, Any]) -> int | None | str:
        """An unfinished call whose comment was not found: "busy" while it is young, the attempt number
        to post again with (None: not an attempt, the refusal was clear), or "comment-failed"."""
        noted = intent.get("failed")
        failed: dict[str, Any] = noted if isinstance(noted, dict) else {}
        if failed.get("code") in (QuotaExceeded.code, RateLimited.code, NotReady.code, AuthFailure.code):
            return None
        if self._young(step, intent):
            return "busy"
        reason = str(failed.get("reason") or "the process stopped during the call")
        attempt = self._attempt(step, f"the first comment is not on the post ({reason})")
        return "comment-failed" if attempt is None else attempt

    # ---- Instagram ---------------------------------------------------------------------------
    def _instagram(self, step: Step, client: Instagram) -> str:
        intent = step.intent
        if intent is None or intent.get("step") != "comment":
            return self._ig_call(step, client, None)
        found = self._ig_find(step, client, int(intent.get("at") or 0))
        if found:
            return self._posted(step, comment_id=found)
        again = self._again(step, intent)
        return again if isinstance(again, str) else self._ig_call(step, client, again)

    def _ig_call(self, step: Step, client: Instagram, attempts: int | None) -> str:
        fields: dict[str, Any] = {"intent": {"step": "comment", "at": step.now()}, "lastError": None}
        if attempts is not None:
            fields["commentAttempts"] = attempts
        if not step.write(**fields):
            return "busy"
        try:
            comment_id = client.comment(str(step.doc["mediaId"]), self._text(step))
        except PlatformError as exc:
            return self._call_failed(step, exc)
        return self._posted(step, comment_id=comment_id)

    def _ig_find(self, step: Step, client: Instagram, since: int) -> str | None:
        """The account's comment with this text on the media, from a little before ``since`` on."""
        text, after = self._text(step).strip(), None
        for _ in range(PAGES):
            page = client.comments(str(step.doc["mediaId"]), after=after)
            for c in page.items:
                when = _meta_time(c.timestamp)
                if (c.text or "").strip() == text and c.author in (None, self.account.account) and \
                        (when is None or when >= since - MATCH_SLACK_MS):
                    return c.id
            after = page.after
            if not after:
                break
        return None

    # ---- Threads -----------------------------------------------------------------------------
    def _threads(self, step: Step, client: Threads) -> str:
        intent, container = step.intent, step.doc.get("commentContainer")
        if intent is not None and intent.get("step") == "comment":
            return self._threads_resolve(step, client, intent)
        if intent is not None:  # a reply container's creation was cut short: nothing to read back, nothing visible
            if self._young(step, intent):
                return "busy"
            self.account.created(1, int(intent.get("at") or step.now()))
            return self._threads_container(step, client)
        if not isinstance(container, dict) or not container.get("id"):
            return self._threads_container(step, client)
        if step.now() < (iso_ms(container.get("at")) or 0) + THREADS_SETTLE_MS:
            return "waiting"
        return self._threads_publish(step, client, None)

    def _threads_container(self, step: Step, client: Threads) -> str:
        if not step.mark("comment-container", count=1):
            return "busy"
        try:
            ident = client.create_container(self.account.account, "TEXT", text=self._text(step),
                                            reply_to_id=str(step.doc["mediaId"]))
        except PlatformError as exc:
            handled = self._refused(step, exc)
            if handled is not None:
                return handled
            self.account.created(1, step.now())  # a lost answer may have made one: it expires unpublished
            return step.retry_later(exc.reason, intent=None)
        self.account.created(1, step.now())
        step.write(commentContainer={"id": ident, "at": iso(step.now())}, intent=None, lastError=None)
        return "comment-container"

    def _threads_publish(self, step: Step, client: Threads, attempts: int | None) -> str:
        container = str(step.doc["commentContainer"]["id"])
        fields: dict[str, Any] = {"intent": {"step": "comment", "at": step.now(), "container": container}, "lastError": None}
        if attempts is not None:
            fields["commentAttempts"] = attempts
        if not step.write(**fields):
            return "busy"
        try:
            reply_id = client.publish(self.account.account, container)
        except PlatformError as exc:
            return self._call_failed(step, exc)
        return self._posted(step, comment_id=reply_id)

    def _threads_resolve(self, step: Step, client: Threads, intent: dict[str, Any]) -> str:
        container = str(intent.get("container") or (step.doc.get("commentContainer") or {}).get("id") or "")
        status = client.container_status(container)
        if status.published:
            return self._posted(step, comment_id=self._threads_find(step, client, int(intent.get("at") or 0)) or container)
        if status.dead:
            step.write(commentContainer=None, intent=None,
                       lastError=f"Threads reply container {container} is {status.status}: a new one is made")
            return "recreate"
        if not status.ready:
            return step.retry_later(f"Threads is still processing reply container {container} ({status.status or 'no status'})")
        again = self._again(step, intent)
        return again if isinstance(again, str) else self._threads_publish(step, client, again)

    def _threads_find(self, step: Step, client: Threads, since: int) -> str | None:
        text = self._text(step).strip()
        for media in client.replies(self.account.account).items:
            when = _meta_time(media.timestamp)
            if (media.text or "").strip() == text and (when is None or when >= since - MATCH_SLACK_MS):
                return media.id
        return None

    # ---- Bluesky -----------------------------------------------------------------------------
    def _bluesky(self, step: Step, client: Bluesky) -> str:
        intent = step.intent
        if intent is not None and self._young(step, intent):
            return "busy"  # a process may be posting it right now; the key makes a second call harmless anyway
        rkey = str(step.doc.get("commentRkey") or new_rkey(step.now()))
        if not step.write(intent={"step": "comment", "at": step.now(), "rkey": rkey}, commentRkey=rkey, lastError=None):
            return "busy"
        try:
            ref = self._bluesky_reply(step, client, rkey)
        except ContentProblem as exc:
            return self._give_up(step, exc.reason) if exc.permanent else step.retry_later(exc.reason, intent=None)
        except PlatformError as exc:
            handled = self._refused(step, exc)
            # ambiguous: the key is fixed, and the next run reads it back before anything else
            return handled if handled is not None else step.retry_later(exc.reason, intent=None)
        return self._posted(step, uri=ref["uri"], cid=ref["cid"])

    def _bluesky_reply(self, step: Step, client: Bluesky, rkey: str) -> dict[str, str]:
        doc = step.doc
        existing = client.get_record(POST, rkey)  # read back first: a crash after createRecord posted it
        if existing is not None:
            return {"uri": existing["uri"], "cid": existing["cid"]}
        if not doc.get("recordUri") or not doc.get("recordCid"):
            raise ContentProblem("the post's record is not known (recordUri, recordCid): the first comment cannot reply to it",
                                 permanent=True)
        parent = {"uri": str(doc["recordUri"]), "cid": str(doc["recordCid"])}
        root = parent
        if doc.get("replyTo"):  # the post is itself a reply: its comment joins the same thread
            mine = client.get_record(POST, str(doc.get("rkey") or ""))
            found = ((mine or {}).get("value") or {}).get("reply", {}).get("root") if mine else None
            if isinstance(found, dict) and found.get("uri") and found.get("cid"):
                root = {"uri": str(found["uri"]), "cid": str(found["cid"])}
        text = self._text(step)
        ref = client.reply(rkey, text, facets(text, client.resolve_handle), root, parent, created_at=iso(step.now()))
        return {"uri": ref["uri"], "cid": ref["cid"]}


def _meta_time(value: str | None) -> int | None:
    """Meta's ``2024-05-01T12:00:00+0000`` as epoch ms."""
    if not value:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f%z"):
        try:
            return int(datetime.strptime(value, fmt).timestamp() * 1000)
        except ValueError:
            continue
    return None
