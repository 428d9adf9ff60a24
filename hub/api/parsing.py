"""Strict parsing of what the HTTP layer reads itself: a query key given as JSON and a
``Last-Event-ID``. Anything else a request carries is read by FastAPI from the declared types."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ledger import Invalid

MAX_SEQ = 2**62
_SEQ = re.compile(r"^[0-9]{1,19}$")


def _no_constant(name: str) -> Any:
    raise Invalid(f"key_json: {name} is not JSON: use a finite number, a string, true, false or null")


def _int64(text: str) -> int:
    if len(text.lstrip("-")) > 19 or not -(2**63) <= (value := int(text)) < 2**63:
        raise Invalid("key_json: integers must fit in 64 bits (-2^63 to 2^63-1); store larger ones as strings")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Invalid(f"key_json: {text[:40]} is out of range for a number")
    return value


def parse_key_json(text: str) -> Any:
    """A query key given as JSON, parsed strictly: no NaN or Infinity, integers within 64 bits,
    finite floats, strings that are valid Unicode (no lone surrogates)."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_int=_int64, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise Invalid(f"key_json is not valid JSON ({exc.msg} at {exc.pos})") from None
    except RecursionError:
        raise Invalid("key_json is nested too deeply") from None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("key_json: the string holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode") from None
    return value


def parse_last_event_id(text: str | None) -> int | None:
    """``Last-Event-ID``: absent or empty, or a sequence number this stream sent as an id."""
    if text is None or not text.strip():
        return None
    if not _SEQ.match(text.strip()) or int(text) > MAX_SEQ:
        raise Invalid(f"Last-Event-ID must be the id of an event this stream sent (a sequence number), not {text[:40]!r}")
    return int(text)
