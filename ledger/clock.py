"""Clocks: time is injected, so every lease test can run on a fake clock."""

from __future__ import annotations

import re
import threading
import time
from typing import Protocol

from .errors import Invalid


class Clock(Protocol):
    """Where the engine reads the time; tests pass a FakeClock."""
    def now_ms(self) -> int:
        """Epoch milliseconds."""

    def sleep(self, seconds: float) -> None:
        """Wait; a fake clock returns at once."""


class SystemClock:
    """The wall clock."""
    def now_ms(self) -> int:
        """Epoch milliseconds."""
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        time.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to (``advance``)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """Epoch milliseconds, as last set."""
        with self._lock:
            return self._now

    def advance(self, ms: int) -> None:
        """Move the clock forward by ``ms``."""
        with self._lock:
            self._now += ms

    def sleep(self, seconds: float) -> None:
        """Advance the clock instead of sleeping."""
        self.advance(int(seconds * 1000))


SYSTEM = SystemClock()


_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_interval(text: str | float) -> float:
    """``"5s"``, ``"30s"``, ``"1m"``, ``"250ms"`` (or seconds as a number) -> seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _INTERVAL.match(str(text))
        if not match:
            raise Invalid(f"interval {text!r} is not valid: use a number with ms, s, m, h or d, like '30s' or '1m'")
        seconds = float(match.group(1)) * _UNIT[match.group(2)]
    if seconds <= 0:
        raise Invalid(f"interval {text!r} must be positive")
    return seconds
