"""Bulk import: a content calendar (CSV or JSON), one row a post, each row queued through
``queue.submit_post`` as if it had been typed, independently of the others.

    read_rows(data, name=None)                 the file's rows (dicts), or ImportInvalid for a file that
                                               is not one (one sentence: what is wrong with the file)
    import_rows(db, settings, rows, *, dry_run, now_ms) -> ImportReport
                                               every row checked, with one sentence per problem
                                               naming its row and column; the good rows queued
                                               (none with dry_run); a bad row writes nothing

Rows are idempotent: a row queued again with the same content is ``unchanged``; a row with a
``slug`` whose content changed updates that post (while no step has been taken); a row without
a slug is named by its content (``queue.content_slug``), so a changed row is a new post. So a
file fixed and imported again queues only what is new or changed.

**Columns** (a CSV header, or the keys of each JSON object; names are case-insensitive, ``-``
and spaces count as ``_``):

    to                 the networks: ig, threads, bsky, each optionally :ACCOUNT, separated by
                       spaces or commas (required)
    caption            the words, for every network
    caption_ig, caption_threads, caption_bsky
                       the words on one network instead
    images             image URLs, separated by ``|`` or spaces (JSON: a list, of URLs or of
                       ``{"url", "alt"}``)
    alts               their alt texts, in the same order, separated by ``|`` (JSON: a list)
    first_comment      a first comment, posted after the post on every network
    at                 when: ``2026-12-01T09:00:00+01:00``, or without an offset with ``timezone``
    timezone           the zone of ``at`` when it has no offset (``Europe/Paris``)
    slug               the post's name (made from the content when empty)
    draft              yes/true/1: saved as a draft instead of queued

A JSON file is an array of such objects (or ``{"posts": [...]}``). CSV rows are numbered as a
spreadsheet shows them (the header is row 1, the first post row 2); JSON rows from 1.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ledger import Conflict, Forbidden, Ledger

from .errors import ImportInvalid, PostInvalid
from .queue import PostIn, VariantIn, parse_target, submit_post

COLUMNS = ("to", "caption", "caption_ig", "caption_threads", "caption_bsky", "images", "alts", "first_comment", "at",
           "timezone", "slug", "draft")
MAX_ROWS = 1000
MAX_BYTES = 1_000_000  # within what the hub's API takes as one request body
TRUE = ("yes", "true", "1", "y", "draft")
FALSE = ("", "no", "false", "0", "n")
_SPLIT = re.compile(r"[\s|]+")


@dataclass
class RowResult:
    """One row's outcome: ``new``, ``updated``, ``unchanged`` (what ``submit_post`` did or, dry, would do) or
    ``invalid`` (``problems``: one sentence each, naming the row and the column; nothing was written)."""

    row: int
    outcome: str
    post: str | None = None
    status: str | None = None
    problems: list[str] = field(default_factory=list)
    variants: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON."""
        return {"row": self.row, "outcome": self.outcome, "post": self.post, "status": self.status,
                "problems": self.problems, "variants": self.variants}


@dataclass
class ImportReport:
    """What an import did (``dry_run``: would do), row by row."""

    rows: list[RowResult]
    dry_run: bool

    @property
    def counts(self) -> dict[str, int]:
        """How many rows ended each way (new, updated, unchanged, invalid)."""
        out = {"new": 0, "updated": 0, "unchanged": 0, "invalid": 0}
        for r in self.rows:
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return out

    @property
    def problems(self) -> list[str]:
        """Every problem of every row, in order."""
        return [p for r in self.rows for p in r.problems]

    def as_dict(self) -> dict[str, Any]:
        """The answer of ``POST /v1/posts/import`` and ``skyhub publish import --json``."""
        return {"dryRun": self.dry_run, "counts": self.counts, "rows": [r.as_dict() for r in self.rows]}


def _column(name: str) -> str:
    return re.sub(r"[\s-]+", "_", name.strip().lower())


