"""Documents: validation, reserved fields, revisions, and database names."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from .errors import Invalid, TooLarge

MAX_DOC_BYTES = 1024 * 1024
DB_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
ID_MAX = 512
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
RESERVED = ("_id", "_rev", "_deleted")

Doc = dict[str, Any]


def check_db(db: object) -> str:
    if not isinstance(db, str) or not DB_NAME.match(db):
        raise Invalid(
            f"database name {db!r} is not valid: use 1-64 characters, lowercase letters, "
            "digits, '-' or '_', starting with a letter"
        )
    return db


def check_id(doc_id: object) -> str:
    if not isinstance(doc_id, str) or not doc_id or len(doc_id) > ID_MAX:
        raise Invalid(f"document id {doc_id!r} is not valid: use a non-empty string of at most {ID_MAX} characters")
    if _CONTROL.search(doc_id):
        raise Invalid("document id must not contain control characters")
    return doc_id


def check_field(field: object) -> str:
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


def encode(body: Doc) -> str:
    """Canonical compact JSON; raises TooLarge over the limit, Invalid for non-JSON values."""
    try:
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Invalid(f"document is not plain JSON: {exc}") from None
    if len(text) > MAX_DOC_BYTES and len(text.encode()) > MAX_DOC_BYTES:
        raise TooLarge(
            f"document is {len(text.encode()):,} bytes; the limit is {MAX_DOC_BYTES:,} bytes (1 MiB): "
            "keep large payloads outside the ledger and store a reference"
        )
    return text


def rev_number(rev: str | None) -> int:
    if not rev:
        return 0
    head, _, _ = rev.partition("-")
    return int(head) if head.isdigit() else 0


def next_rev(prev: str | None, text: str, deleted: bool = False) -> str:
    digest = hashlib.blake2b(
        f"{prev or ''}\0{int(deleted)}\0{text}".encode(), digest_size=8
    ).hexdigest()
    return f"{rev_number(prev) + 1}-{digest}"


def with_meta(body: Doc, doc_id: str, rev: str, deleted: bool = False) -> Doc:
    out: Doc = {"_id": doc_id, "_rev": rev}
    if deleted:
        out["_deleted"] = True
    out.update(body)
    return out
