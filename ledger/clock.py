"""Clocks: time is injected, so every lease test can run on a fake clock."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Epoch milliseconds."""

    def sleep(self, seconds: float) -> None:
        """Wait; a fake clock returns at once."""


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to (``advance``)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> None:
        with self._lock:
            self._now += ms

    def sleep(self, seconds: float) -> None:
        self.advance(int(seconds * 1000))


SYSTEM = SystemClock()
