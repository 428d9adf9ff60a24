"""The reply tick: for each ``built`` mention, reply in the thread with the link, once.

Never twice: the reply's record key is written on the document *before* posting, and a retry
that finds a record under that key records it instead of posting again. A thread muted or
closed to replies since ingest ends in ``skipped``. A 429 waits for its reset (``waitUntil``)
and is not an attempt. The reply waits until the built page answers (``pageWaitSince``; not an
attempt either), and gives up with ``error`` after ``bot.page_wait``. While the bot's account
(``bsky:HANDLE``) or the platform (``bsky``) is paused (``ledger/pause.py``), replies wait too:
nothing is written, nothing is counted as an attempt, and the run says how many are ``paused``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ledger import Conflict, Context, Forbidden, Ledger, LedgerError, TickEvent
from ledger.pause import pause_of, paused
from platforms import AuthFailure, FetchRefused, PlatformError, RateLimited
from platforms.bluesky import Bluesky, new_rkey
from vault import held_for

from .codegen.checks import clean_title
from .machine import DB
from .session import bluesky, credential

log = logging.getLogger(__name__)
MAX_TRIES = 3


def reply_text(template: str, url: str, title: str = "") -> tuple[str, list[dict[str, Any]]]:
    """The text and its link facet (byte offsets into the UTF-8 text). ``{title}`` is what was built (the page's
    title, cleaned again here: the builder wrote it), "build" when the result names none."""
    text = template.format(url=url, title=clean_title(title, "build"))
    start = text.encode().find(url.encode())
    facets = []
    if start >= 0:
        facets.append({
            "index": {"byteStart": start, "byteEnd": start + len(url.encode())},
            "features": [{"$type": "app.bsky.richtext.facet#link", "uri": url}],
        })
    return text, facets


def permalink(uri: str) -> str:
    """The bsky.app link to a post, from its at-uri (``at://<did>/<collection>/<rkey>``)."""
    did, _, rkey = uri.removeprefix("at://").split("/")
    return f"https://bsky.app/profile/{did}/post/{rkey}"


def reply(event: TickEvent, ctx: Context) -> dict[str, int]:
    """The ``reply`` tick: answer every built mention whose page is up, once."""
    s = ctx.settings
    cred = credential(ctx)
    try:
        version = ctx.vault.usable(cred).get("version")
    except LedgerError:
        version = None  # flagged or missing: bluesky(ctx) below says so, when a mention is due
    replier = Replier(ctx.db, s.reply_template, pages=PageCheck(ctx.fetch, int(s.page_wait * 1000)),
                      credential=cred, session_version=version, paused=pause_of(paused(ctx.db.store), "bsky", s.handle) is not None)
    return replier.run(lambda: bluesky(ctx))


class PageCheck:
    """Does a built page answer yet? The builder writes ``built`` before the workflow's push,
    and GitHub Pages serves a push a minute or more later: a reply must not link to a 404.

    The page is fetched through the guarded fetcher (``ctx.fetch``): the URL came from the
    builder, so it is held to the same rules as any URL a client gave (public https addresses
    unless the operator allows more, every redirect checked). Without a fetcher no page is
    checked (unit tests of the reply's other steps). ``wait_ms`` is how long a reply waits for
    its page; ``timeout`` (seconds) bounds one check.
    """

    def __init__(self, fetch: Any | None, wait_ms: int, timeout: float = 10.0) -> None:
        self.fetch = fetch
        self.wait_ms = wait_ms
        self.timeout = timeout

    def problem(self, url: str) -> tuple[str, bool] | None:
        """None when the page answers with a success; else what it answered, and whether that is
        final (a URL the hub will never fetch: the reply ends in ``error`` at once)."""
        if self.fetch is None:
            return None
        try:
            got = self.fetch.get(url, what=f"the page {url[:200]}", timeout=self.timeout, accept="text/html,*/*")
        except FetchRefused as exc:
            return exc.reason, True
        except PlatformError as exc:
            return exc.reason, False
        return None if got.status < 400 else (f"HTTP {got.status}", False)


class Replier:
    """One pass over built mentions; see the module docstring. ``template`` is the reply's text,
    with ``{url}`` where the page's link goes and ``{title}`` where what was built is named."""

    def __init__(self, db: Ledger, template: str = "Your {title} is ready: {url}", *, pages: PageCheck | None = None,
                 credential: str = "bluesky", session_version: int | None = None, paused: bool = False) -> None:
        self.db = db  # bound to tick:reply
        self.template = template
        self.pages = pages or PageCheck(None, 0)
        self.credential = credential
        self.session_version = session_version  # the credential's version now: a held reply waits for a newer one
        self.paused = paused  # the bot's account or Bluesky is paused: every reply waits, untouched

    def _still_held(self, doc: dict[str, Any]) -> bool:
        """Held after Bluesky refused the session, and the vault has no newer session yet."""
        held = doc.get("held")
        return isinstance(held, dict) and held.get("version") == self.session_version

    def now(self) -> int:
        """Epoch milliseconds from the store's clock."""
        return self.db.now()

    def run(self, bluesky: Callable[[], Bluesky]) -> dict[str, int]:
        """Reply to every built mention not waiting out a rate limit, stopping at the first rate limit; how many
        ended in each outcome. ``bluesky`` makes the client, called only when a mention is due."""
        built = [d for d in self.db.query_all(DB, "status", "built") if d.get("kind") == "mention"]
        due = [d for d in built if int(d.get("waitUntil") or 0) <= self.now()]
        counts: dict[str, int] = {}
        if self.paused and due:
            return {"paused": len(due)}
        held = [d for d in due if self._still_held(d)]
        if held:
            counts["held"] = len(held)
            due = [d for d in due if not self._still_held(d)]
        if not due:
            return counts
        bsky = bluesky()
        try:
            viewer = bsky.get_posts([d["uri"] for d in due])
            for doc in due:
                outcome = self.reply(bsky, doc, viewer.get(doc["uri"]))
                counts[outcome] = counts.get(outcome, 0) + 1
                if outcome == "rate-limited":
                    break  # the whole account is limited: stop this tick
        finally:
            bsky.close()
        return counts

    def reply(self, bsky: Bluesky, doc: dict[str, Any], post: dict[str, Any] | None) -> str:
        """One step for one built mention (``post``: its post as ``get_posts`` returned it, None when deleted):
        skip it, wait for its page, fix its record key, or post the reply under that key. Returns the new
        status ("replied", "skipped", "error"), or "page-not-up", "rate-limited", "held", "retry", or "moved"
        when another writer changed the document first."""
        viewer = (post or {}).get("viewer", {})
        if post is None:
            return self._move(doc, "skipped", skipReason="deleted")
        if viewer.get("threadMuted"):
            return self._move(doc, "skipped", skipReason="muted thread")
        if viewer.get("replyDisabled"):
            return self._move(doc, "skipped", skipReason="replies disabled")
        url = (doc.get("result") or {}).get("url")
        if not url:
            return self._move(doc, "error", lastError="the build result has no url")
        found = None if doc.get("replyRkey") else self.pages.problem(url)  # a fixed key: posting was decided
        if found is not None and found[1]:  # a URL the hub will never fetch: never posted
            return self._move(doc, "error", lastError=f"the build's page cannot be checked, so it is not posted: {found[0]}")
        if found is not None:  # not up yet: wait (not an attempt), within page_wait
            problem = found[0]
            since = int(doc.get("pageWaitSince") or self.now())
            if self.now() - since >= self.pages.wait_ms:
                minutes = self.pages.wait_ms / 60_000
                return self._move(doc, "error", lastError=f"the page {url} did not come up within {minutes:g} min (last answer: {problem})")
            if "pageWaitSince" not in doc or doc.get("lastError") != f"waiting for the page to come up: {problem}":
                self._update(doc, pageWaitSince=since, lastError=f"waiting for the page to come up: {problem}")
            return "page-not-up"
        if not doc.get("replyRkey"):  # fix the record key before posting: a retry reuses it
            fixed = self._update(doc, replyRkey=new_rkey(self.now()))
            if fixed is None:
                return "moved"
            doc = fixed
        text, facets = reply_text(self.template, url, str((doc.get("result") or {}).get("title") or ""))
        created = datetime.fromtimestamp(self.now() / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
        try:
            posted = bsky.reply(doc["replyRkey"], text, facets, doc["root"], doc["parent"], created)
        except RateLimited as exc:  # wait for the reset; not an attempt
            self._update(doc, waitUntil=exc.reset_at or self.now() + 60_000, lastError=exc.reason)
            return "rate-limited"
        except AuthFailure as exc:  # the vault's session was refused: hold (not an attempt) until it has a fresh one
            since = (doc.get("held") or {}).get("since") or self.now()
            self._update(doc, held={**held_for(self.credential, exc.reason, since), "version": self.session_version})
            return "held"
        except PlatformError as exc:
            tries = int(doc.get("replyTries") or 0) + 1
            if tries >= MAX_TRIES:
                return self._move(doc, "error", lastError=exc.reason, replyTries=tries)
            self._update(doc, replyTries=tries, lastError=exc.reason)
            return "retry"
        return self._move(doc, "replied", replyUri=posted["uri"], replyCid=posted["cid"], permalink=permalink(posted["uri"]),
                          repliedAt=self.now(), lastError=None, waitUntil=None, held=None, pageWaitSince=None)

    def _body(self, doc: dict[str, Any], **fields: Any) -> dict[str, Any]:
        body = {k: v for k, v in doc.items() if not k.startswith("_")}
        body.update(fields)
        return {k: v for k, v in body.items() if v is not None or k in ("lastError",)}

    def _update(self, doc: dict[str, Any], **fields: Any) -> dict[str, Any] | None:
        try:
            return self.db.put(DB, self._body(doc, **fields), doc["_id"], if_rev=doc["_rev"])
        except (Conflict, Forbidden):
            return None

    def _move(self, doc: dict[str, Any], status: str, **fields: Any) -> str:
        try:
            self.db.put(DB, self._body(doc, status=status, **fields), doc["_id"], if_rev=doc["_rev"])
        except (Conflict, Forbidden):
            return "moved"
        log.info("reply: %s is %s", doc["_id"], status, extra={"db": DB, "id": doc["_id"]})
        return status
