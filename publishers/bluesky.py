"""Bluesky: one record, in one step.

    status    intent (written first, with the record key)     calls                                  next status
    pending   post {rkey}                                      images fetched or read, made fit       done
                                                               (upright, no EXIF, under the blob
                                                               limit: publishers.imaging), uploaded
                                                               as blobs; facets (links, mentions,
                                                               tags); the reply's refs; createRecord
                                                               under rkey

The record key is fixed on the document (``rkey``) in the intent's write, before any call, and
``platforms.bluesky`` reads the key back before creating: a crash after ``createRecord``, a lost
answer or a second process all end with the one record. Blobs uploaded for a post that did
not happen are garbage-collected by the PDS, so uploading again is harmless. An intent younger
than ``republish_after`` belongs to a process that may still be posting: it is left alone.
"""

from __future__ import annotations

import logging
from typing import Any

from platforms.bluesky import POST, Bluesky, Image, new_rkey
from platforms.errors import PlatformError
from platforms.richtext import facets

from . import images
from .accounts import Account
from .errors import ContentProblem
from .steps import Run, Step

log = logging.getLogger(__name__)


def permalink(handle: str, rkey: str) -> str:
    """The post's address on bsky.app."""
    return f"https://bsky.app/profile/{handle}/post/{rkey}"


class Posts:
    """One Bluesky account's requests during one run; ``credential`` is the account's vault id,
    ``client`` the adapter on its session."""

    def __init__(self, run: Run, account: Account, credential: str, client: Bluesky) -> None:
        self.run = run
        self.account = account
        self.credential = credential
        self.client = client

    def advance(self, doc: dict[str, Any]) -> str:
        """One step of one request (see the module docstring)."""
        step = Step(self.run, doc, self.account, self.credential)
        intent = step.intent
        if intent is not None and step.now() - int(intent.get("at") or 0) < self.run.ms(self.run.settings.republish_after):
            return "busy"
        rkey = str(doc.get("rkey") or new_rkey(step.now()))
        if not step.write(intent={"step": "post", "at": step.now(), "rkey": rkey}, rkey=rkey, lastError=None):
            return "busy"
        notes: list[str] = []
        try:
            ref = self._post(step, rkey, notes)
        except ContentProblem as exc:
            return step.failed(exc, intent=None)
        except PlatformError as exc:
            return step.failed(exc, intent=None)
        handle = self.client.handle or self.account.account
        step.settle("done", recordUri=ref["uri"], recordCid=ref["cid"], permalink=permalink(handle, rkey),
                    publishedAt=step.now(), intent=None, lastError=None, notBefore=None, imageNotes=notes or None,
                    **step.published())
        log.info("publish: %s is live at %s", doc["_id"], ref["uri"], extra={"id": doc["_id"]})
        return "done"

    def _post(self, step: Step, rkey: str, notes: list[str]) -> dict[str, str]:
        """The record under ``rkey`` (read back, or created); what was done to its images goes in ``notes``."""
        doc = step.doc
        existing = self.client.get_record(POST, rkey)  # read back first: a crash after createRecord posted it
        if existing is not None:
            return {"uri": existing["uri"], "cid": existing["cid"]}
        text = str(doc.get("caption", doc.get("text")) or "")
        pictures = []
        for n, image in enumerate(doc.get("images") or [], start=1):
            picture = images.load(self.run.ctx, image, n=n)  # the aspect ratio is the uploaded image's own
            blob = self.client.upload_blob(picture.data, picture.mime)
            pictures.append(Image(blob, alt=image.get("alt") or "", width=picture.width, height=picture.height))
            notes += picture.notes
        reply = self._reply(str(doc["replyTo"])) if doc.get("replyTo") else None
        ref = self.client.post(rkey, text, facets=facets(text, self.client.resolve_handle), images=pictures, reply=reply,
                               created_at=_iso(step.now()))
        return {"uri": ref["uri"], "cid": ref["cid"]}

    def _reply(self, uri: str) -> dict[str, dict[str, str]]:
        """``{"root", "parent"}`` strong refs for a reply to the post at ``uri``."""
        repo, _, rest = uri.removeprefix("at://").partition("/")
        collection, _, rkey = rest.partition("/")
        parent = self.client.get_record(collection, rkey, repo=repo)
        if parent is None:
            raise ContentProblem(f"the post to reply to ({uri}) does not exist (deleted?)", permanent=True)
        ref = {"uri": parent["uri"], "cid": parent["cid"]}
        root = (parent["value"].get("reply") or {}).get("root") if isinstance(parent.get("value"), dict) else None
        if isinstance(root, dict) and root.get("uri") and root.get("cid"):
            return {"root": {"uri": str(root["uri"]), "cid": str(root["cid"])}, "parent": ref}
        return {"root": ref, "parent": ref}


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
