"""Clocks: time is injected, so every lease test can run on a fake clock."""

from __future__ import annotations

import threading
import time
from typing import Protocol


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
