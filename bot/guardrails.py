"""Guardrails: which mentions become builds. Configured in TOML (config/guardrails.toml)."""

from __future__ import annotations

import importlib.resources
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger import Invalid, parse_interval

DEFAULT_NAME = "guardrails.toml"  # shipped in config/ (the package skyhub_config)


@dataclass
class Guardrails:
    """Which mentions become builds: caps, blocklists, labels, keywords, age."""

    per_author_daily: int = 3
    global_daily: int = 100
    max_queue: int = 50                  # pending-build + building
    max_age_ms: int = 2 * 3_600_000      # older mentions are skipped: no backfill storms
    blocked_dids: set[str] = field(default_factory=set)
    blocked_handles: set[str] = field(default_factory=set)
    keywords: list[str] = field(default_factory=list)   # case-insensitive substrings
    labels: set[str] = field(default_factory=lambda: {"!hide", "!warn", "spam", "porn", "sexual", "nudity", "graphic-media"})

    @classmethod
    def load(cls, path: str | Path | None = None) -> Guardrails:
        """The guardrails in the TOML file ``path``, or in the shipped ``config/guardrails.toml`` when no path is
        given; settings the file omits keep their defaults. Invalid when it cannot be read or parsed."""
        if path:
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise Invalid(f"cannot read the guardrails file {path} (bot.guardrails): {exc.strerror}") from None
        else:
            text = importlib.resources.files("skyhub_config").joinpath(DEFAULT_NAME).read_text()
        try:
            data: dict[str, Any] = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise Invalid(f"the guardrails file {path or 'config/guardrails.toml'} is not valid TOML: {exc}") from None
        g = cls()
        g.per_author_daily = int(data.get("per_author_daily", g.per_author_daily))
        g.global_daily = int(data.get("global_daily", g.global_daily))
        g.max_queue = int(data.get("max_queue", g.max_queue))
        if "max_age" in data:
            g.max_age_ms = int(parse_interval(data["max_age"]) * 1000)
        block = data.get("blocklist", {})
        g.blocked_dids = set(block.get("dids", []))
        g.blocked_handles = {h.lower().lstrip("@") for h in block.get("handles", [])}
        g.keywords = [k.lower() for k in data.get("keywords", [])]
        if "labels" in data:
            g.labels = set(data["labels"])
        return g

    def static_reason(self, *, author_did: str, author_handle: str, bot_did: str, text: str, labels: set[str], age_ms: int) -> str | None:
        """The checks that need nothing but the notification itself."""
        if author_did == bot_did:
            return "self"
        if author_did in self.blocked_dids or author_handle.lower() in self.blocked_handles:
            return "blocklist"
        if age_ms > self.max_age_ms:
            return "too old"
        hit = sorted(labels & self.labels)
        if hit:
            return f"label {hit[0]}"
        lowered = text.lower()
        for word in self.keywords:
            if word in lowered:
                return "keyword"
        return None
