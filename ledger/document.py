"""Documents: validation, reserved fields, revisions, and database names.

Limits are checked before anything is written, the same way on every backend, so that what
the store holds can always be read back, served as JSON and stored by PostgreSQL:

- at most ``MAX_DOC_BYTES`` of JSON, ``MAX_DEPTH`` levels of nesting, ``MAX_KEYS`` keys;
- text (keys and values) is valid Unicode without NUL: PostgreSQL refuses ``\\u0000`` in
  JSONB and TEXT, and a lone surrogate (``"\\ud800"``) cannot be encoded as UTF-8.

Documents written before these limits existed are read back within them (``decode``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
import time
from typing import Any

from .errors import Invalid, TooLarge

MAX_DOC_BYTES = 1024 * 1024
MAX_DEPTH = 64  # nesting levels, the document itself being level 1
MAX_KEYS = 10_000  # keys of every object in the document, added up
MAX_SEQ = 2**63 - 1  # sequence numbers and integer query keys are 64-bit signed in both databases
DB_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
ID_MAX = 512
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
RESERVED = ("_id", "_rev", "_deleted")

Doc = dict[str, Any]


def check_db(db: object) -> str:
    """``db`` if it is a valid database name; Invalid saying what is allowed otherwise."""
    if not isinstance(db, str) or not DB_NAME.match(db):
        raise Invalid(
            f"database name {db!r} is not valid: use 1-64 characters, lowercase letters, "
            "digits, '-' or '_', starting with a letter"
        )
    return db


def check_id(doc_id: object) -> str:
    """``doc_id`` if it is a valid document id; Invalid saying what is allowed otherwise."""
    if not isinstance(doc_id, str) or not doc_id or len(doc_id) > ID_MAX:
        raise Invalid(f"document id {doc_id!r} is not valid: use a non-empty string of at most {ID_MAX} characters")
    if _CONTROL.search(doc_id):
        raise Invalid("document id must not contain control characters")
    if not doc_id.isascii() and not is_unicode(doc_id):
        raise Invalid("document id must be valid Unicode (it holds a lone surrogate such as \\ud800)")
    return doc_id


def new_id() -> str:
    """A new document's id when its writer names none: 32 hex digits, the first 12 the wall clock's
    milliseconds and the other 20 random (80 bits).

    Time first, so that the documents written together sit together in every B-tree keyed by id (the
    documents' table, the status indexes, the history's): a batch that claims or finishes the jobs
    created a moment ago writes a few neighbouring pages instead of one page per job in random places
    of each tree. On SQLite every page a transaction dirties is a WAL frame written at its commit
    (about 20 us each here), so a random id (uuid4) cost a claim-and-finish batch 15-25 %
    (docs/benchmarks.md, round 3, session 29). The random part keeps ids unguessable and unique
    across processes and machines; the order is a locality hint, not a promise (clocks step)."""
    return f"{time.time_ns() // 1_000_000:012x}{secrets.token_hex(10)}"


def check_cursor(after: object) -> str:
    """A ``next`` cursor from a previous page (a document id), or None/"" for the first page."""
    if after is None or after == "":
        return ""
    if not isinstance(after, str) or len(after) > ID_MAX or _CONTROL.search(after) or not (after.isascii() or is_unicode(after)):
        raise Invalid("after must be the next cursor of a previous page (a document id)")
    return after


TIME_END = 2**62  # past every written time: the first page of newest-first starts below it


def time_cursor(written: int, id: str) -> str:
    """A ``by_time`` page's ``next``: when the last document was written, and its id."""
    return f"{written}:{id}"


def parse_time_cursor(after: object, newest: bool) -> tuple[int, str]:
    """(written, id) to start after: a ``time_cursor``; for the first page (None or ""), the end the order starts from."""
    if after is None or after == "":
        return (TIME_END, "") if newest else (-1, "")
    text = after if isinstance(after, str) else ""
    written, colon, id = text.partition(":")
    if not colon or not written.isdigit() or len(written) > 18:
        raise Invalid("after must be the next cursor of a previous page by time (\"<written>:<id>\")")
    return int(written), check_cursor(id)


def check_seq(since: object, what: str = "since") -> int:
    """``since`` as a change sequence number (a non-negative integer); Invalid otherwise."""
    if not isinstance(since, int) or isinstance(since, bool) or not 0 <= since <= MAX_SEQ:
        raise Invalid(f"{what} must be a sequence number between 0 and {MAX_SEQ}")
    return since


def check_key(key: object) -> str | int | float | bool:
    """A value to query a field by: a string, a 64-bit integer, a finite number or a boolean."""
    if isinstance(key, bool):
        return key
    if isinstance(key, int):
        if not -MAX_SEQ - 1 <= key <= MAX_SEQ:
            raise Invalid("query key is out of range: integers must be between -2^63 and 2^63-1")
        return key
    if isinstance(key, float):
        if not math.isfinite(key):
            raise Invalid("query key must be a finite number, not NaN or Infinity")
        return key
    if isinstance(key, str):
        if "\x00" in key:
            raise Invalid("query key must not contain the NUL character (\\u0000)")
        if not key.isascii() and not is_unicode(key):
            raise Invalid("query key must be valid Unicode (it holds a lone surrogate such as \\ud800)")
        return key
    raise Invalid("query key must be a string, number or boolean")


