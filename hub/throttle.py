"""Failed credentials cost time: after a refused token (the API's gate, the console's sign-in) the
answer waits, longer with each failure from the same address within a minute.

Tokens are 256 random bits, so guessing one is hopeless anyway; the delay makes every attempt
cost the guesser time instead of being free, and it never slows a client whose credentials
are good (a request without any credential is not a failure: nothing was guessed). The first
failure waits 0.1 s, each next one twice as long, up to 2 s; an address that stops failing for
a minute starts over. At most ``KEEP`` addresses are remembered (the oldest forgotten first),
so a flood of addresses costs bounded memory.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

FIRST_S = 0.1
MAX_S = 2.0
WINDOW_S = 60.0
KEEP = 10_000


class Failures:
    """Failed credential checks per client address (see the module docstring)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._seen: OrderedDict[str, tuple[int, float]] = OrderedDict()  # address -> (failures in the window, last at)
        self._lock = threading.Lock()

    def failed(self, address: str) -> float:
        """Record a failure from ``address``; how many seconds its answer waits."""
        now = self._monotonic()
        with self._lock:
            count, last = self._seen.pop(address, (0, now))
            count = count + 1 if now - last < WINDOW_S else 1
            self._seen[address] = (count, now)
            while len(self._seen) > KEEP:
                self._seen.popitem(last=False)
        return float(min(MAX_S, FIRST_S * 2.0 ** (count - 1)))


__all__ = ["Failures"]
