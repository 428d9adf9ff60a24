"""Instagram and Threads: publishing through Meta's media containers, one step per run.

    status             intent (written first)        call(s)                                   next status
    pending (2+ imgs)  items {count}                 one child container per image             items-created
                                                     (is_carousel_item, alt_text; ids, times)
    pending (1 image   container {count: 1}          one container (caption; Threads: TEXT)    carousel-created
     or text)
    items-created      carousel {count: 1}           the CAROUSEL container (children, caption) carousel-created
    carousel-created   -                             status: IN_PROGRESS -> check again in a minute (up to
                                                     ``status_checks``, then recreate); EXPIRED/ERROR -> recreate
                                                     (back to pending, at most twice); FINISHED -> the
                                                     publishing limit (full: ``notBefore`` moves) ->
                       publish {container}           media_publish / threads_publish, permalink  done

**An unfinished intent** is resolved by reading, never by calling again blind:

- a container creation (nothing can be read back): once ``republish_after`` has passed, the
  containers are created again (an orphan expires by itself) and counted in the account's 24 h
  log either way;
- a publish: the container's status. PUBLISHED: the media is found among the account's recent
  media (same caption, after the intent) and the request is ``done``. FINISHED ``republish_after``
  after the intent: published again, an attempt. A publish refused with a clear answer (quota,
  rate limit, not ready, the credential) is published again without counting; a content refusal
  (4/2207051) that did not go live ends in ``error``.

Before creating, the account's log must leave room within ``containers_per_day`` (Meta: 400 per
24 h); otherwise the request waits for the oldest container to age out. Threads publishes no
sooner than 30 s after the container was created (Meta's advice).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from platforms.errors import AuthFailure, NotReady, PlatformError, QuotaExceeded, RateLimited, Rejected
from platforms.meta import ContainerStatus, Instagram, Media, PublishingLimit, Threads
from vault import held_for

from .accounts import Account
from .machine import DB, KIND, MAX_RECREATES
from .steps import Run, Step

log = logging.getLogger(__name__)
THREADS_SETTLE_MS = 30_000  # Meta: wait about 30 s after creating a Threads container before publishing it
MATCH_SLACK_MS = 300_000  # Meta's timestamps are whole seconds on Meta's clock: look a little before the intent
CLOCK_SLACK_MS = 2_000  # a media this close before the intent counts as after it (whole seconds, two clocks)
RECENT_PAGES = 3


class Containers:
    """One account's Instagram or Threads requests during one run; ``credential`` is the account's
    vault id, ``client`` the Graph API client on its token."""

    def __init__(self, run: Run, account: Account, credential: str, client: Instagram | Threads) -> None:
        self.run = run
        self.account = account
        self.credential = credential
        self.client = client
        self.threads = isinstance(client, Threads)
        self.user_id = account.account
        self._limit: PublishingLimit | None = None

    @property
    def name(self) -> str:
        """The platform's name for people ("Instagram" or "Threads")."""
        return "Threads" if self.threads else "Instagram"

    def advance(self, doc: dict[str, Any]) -> str:
        """One step of one request (see the module docstring); the outcome, for the run's counts."""
        step = Step(self.run, doc, self.account, self.credential)
        try:
            return self._advance(step)
        except PlatformError as exc:
            return step.failed(exc)
        finally:
            usage = self.client.usage
            self.account.saw_usage(usage.percent)
            if usage.near_limit(90):
                minutes = usage.regain_access_minutes
                wait = int(minutes * 60_000) if minutes else self.run.ms(self.run.settings.rate_limit_wait)
                self.account.block(self.run.now() + wait, f"{self.name} reports {usage.percent:.0f} % of a rate limit used"
                                   f"{f' ({usage.blocked})' if usage.blocked else ''}: this account waits before calling again")

    def _advance(self, step: Step) -> str:
        doc, intent = step.doc, step.intent
        if doc["status"] == "needs-person":  # live: only which media it became is open
            return self.reconsider(step)
        if intent is not None:
            if intent.get("step") == "publish":
                return self._resolve_publish(step, intent)
            if step.now() - int(intent.get("at") or 0) < self.run.ms(self.run.settings.republish_after):
                return "busy"  # another process may be creating right now
            # nothing can be read back: count what may have been created, and create again
            self.account.created(int(intent.get("count") or 1), int(intent.get("at") or step.now()))
        status = doc["status"]
        if status == "pending":
            return self._create_items(step) if len(doc.get("images") or []) >= 2 else self._create_one(step)
        if status == "items-created":
            return self._create_carousel(step)
        return self._publish(step)

    # ---- creating containers --------------------------------------------------------------
    def _room(self, step: Step, needed: int) -> str | None:
        """None when ``needed`` containers fit in the account's 24 h budget; else wait for it."""
        limit = self.run.settings.containers_per_day
        now = step.now()
        if self.account.in_window(now) + needed <= limit:
            return None
        return step.wait(self.account.frees_at(now, needed, limit),
                         f"{self.name} allows {limit} containers per account in 24 hours and {self.account.in_window(now)} were made: "
                         "this post waits until enough of them are a day old", intent=None)

    def _create_items(self, step: Step) -> str:
        doc = step.doc
        images = doc["images"]
        made: list[dict[str, Any]] = [c for c in doc.get("containers") or [] if isinstance(c, dict)]
        todo = [n for n in range(len(images)) if n not in {c.get("n") for c in made}]
        waiting = self._room(step, len(todo) + 1)  # the carousel container counts too
        if waiting:
            return waiting
        if not step.mark("items", count=len(todo)):
            return "busy"
        for n in todo:
            image = images[n]
            try:
                ident = self.client.create_image(self.user_id, image["url"], alt_text=image.get("alt") or None, carousel_item=True)
            except PlatformError as exc:
                self._maybe_created(exc)
                return step.failed(exc, intent=None, containers=made or None)
            made.append({"n": n, "id": ident, "at": step.now()})
            self.account.created(1, step.now())
        step.write("items-created", containers=made, intent=None, lastError=None)
        return "items-created"

    def _create_one(self, step: Step) -> str:
        doc = step.doc
        text = doc.get("caption", doc.get("text")) or ""
        image = (doc.get("images") or [None])[0]
        waiting = self._room(step, 1)
        if waiting:
            return waiting
        if not step.mark("container", count=1):
            return "busy"
        try:
            if image is None:
                assert isinstance(self.client, Threads)  # validation: an Instagram post has an image
                ident = self.client.create_container(self.user_id, "TEXT", text=text)
            else:
                ident = self.client.create_image(self.user_id, image["url"], caption=text or None, alt_text=image.get("alt") or None)
        except PlatformError as exc:
            self._maybe_created(exc)
            return step.failed(exc, intent=None)
        return self._created(step, ident)

    def _create_carousel(self, step: Step) -> str:
        doc = step.doc
        children = [c["id"] for c in sorted(doc.get("containers") or [], key=lambda c: int(c.get("n", 0)))]
        waiting = self._room(step, 1)
        if waiting:
            return waiting
        if not step.mark("carousel", count=1):
            return "busy"
        try:
            ident = self.client.create_carousel(self.user_id, children, caption=doc.get("caption", doc.get("text")) or None)
        except PlatformError as exc:
            self._maybe_created(exc)
            return step.failed(exc, intent=None)
        return self._created(step, ident)

    def _created(self, step: Step, ident: str) -> str:
        now = step.now()
        self.account.created(1, now)
        step.write("carousel-created", carouselId=ident, carouselAt=now, checks=0, intent=None, lastError=None,
                   notBefore=now + THREADS_SETTLE_MS if self.threads else None)
        return "carousel-created"

    def _maybe_created(self, exc: PlatformError) -> None:
        """A creation whose answer was lost (a timeout) may have made a container: count it."""
        if not isinstance(exc, (AuthFailure, RateLimited, QuotaExceeded, NotReady, Rejected)) and exc.http_status is None:
            self.account.created(1, self.run.now())

    def _recreate(self, step: Step, reason: str) -> str:
        done = int(step.doc.get("recreates") or 0)
        if done >= MAX_RECREATES:
            return step.error(f"{reason}; its containers were made again {done} times already, so this post stops here: "
                              "check the images and retry the post")
        step.write("pending", recreates=done + 1, containers=None, carouselId=None, carouselAt=None, checks=None,
                   intent=None, notBefore=None, lastError=f"{reason}: its containers are made again")
        return "recreate"

    # ---- publishing -----------------------------------------------------------------------
    def _status(self, step: Step) -> ContainerStatus:
        return self.client.container_status(str(step.doc["carouselId"]))

    def _publish(self, step: Step) -> str:
        doc = step.doc
        if self.threads and step.now() < int(doc.get("carouselAt") or 0) + THREADS_SETTLE_MS:
            return "waiting"
        status = self._status(step)
        if status.published:  # published, and the record of it lost (an intent cleared by hand?)
            return self._find(step, int(doc.get("carouselAt") or step.now()))
        if status.dead:
            return self._recreate(step, self._describe(status))
        if not status.ready:
            return self._in_progress(step, status)
        return self._call_publish(step, attempts=None)

    def _in_progress(self, step: Step, status: ContainerStatus, **fields: Any) -> str:
        s = self.run.settings
        checks = int(step.doc.get("checks") or 0) + 1
        if checks >= s.status_checks:
            return self._recreate(step, f"{self.name} container {status.id} was still {status.status or 'not ready'} after {checks} checks")
        step.write(checks=checks, notBefore=step.now() + self.run.ms(s.check_every), **fields,
                   lastError=f"{self.name} is still processing container {status.id} ({status.status or 'no status'}): "
                             f"check {checks} of {s.status_checks}")
        return "in-progress"

    def _limit_full(self, step: Step) -> str | None:
        """None when the account may publish now; else the request waits (not an attempt)."""
        if self._limit is None:
            self._limit = self.client.publishing_limit(self.user_id)
        limit = self._limit
        if limit.remaining is None or limit.remaining > 0:
            return None
        s = self.run.settings
        return step.wait(step.now() + self.run.ms(s.quota_wait),
                         f"{self.name}'s publishing limit is full: {limit.quota_usage} of {limit.quota_total} posts in the last "
                         f"{(limit.quota_duration or 86400) // 3600} hours; this post is published once the window frees a slot",
                         intent=None)

    def _call_publish(self, step: Step, attempts: int | None) -> str:
        full = self._limit_full(step)
        if full:
            return full
        container = str(step.doc["carouselId"])
        fields: dict[str, Any] = {"intent": {"step": "publish", "at": step.now(), "container": container}, "lastError": None}
        if attempts is not None:
            fields["attempts"] = attempts
        if not step.write(**fields):
            return "busy"
        try:
            media_id = self.client.publish(self.user_id, container)
        except PlatformError as exc:
            return self._publish_failed(step, exc)
        if self._limit is not None:
            self._limit = PublishingLimit(self._limit.quota_usage + 1, self._limit.quota_total, self._limit.quota_duration)
        return self._done(step, media_id, None)

    def _publish_failed(self, step: Step, exc: PlatformError) -> str:
        """Any failure of a publish call is ambiguous: the post may be live. The intent stays,
        noting the failure; the next run reads the container back."""
        intent = dict(step.intent or {})
        intent["failed"] = {"code": exc.code, "reason": exc.reason}
        fields: dict[str, Any] = {}
        if isinstance(exc, RateLimited):
            self.account.block(exc.reset_at or step.now() + self.run.ms(self.run.settings.rate_limit_wait), exc.reason)
        if isinstance(exc, AuthFailure):
            step.report_dead(exc.reason)
            fields["held"] = held_for(self.credential, exc.reason, step.now())
        step.settle(step.doc["status"], intent=intent, **fields,
                    lastError=f"{exc.reason} (the publish call may still have gone through: it is read back on the next run)")
        return "unknown"

    def _resolve_publish(self, step: Step, intent: dict[str, Any]) -> str:
        if intent.get("mediaId"):  # it went live; only the permalink was missing
            return self._done(step, str(intent["mediaId"]), None)
        failed = intent.get("failed") if isinstance(intent.get("failed"), dict) else None
        at = int(intent.get("at") or 0)
        status = self._status(step)
        if status.published:
            return self._find(step, at)
        if status.dead:
            return self._recreate(step, self._describe(status))
        if not status.ready:
            return self._in_progress(step, status, intent=None)
        code = (failed or {}).get("code")
        reason = str((failed or {}).get("reason") or "the process stopped during the publish call")
        if code == Rejected.code:
            return step.error(reason)
        if code in (QuotaExceeded.code, RateLimited.code, NotReady.code, AuthFailure.code):
            return self._call_publish(step, attempts=None)  # a clear refusal: nothing went live, not an attempt
        if step.now() - at < self.run.ms(self.run.settings.republish_after):
            return "busy"  # the call may still be under way in another process
        attempt = step.attempt(f"the publish call failed and the container is still FINISHED ({reason})")
        if attempt is None:
            return "error"
        return self._call_publish(step, attempts=attempt)

    def _find(self, step: Step, since: int) -> str:
        """The container is PUBLISHED: find the media it became among the account's recent media.

        Meta does not say which media a container became, so the media is matched by its
        caption, from ``MATCH_SLACK_MS`` before the intent on (Meta's clock). Media another
        post of the account already recorded is not a candidate. When another post of the
        account with the same caption is unresolved too, the two cannot be told apart: the post
        goes to ``needs-person`` with its candidates, never silently to the wrong media. Else
        the earliest candidate after the intent is this post's."""
        found = self._candidates(step, since)
        if not found:
            step.write(lastError=f"{self.name} says container {step.doc.get('carouselId')} is published, but the post is not among "
                                 "the account's recent media yet: it is looked up again on the next run")
            return "looking"
        rivals = self._rivals(step)
        if rivals:
            return self._ask(step, found, rivals)
        after = [m for m in found if (_meta_time(m.timestamp) or 0) >= since - CLOCK_SLACK_MS]
        chosen = min(after, key=_when) if after else max(found, key=_when)
        return self._done(step, chosen.id, chosen.permalink)

    def _candidates(self, step: Step, since: int) -> list[Media]:
        """Recent media with this post's caption, from a little before ``since``, that no other post recorded."""
        caption = str(step.doc.get("caption", step.doc.get("text")) or "").strip()
        out: list[Media] = []
        after: str | None = None
        for _ in range(RECENT_PAGES):
            page = self.client.recent_media(self.user_id, after=after)
            older = False
            for media in page.items:
                when = _meta_time(media.timestamp)
                if when is not None and when < since - MATCH_SLACK_MS:
                    older = True
                    break
                if media.id and (media.text or "").strip() == caption and not self._recorded_elsewhere(step, media.id):
                    out.append(media)
            after = page.after
            if older or not after:
                break
        return out

    def _recorded_elsewhere(self, step: Step, media_id: str) -> bool:
        return any(d["_id"] != step.doc["_id"] and d.get("kind") == KIND for d in step.db.query(DB, "mediaId", media_id, limit=5).docs)

    def _rivals(self, step: Step) -> list[str]:
        """Other posts of this account with the same caption whose media is not known yet either."""
        doc = step.doc
        caption = str(doc.get("caption", doc.get("text")) or "").strip()
        out = []
        for status in ("carousel-created", "needs-person"):
            for other in step.db.query_all(DB, "status", status):
                if (other["_id"] == doc["_id"] or other.get("kind") != KIND or other.get("platform") != doc.get("platform")
                        or other.get("account") != doc.get("account")
                        or str(other.get("caption", other.get("text")) or "").strip() != caption):
                    continue
                intent = other.get("intent") if isinstance(other.get("intent"), dict) else {}
                if status == "needs-person" or intent.get("step") == "publish":
                    out.append(other["_id"])
        return out

    def _ask(self, step: Step, found: list[Media], rivals: list[str]) -> str:
        """Leave the choice to a person: the candidates, and why."""
        candidates = [{"mediaId": m.id, "permalink": m.permalink, "timestamp": m.timestamp} for m in sorted(found, key=_when)]
        if step.doc.get("status") == "needs-person" and step.doc.get("candidates") == candidates:
            return "needs-person"
        others = ", ".join(rivals[:3])
        reason = (f"{self.name} published this post, but {len(candidates)} recent post(s) have its caption and {others} "
                  f"{'is' if len(rivals) == 1 else 'are'} not resolved either: say which of them it became")
        step.settle("needs-person", candidates=candidates, lastError=reason, intent=step.intent)
        log.warning("publish: %s needs a person: %s", step.doc["_id"], reason, extra={"id": step.doc["_id"]})
        return "needs-person"

    def reconsider(self, step: Step) -> str:
        """A post that needs a person, looked at again: once the other posts are resolved and
        one candidate is left, it is this post's."""
        intent = step.intent or {}
        since = int(intent.get("at") or step.doc.get("carouselAt") or step.now())
        found = self._candidates(step, since)
        if not found:
            return "needs-person"
        rivals = self._rivals(step)
        offered = {str(c.get("mediaId")) for c in step.doc.get("candidates") or [] if isinstance(c, dict)}
        if not rivals and len(found) == 1 and found[0].id in offered:
            return self._done(step, found[0].id, found[0].permalink)
        return self._ask(step, found, rivals or ["an earlier post"])

    def _done(self, step: Step, media_id: str, permalink: str | None) -> str:
        try:
            permalink = permalink or self.client.permalink(media_id)
        except PlatformError as exc:
            permalink, reason = None, exc.reason
        else:
            reason = f"{self.name} gave no permalink for media {media_id}"
        if not permalink:  # live, but not recorded as done yet: keep its id so it is never published again
            intent = {**(step.intent or {"step": "publish", "at": step.now()}), "mediaId": media_id}
            step.settle(step.doc["status"], intent=intent, mediaId=media_id, lastError=f"published; {reason}")
            return "published"
        step.settle("done", mediaId=media_id, permalink=permalink, publishedAt=step.now(), intent=None, lastError=None,
                    notBefore=None, checks=None, **step.published())
        log.info("publish: %s is live at %s", step.doc["_id"], permalink, extra={"id": step.doc["_id"]})
        return "done"

    def _describe(self, status: ContainerStatus) -> str:
        return f"{self.name} container {status.id} is {status.status}{f' ({status.detail})' if status.detail else ''}"


def _when(media: Media) -> int:
    return _meta_time(media.timestamp) or 0


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
