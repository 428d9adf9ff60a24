"""Server-sent events, parsed as they arrive: the streaming answers of the language-model APIs
(``platforms.llm``). Bytes go in as the network hands them over, in pieces of any size; whole
events come out (``event`` name, ``data`` joined over its lines). Comments (``:`` lines, the
keep-alives some servers send) are dropped, and ``\\r\\n``, ``\\r`` and ``\\n`` all end a line.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """One server-sent event: its name ("message" when the server gave none) and its data."""

    event: str
    data: str


class EventStream:
    """An incremental parser: ``feed(chunk)`` yields the events that chunk completes."""

    def __init__(self) -> None:
        self._buffer = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character may be split across chunks
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes | str) -> Iterator[Event]:
        """The events completed by ``chunk`` (UTF-8 bytes, or text)."""
        text = self._buffer + (self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk)
        start = 0
        try:
            while (cut := _line_end(text, start)) is not None:
                end, after = cut
                line, start = text[start:end], after
                event = self._line(line)
                if event is not None:
                    yield event
        finally:
            self._buffer = text[start:]

    def close(self) -> Iterator[Event]:
        """The last event, when the stream ended without the blank line after it."""
        if self._buffer:
            event = self._line(self._buffer)
            self._buffer = ""
            if event is not None:
                yield event
        event = self._line("")
        if event is not None:
            yield event

    def _line(self, line: str) -> Event | None:
        if line == "":  # a blank line dispatches the event gathered so far
            if not self._data:
                self._event = ""
                return None
            out = Event(self._event or "message", "\n".join(self._data))
            self._event, self._data = "", []
            return out
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None  # "id" and "retry" do not matter to a client that never reconnects


def _line_end(text: str, start: int) -> tuple[int, int] | None:
    """Where the line from ``start`` ends, and where the next begins (None: no whole line yet).
    A ``\\r`` at the very end may be the first half of ``\\r\\n``: wait for the next chunk."""
    lf, cr = text.find("\n", start), text.find("\r", start)
    if cr == -1 or (lf != -1 and lf < cr):
        return None if lf == -1 else (lf, lf + 1)
    if cr + 1 == len(text):
        return None
    return cr, cr + 2 if text[cr + 1] == "\n" else cr + 1


__all__ = ["Event", "EventStream"]