def read_rows(data: bytes | str, name: str | None = None) -> list[tuple[int, dict[str, Any]]]:
    """The rows of a CSV or JSON file (``name`` helps tell which: ``.json``; else the content does), each
    with its row number; ImportInvalid, in one sentence, when the file cannot be read as one or names a column
    that is not one."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise ImportInvalid(f"the file is {len(raw):,} bytes; an import is at most {MAX_BYTES:,} bytes (split it)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportInvalid("the file is not UTF-8 text: save the spreadsheet as CSV UTF-8, or give JSON") from None
    is_json = (name or "").lower().endswith(".json") or text.lstrip()[:1] in ("[", "{")
    rows = _json_rows(text) if is_json else _csv_rows(text)
    if len(rows) > MAX_ROWS:
        raise ImportInvalid(f"the file has {len(rows):,} rows; an import is at most {MAX_ROWS:,} rows (split it)")
    for _, row in rows:
        unknown = sorted(set(row) - set(COLUMNS) - {"_extra"})
        if unknown:
            raise ImportInvalid(f"column {unknown[0]!r} is not one: the columns are {', '.join(COLUMNS)}")
    return rows


def _json_rows(text: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        found = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportInvalid(f"the file is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if isinstance(found, dict) and isinstance(found.get("posts"), list):
        found = found["posts"]
    if not isinstance(found, list):
        raise ImportInvalid('a JSON import is an array of posts (or {"posts": [...]}), one object each')
    out = []
    for n, item in enumerate(found, start=1):
        if not isinstance(item, dict):
            raise ImportInvalid(f"row {n} is not an object: a JSON import is an array of objects with the import's columns")
        out.append((n, {_column(str(k)): v for k, v in item.items()}))
    return out


def _csv_rows(text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise ImportInvalid("the file is empty: a CSV import starts with a header row naming its columns (to, caption, ...)") from None
    except csv.Error as exc:
        raise ImportInvalid(f"the file is not CSV: {exc}") from None
    names = [_column(h) for h in header]
    if "to" not in names:
        raise ImportInvalid(f"the header has no 'to' column (the networks of each post); it names: {', '.join(names)[:200]}")
    out = []
    try:
        for values in reader:
            if not any(v.strip() for v in values):
                continue
            line = reader.line_num
            if len(values) > len(names):
                out.append((line, {**dict(zip(names, values)), "_extra": values[len(names):]}))
                continue
            out.append((line, {k: v for k, v in zip(names, values)}))
    except csv.Error as exc:
        raise ImportInvalid(f"the file is not CSV at row {reader.line_num}: {exc}") from None
    return out


def _text(value: Any, row: int, column: str, problems: list[str]) -> str:
    if value is None:
        return ""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        problems.append(f"row {row}, {column}: must be text")
        return ""
    return str(value)


def _list(value: Any, row: int, column: str, problems: list[str], *, by_bar: bool) -> list[Any]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        parts = value.split("|") if by_bar else _SPLIT.split(value)
        return [p.strip() for p in parts if p.strip()] if not by_bar else [p.strip() for p in parts]
    problems.append(f"row {row}, {column}: must be text (or a JSON list)")
    return []


def _when(row: dict[str, Any], n: int, problems: list[str]) -> str | None:
    at = _text(row.get("at"), n, "at", problems).strip()
    zone = _text(row.get("timezone"), n, "timezone", problems).strip()
    if not at:
        if zone:
            problems.append(f"row {n}, timezone: a time zone is for at, which is empty")
        return None
    try:
        when = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        problems.append(f"row {n}, at: {at[:40]!r} is not a time: write it like 2026-12-01T09:00:00+01:00 "
                        "(or 2026-12-01 09:00 with a timezone column)")
        return None
    if when.tzinfo is not None:
        if zone:
            problems.append(f"row {n}, timezone: at already has an offset ({at[:40]}): leave one of them out")
        return at
    if not zone:
        problems.append(f"row {n}, at: {at[:40]!r} has no time zone: add its offset (+01:00) or a timezone column (Europe/Paris)")
        return None
    try:
        return when.replace(tzinfo=ZoneInfo(zone)).isoformat()
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"row {n}, timezone: {zone[:40]!r} is not a time zone: use a name like Europe/Paris or UTC")
        return None


def row_post(n: int, row: dict[str, Any]) -> tuple[PostIn | None, list[str]]:
    """A row as a ``PostIn``, or the problems that keep it from being one (one sentence each, with the row and the column)."""
    problems: list[str] = []
    if "_extra" in row:
        problems.append(f"row {n}: it has more cells than the header has columns")
    targets = row.get("to")
    names = targets if isinstance(targets, list) else _list(targets, n, "to", problems, by_bar=False)
    if not names:
        problems.append(f"row {n}, to: give the networks of the post (ig, threads, bsky, each optionally :ACCOUNT)")
    captions = {p: _text(row.get(f"caption_{p}"), n, f"caption_{p}", problems) for p in ("ig", "threads", "bsky")}
    variants = []
    for name in names:
        try:
            platform, account = parse_target(str(name).replace(",", " ").strip())
        except PostInvalid as exc:
            problems.append(f"row {n}, to: {exc.reason}")
            continue
        variants.append(VariantIn(platform=platform, account=account, caption=captions[platform] or None))
    images = _list(row.get("images"), n, "images", problems, by_bar=False)
    alts = _list(row.get("alts"), n, "alts", problems, by_bar=True)
    if len(alts) > len(images):
        problems.append(f"row {n}, alts: {len(alts)} alt texts for {len(images)} images: give one per image, in the same order")
    pictures: list[dict[str, Any]] = []
    for i, image in enumerate(images):
        if isinstance(image, dict):
            pictures.append({k: v for k, v in image.items() if k in ("url", "alt")})
        elif isinstance(image, str):
            pictures.append({"url": image, "alt": str(alts[i]) if i < len(alts) else ""})
        else:
            problems.append(f"row {n}, images: image {i + 1} must be a URL")
    draft = _text(row.get("draft"), n, "draft", problems).strip().lower() if not isinstance(row.get("draft"), bool) else \
        ("yes" if row["draft"] else "")
    if draft not in TRUE + FALSE:
        problems.append(f"row {n}, draft: {draft[:20]!r} is not yes or no")
    slug = _text(row.get("slug"), n, "slug", problems).strip() or None
    at = _when(row, n, problems)
    comment = _text(row.get("first_comment"), n, "first_comment", problems).strip() or None
    if problems:
        return None, problems
    return PostIn(variants=variants, caption=_text(row.get("caption"), n, "caption", problems), images=pictures,
                  first_comment=comment, at=at, slug=slug, draft=draft in TRUE), []


def _column_of(sentence: str, post: PostIn) -> str:
    """The column a validation sentence of ``submit_post`` is about."""
    from .webform import field_for

    body = sentence.split(": ", 1)[1] if re.match(r"^(ig|threads|bsky):[^ ]*: ", sentence) else sentence
    platform = sentence.split(":", 1)[0]
    if "first comment" in body:
        return "first_comment"
    found = field_for(body)
    if found.startswith("alt-"):
        return "alts"
    if found.startswith("image") or found == "images":
        return "images"
    if found in ("account", "platform"):
        return "to"
    if found == "caption" and any(v.platform == platform and v.caption is not None for v in post.variants):
        return f"caption_{platform}"
    return {"at": "at", "slug": "slug", "replyTo": "to"}.get(found, "caption")


def import_rows(db: Ledger, settings: Any, rows: list[tuple[int, dict[str, Any]]], *, dry_run: bool, now_ms: int) -> ImportReport:
    """Check every row and queue the good ones (none with ``dry_run``), as ``db.actor``; see the module docstring.
    A row that cannot be queued writes nothing and says why; the others go on."""
    out: list[RowResult] = []
    for n, row in rows:
        post, problems = row_post(n, row)
        if post is None:
            out.append(RowResult(n, "invalid", problems=problems))
            continue
        try:
            done = submit_post(db, settings, post, now_ms=now_ms, dry_run=dry_run)
        except PostInvalid as exc:
            out.append(RowResult(n, "invalid", post=post.slug, problems=[
                f"row {n}, {_column_of(s, post)}: {s}" for s in exc.reason.split("; ")]))
            continue
        except (Conflict, Forbidden) as exc:
            out.append(RowResult(n, "invalid", post=post.slug, problems=[f"row {n}, slug: {exc.reason}" if isinstance(exc, Conflict)
                                                                          else f"row {n}: {exc.reason}"]))
            continue
        outcome = "new" if done.queued else "updated" if done.updated else "unchanged"
        out.append(RowResult(n, outcome, post=done.id, status=done.status, variants=done.variants))
    return ImportReport(out, dry_run)


__all__ = ["COLUMNS", "ImportReport", "RowResult", "import_rows", "read_rows", "row_post"]