def is_unicode(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (holds no lone surrogate such as \\ud800)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def check_field(field: object) -> str:
    """``field`` if it is a valid top-level field name; Invalid otherwise."""
    if not isinstance(field, str) or not FIELD_NAME.match(field):
        raise Invalid(
            f"field {field!r} cannot be queried: use a top-level field name of letters, digits and '_'"
        )
    return field


def split_body(doc: object) -> tuple[Doc, str | None, str | None]:
    """Return (body without _id/_rev, _id, _rev) or raise Invalid for a bad document."""
    if not isinstance(doc, dict):
        raise Invalid(f"a document must be a JSON object, not {type(doc).__name__ if doc is not None else 'null'}")
    body: Doc = {}
    doc_id = rev = None
    for key, value in doc.items():
        if not isinstance(key, str):
            raise Invalid("document keys must be strings")
        if key == "_id":
            doc_id = check_id(value)
        elif key == "_rev":
            if not isinstance(value, str):
                raise Invalid("_rev must be a string like '3-ab12cd34ef56ab78'")
            rev = value
        elif key.startswith("_"):
            raise Invalid(f"field {key!r} is reserved: fields starting with '_' are managed by skyhub")
        else:
            body[key] = value
    return body, doc_id, rev


def check_shape(body: Doc) -> None:
    """Raise Invalid if ``body`` nests deeper than MAX_DEPTH, has more than MAX_KEYS keys, or
    holds a NUL character in a key or a string value. Iterative: any depth is safe to check."""
    keys = 0
    todo: list[tuple[Any, int]] = [(body, 1)]
    while todo:
        node, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise Invalid(f"document is nested more than {MAX_DEPTH} levels deep: flatten it (the limit is {MAX_DEPTH})")
        if isinstance(node, dict):
            keys += len(node)
            if keys > MAX_KEYS:
                raise Invalid(f"document has more than {MAX_KEYS:,} keys in all: split it (the limit is {MAX_KEYS:,})")
            for key, value in node.items():
                if isinstance(key, str) and "\x00" in key:
                    raise Invalid("document keys must not contain the NUL character (\\u0000)")
                if isinstance(value, (dict, list)):
                    todo.append((value, depth + 1))
                elif isinstance(value, str) and "\x00" in value:
                    raise Invalid(f"field {key!r} holds the NUL character (\\u0000), which the ledger does not store")
        else:
            for value in node:
                if isinstance(value, (dict, list)):
                    todo.append((value, depth + 1))
                elif isinstance(value, str) and "\x00" in value:
                    raise Invalid("a list holds the NUL character (\\u0000), which the ledger does not store")


def encode(body: Doc) -> str:
    """Canonical compact JSON; raises TooLarge over the limit, Invalid for non-JSON values,
    documents over the depth or key limits, NUL characters and lone surrogates."""
    check_shape(body)
    try:
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Invalid(f"document is not plain JSON: {exc}") from None
    try:
        size = len(text.encode()) if len(text) * 4 > MAX_DOC_BYTES or not text.isascii() else len(text)
    except UnicodeEncodeError:
        raise Invalid("document text must be valid Unicode: it holds a lone surrogate such as \\ud800") from None
    if size > MAX_DOC_BYTES:
        raise TooLarge(
            f"document is {size:,} bytes; the limit is {MAX_DOC_BYTES:,} bytes (1 MiB): "
            "keep large payloads outside the ledger and store a reference"
        )
    return text


TRUNCATED = "_truncated"


def decode(text: str | bytes) -> Doc:
    """A stored body, read back within the limits whatever it holds.

    Documents stored before the depth limit may nest deeper; every reader (get, query,
    history, the change feed, the API's JSON) must still work, so the levels past MAX_DEPTH
    are cut and the reserved field ``_truncated`` says so (such a document cannot be written
    back as read: write a flatter one)."""
    if isinstance(text, bytes):
        text = text.decode()
    if text.count("{") + text.count("[") <= MAX_DEPTH:  # cannot nest deeper: the common case
        return json.loads(text)  # type: ignore[no-any-return]
    try:
        body = json.loads(text)
    except RecursionError:
        return {TRUNCATED: f"this document nests too deep to be read (the limit is {MAX_DEPTH} levels): rewrite or delete it"}
    if _depth(body) <= MAX_DEPTH:
        return body  # type: ignore[no-any-return]
    out = _cut(body, MAX_DEPTH)
    out[TRUNCATED] = f"levels past {MAX_DEPTH} are not shown (the limit is {MAX_DEPTH}): rewrite the document flatter"
    return out  # type: ignore[no-any-return]


def _depth(node: Any) -> int:
    deepest = 0
    todo = [(node, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node
        todo.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def _cut(node: Any, levels: int) -> Any:
    if not isinstance(node, (dict, list)):
        return node
    if levels <= 1:
        return {} if isinstance(node, dict) else []
    if isinstance(node, dict):
        return {k: _cut(v, levels - 1) for k, v in node.items()}
    return [_cut(v, levels - 1) for v in node]


def rev_number(rev: str | None) -> int:
    """The generation of a revision (``3`` for ``3-ab12...``); 0 for none."""
    if not rev:
        return 0
    head, _, _ = rev.partition("-")
    return int(head) if head.isdigit() else 0


def next_rev(prev: str | None, text: str, deleted: bool = False) -> str:
    """The revision after ``prev`` for a body ``text``: generation + 1 and a hash of the content."""
    digest = hashlib.blake2b(
        f"{prev or ''}\0{int(deleted)}\0{text}".encode(), digest_size=8
    ).hexdigest()
    return f"{rev_number(prev) + 1}-{digest}"


def with_meta(body: Doc, doc_id: str, rev: str, deleted: bool = False) -> Doc:
    """``body`` with ``_id``, ``_rev`` (and ``_deleted`` when deleted) set."""
    out: Doc = {"_id": doc_id, "_rev": rev}
    if deleted:
        out["_deleted"] = True
    out.update(body)
    return out
