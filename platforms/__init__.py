"""One adapter per outside platform, each with typed errors and a transport seam for tests.

    platforms.errors     the error tree (``PlatformError`` and its children), ``scrub``
    platforms.transport  httpx's transport failures -> NetworkError / Transient, naming the host
    platforms.meta       the Meta clients: ``Instagram``, ``Threads``, ``Facebook``
    platforms.graph      their shared transport ``MetaGraph`` (httpx + tenacity), ``RetryPolicy``
    platforms.metacodes  Meta's error codes and subcodes -> error classes: the one table
    platforms.usage      Meta's rate-limit usage headers, parsed
    platforms.bluesky    the Bluesky adapter: XRPC over httpx (no atproto SDK)
    platforms.richtext   Bluesky facets (links, mentions, hashtags) and the grapheme count
    platforms.addresses  which URLs and addresses the hub may fetch (``FetchPolicy``), no I/O
    platforms.fetcher    the guarded fetcher: every URL a client or an operator chose
    platforms.llm        language-model APIs: OpenAI-compatible Chat Completions, Anthropic Messages
    platforms.sse        server-sent events, parsed as they arrive (the models' streaming answers)

Every client takes the process's ``httpx.Client`` (``ctx.http`` in a tick), so a test passes
``httpx.Client(transport=httpx.MockTransport(handler))`` or uses respx, and closing a client
never closes that shared one. ``import platforms`` stays light: it loads the errors only.
No platform SDK is used: ``platforms.bluesky`` makes its few XRPC calls itself.

Imports nothing of skyhub but ``ledger.errors``.
"""

from .errors import (
    Answer,
    AuthFailure,
    Failed,
    FetchRefused,
    NetworkError,
    NotReady,
    PlatformError,
    QuotaExceeded,
    RateLimited,
    Rejected,
    Transient,
    scrub,
)

__all__ = [
    "Answer", "AuthFailure", "Failed", "FetchRefused", "NetworkError", "NotReady", "PlatformError", "QuotaExceeded", "RateLimited",
    "Rejected", "Transient", "scrub",
]
