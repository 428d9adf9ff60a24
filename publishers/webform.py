"""The publishing form: reading its fields, the schedule time in the manager's time zone, and
which field each of ``publishers.validate``'s sentences belongs next to. The sentences
themselves are the product's, word for word: the console adds only where to show them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .validate import PLATFORMS

MAX_IMAGES = 20
_IMAGE = re.compile(r"^image (\d+)(?P<alt>'s alt text| needs alt text)?")


def field_for(sentence: str) -> str:
    """The form field a validation sentence is about (``platform`` when it is about the whole post)."""
    m = _IMAGE.match(sentence)
    if m:
        return f"{'alt' if m.group('alt') else 'image'}-{m.group(1)}"
    for prefix, name in (("account", "account"), ("no account", "account"), ("slug", "slug"), ("at ", "at"), ("at (", "at"),
                         ("replyTo", "replyTo"), ("platform", "platform")):
        if sentence.startswith(prefix):
            return name
    if "images" in sentence or "needs an image" in sentence or "needs text or an image" in sentence:
        return "images" if "needs text" not in sentence else "caption"
    return "caption"


@dataclass
class PublishForm:
    """What the manager typed (echoed back on errors) and what it means."""

    platform: str = "ig"
    account: str = ""
    slug: str = ""
    caption: str = ""
    images: list[dict[str, str]] = field(default_factory=list)
    at: str = ""
    tz: str = "UTC"
    reply_to: str = ""
    at_iso: str | None = None
    orphan_alts: list[int] = field(default_factory=list)

    @classmethod
    def empty(cls) -> PublishForm:
        """A blank form."""
        return cls()

    @classmethod
    def read(cls, fields: dict[str, str]) -> PublishForm:
        """The form as POSTed (image rows without a URL are left out; their alt text is an error)."""
        images: list[dict[str, str]] = []
        orphans = []
        for n in range(1, MAX_IMAGES + 1):
            url, alt = fields.get(f"image-{n}", "").strip(), fields.get(f"alt-{n}", "").strip()
            if url:
                images.append({"url": url, "alt": alt})
            elif alt:
                orphans.append(n)
        return cls(platform=fields.get("platform", ""), account=fields.get("account", "").strip(), slug=fields.get("slug", "").strip(),
                   caption=fields.get("caption", "").replace("\r\n", "\n"), images=images, at=fields.get("at", "").strip(),
                   tz=fields.get("tz", "").strip() or "UTC", reply_to=fields.get("replyTo", "").strip(), orphan_alts=orphans)

    def errors(self, now_ms: int) -> dict[str, list[str]]:
        """What the form itself gets wrong before the post is checked (the time and its zone,
        alt text without an image); fills ``at_iso``."""
        out: dict[str, list[str]] = {}
        if self.platform not in PLATFORMS:
            out["platform"] = [f"platform must be one of {', '.join(PLATFORMS)}, got {self.platform!r}"]
        for n in self.orphan_alts:
            out.setdefault(f"image-{n}", []).append(f"image {n} has alt text but no URL")
        if self.at:
            try:
                zone = ZoneInfo(self.tz)
            except (ZoneInfoNotFoundError, ValueError):
                out["tz"] = [f"time zone {self.tz!r} is not known: use a name like Europe/Paris, America/New_York or UTC"]
                return out
            try:
                local = datetime.fromisoformat(self.at)
            except ValueError:
                out["at"] = [f"at must be a date and a time, like 2026-12-01T09:00, got {self.at!r}"]
                return out
            self.at_iso = local.replace(tzinfo=zone, second=local.second, microsecond=0).isoformat()
        return out

    def anchors(self, errors: dict[str, list[str]]) -> dict[str, str]:
        """The id of the element each error's link in the summary goes to."""
        return {name: name for name in errors}

    @property
    def replyTo(self) -> str:  # noqa: N802 - the template's name for the field
        """The reply-to field, under the name the template uses."""
        return self.reply_to
