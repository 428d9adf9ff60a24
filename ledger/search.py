"""Search: documents of one database found by a prefix of their id or by words of their text.

A document's searchable text is its top-level ``text`` (a mention's words), ``caption`` (a
post's) and ``lastError`` fields, where they are text. A search of ``q`` finds the live
documents whose id starts with ``q`` (exactly, case and all), or whose text holds every word
of ``q`` as the start of one of its words, without regard to case ("time" finds "Timeout").
Words are runs of letters and digits; everything else separates them, on both backends.

Both SQL backends answer from an index kept in the write's own transaction (``ledger/schema.py``,
migration 7): SQLite a full-text table (FTS5) that triggers keep, PostgreSQL a GIN index on the
text's ``tsvector`` ("simple": no stemming, no stop words) and an index on ids in byte order.
Results come in id order, a page at a time (``after``: the previous page's ``next``), with the
number of all matches counted up to ``COUNT_CAP``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .document import is_unicode
from .errors import Invalid
from .schema import SEARCH_FIELDS, Dialect
from .store import Doc, SearchPage

__all__ = ["COUNT_CAP", "SEARCH_FIELDS", "Search", "SearchPage", "parse_search", "searchable_text"]

QUERY_MAX = 200  # characters of a search
WORDS_MAX = 8  # words of a search that must all match
COUNT_CAP = 10_000  # matches counted at most: "10000+" past it (counting more costs more than the page)
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Search:
    """A checked search: the id prefix (the whole text, trimmed) and the words its text must hold."""

    text: str
    words: tuple[str, ...]

    @property
    def prefix_end(self) -> str:
        """The least string after every string that starts with the prefix (code point order)."""
        return _successor(self.text)


def parse_search(text: object) -> Search:
    """``text`` checked: 1 to QUERY_MAX characters once trimmed, with at most WORDS_MAX words."""
    if not isinstance(text, str):
        raise Invalid("a search is text: an id's first characters or words of a document's text")
    text = text.strip()
    if not text:
        raise Invalid("a search needs at least one character: an id's first characters or a word of a document's text")
    if len(text) > QUERY_MAX:
        raise Invalid(f"a search is at most {QUERY_MAX} characters, not {len(text)}: search for fewer words")
    if "\x00" in text or not is_unicode(text):
        raise Invalid("a search must be valid text without NUL characters")
    words = tuple(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    if len(words) > WORDS_MAX:
        raise Invalid(f"a search matches at most {WORDS_MAX} words, not {len(words)}: leave some out")
    return Search(text, words)


def searchable_text(doc: Doc) -> str:
    """The text a search reads in ``doc`` (what the backends' indexes hold), for the in-process checks."""
    return " ".join(v for f in SEARCH_FIELDS if isinstance(v := doc.get(f), str) and v)


def fts5_match(words: tuple[str, ...]) -> str:
    """SQLite FTS5: every word as a prefix of a word of the text."""
    return " ".join(f'"{w}"*' for w in words)


def tsquery(words: tuple[str, ...]) -> str:
    """PostgreSQL: every word as a prefix of a lexeme of the text (words are letters and digits only)."""
    return " & ".join(f"{w}:*" for w in words)


def _successor(text: str) -> str:
    last = ord(text[-1])
    if last >= 0x10FFFF:
        return _successor(text[:-1]) if len(text) > 1 else "\U0010ffff"
    nxt = last + 1
    if 0xD800 <= nxt <= 0xDFFF:  # no surrogates in text: the next code point is U+E000
        nxt = 0xE000
    return text[:-1] + chr(nxt)


# ---- the statements -------------------------------------------------------------------------
# The matches of both kinds (UNION: a document that matches both is one hit), then a page of
# them in id order (byte order on both backends) and their number up to COUNT_CAP + 1.
_TEXT = {
    # the full-text table first (its rowids), then their ids: the other way round, SQLite looked up the
    # whole database's keys and asked the index once for each (157 ms at 5,000 documents)
    "sqlite": "SELECT k.id AS id FROM doc_search_keys k WHERE k.k IN (SELECT rowid FROM doc_search WHERE doc_search MATCH :match) "
              "AND +k.db = :db",  # "+": not by the db index, which would read every key of the database
    "postgres": "SELECT id FROM docs WHERE db = :db AND deleted = 0 "
                "AND to_tsvector('simple', skyhub_search_text(body)) @@ to_tsquery('simple', :match)",
}
_PREFIX = {
    "sqlite": "SELECT id FROM docs WHERE db = :db AND id >= :prefix AND id < :prefix_end AND deleted = 0",
    "postgres": 'SELECT id FROM docs WHERE db = :db AND deleted = 0 AND id COLLATE "C" >= :prefix AND id COLLATE "C" < :prefix_end',
}
_BYTES = {"sqlite": "", "postgres": ' COLLATE "C"'}


@dataclass(frozen=True)
class SearchSQL:
    """A search's two statements in one dialect: a page of documents and the number of matches."""

    page: str
    count: str


def search_sql(dialect: Dialect, words: bool) -> SearchSQL:
    """The statements for a search with words (ids and text) or without (ids only)."""
    hits = _PREFIX[dialect.name] + (" UNION " + _TEXT[dialect.name] if words else "")
    order = _BYTES[dialect.name]
    # the page's ids first, then their documents (CROSS JOIN: SQLite keeps that order); every hit is a
    # live document already (the prefix reads only those, the text index holds only those)
    page = (
        "WITH hits AS (" + hits + ") SELECT d.id, d.rev, {body} FROM (SELECT id FROM hits WHERE id" + order + " > :after "
        "ORDER BY id" + order + " LIMIT :n) h CROSS JOIN docs d WHERE d.db = :db AND d.id = h.id ORDER BY h.id" + order
    )
    count = "WITH hits AS (" + hits + ") SELECT COUNT(*) FROM (SELECT 1 FROM hits LIMIT :cap) c"
    return SearchSQL(dialect.compile(page), dialect.compile(count))


def search_args(db: str, search: Search, dialect: Dialect) -> dict[str, object]:
    """The parameters of ``search_sql``'s statements (``after`` and ``n`` are the page's)."""
    args: dict[str, object] = {"db": db, "prefix": search.text, "prefix_end": search.prefix_end, "cap": COUNT_CAP + 1}
    if search.words:
        args["match"] = fts5_match(search.words) if dialect.name == "sqlite" else tsquery(search.words)
    return args
