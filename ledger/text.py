"""Plain-text rendering shared by every CLI group (the hub's and the products'): times,
table cells and tables. JSON is the machine format; these are for people."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any


def iso(ms: int) -> str:
    """Epoch milliseconds as ``2026-11-30T10:02:11.20Z``."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def duration(seconds: float) -> str:
    """An interval as people write it (and as the settings take it): ``30s``, ``1m``, ``1h``, ``1d``, ``500ms``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds * 1000:g}ms" if seconds < 1 else f"{seconds:g}s"


def cell(value: Any, width: int = 40) -> str:
    """A value as a table cell: strings as they are, the rest as JSON, cut at ``width``."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def whole(value: Any) -> str:
    """A value as a table cell, never cut (the column that says what to do)."""
    return cell(value, width=1 << 30)


def table(columns: Sequence[str], rows: Sequence[Sequence[str]], *, header: bool = True) -> str:
    """Left-aligned columns two spaces apart, with a header line unless ``header`` is False."""
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()] if header else []
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)
