"""``[bot]``: the mention builds' settings section (loaded when the settings are read)."""

from __future__ import annotations

from ledger.section import Interval, Section


class BotSettings(Section):
    """``[bot]``: mention builds."""

    handle: str = ""
    """the bot's Bluesky account; ingest and reply run once it is set (its app password goes in the vault)"""
    ingest_every: Interval = 30.0
    """how often the ingest tick reads new mentions"""
    reply_every: Interval = 30.0
    """how often the reply tick answers built mentions"""
    guardrails: str = ""
    """a guardrails file replacing the shipped `config/guardrails.toml`"""
    reply_template: str = "Your {title} is ready: {url}"
    """the reply's text; `{url}` becomes a link, `{title}` names what was built (the page's title; "build" when the codegen command gives none)"""
    page_wait: Interval = 1800.0
    """the reply waits for the built page to answer (GitHub Pages serves a push a minute or more later); past this it is an error"""
    codegen: str = "python -m bot.codegen"
    """the builder lane's command: gets the mention as JSON on stdin, prints `{"url": ...}` on its last line"""
    build_lease: Interval = 900.0
    """how long a build is held before the sweep takes it back"""
    build_timeout: Interval = 600.0
    """the codegen command's time limit (shorter than the lease)"""

    def credentials(self) -> list[tuple[tuple[str, ...], str]]:
        """The vault credentials these settings name, for the vault's list of missing ones (``vault.wanted``)."""
        return [((f"bluesky:{self.handle}",), "bot.handle")] if self.handle else []
