"""Publishing: a social media manager queues a post (an Instagram carousel, a Threads post, a
Bluesky post); the ``publish`` tick walks it to ``done`` with a permalink, never twice.

Imports the ledger, the vault and the platforms, never the bot. ``publishers.product`` is the
declaration the hub composes.
"""
