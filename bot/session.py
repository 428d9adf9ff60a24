"""The bot's Bluesky session, from the vault. The vault tick is the only writer of a rotated
session (a refresh token is single-use), so the bot only ever reads it."""

from __future__ import annotations

from ledger import Context, NotFound
from platforms.bluesky import Bluesky
from vault import NeedsReauth


def credential(ctx: Context) -> str:
    """The vault id of the bot's account."""
    return f"bluesky:{ctx.settings.handle}"


def bluesky(ctx: Context) -> Bluesky:
    """An adapter on the bot account's session, at the PDS the session names."""
    cred = credential(ctx)
    try:
        ctx.vault.usable(cred)  # NeedsReauth, with the reason, while a person must paste
    except NotFound:
        raise NeedsReauth(
            f"{cred} is not in the vault: paste the bot's app password with `skyhub vault put bluesky {ctx.settings.handle}`"
        ) from None
    session = ctx.vault.reveal(cred).get("session")
    if not session:
        raise NeedsReauth(f"{cred} has no session yet: the vault tick makes one after the paste is verified (`skyhub tick vault`)")
    return Bluesky(ctx.http, session.get("pds") or ctx.platforms.bluesky_pds, session)
