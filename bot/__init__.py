"""Mention builds: Bluesky mentions in, builds out, replies in the thread.

Imports the ledger, the vault and the platforms, never the publishers. ``bot.product`` is the
declaration the hub composes; the modules that talk to Bluesky are imported only when the bot
is configured.
"""
