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
from .schema import POSTGRES_SEARCHABLE, SEARCH_FIELDS, Dialect
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
# A page is the first ``n`` ids after ``after`` of each kind of match (each read in id order and cut
# at ``n``), merged: never every match sorted. The matches are counted first, each kind up to
# COUNT_CAP + 1: the id-prefix hits, and the text hits outside the prefix's range (so that a
# document found both ways is one hit, without a UNION of every match). The text's number picks
# how its page is read:
# - COUNT_CAP or fewer: from the index, their ids, sorted (``page``);
# - more: the database's ids in order, each checked against the index, until the page is full
#   (``page_dense``: many match, so that is a few hundred ids read, not every match sorted).
# Measured in docs/benchmarks.md ("Search"): a word in every one of 100,000 documents.
_TEXT = {
    # the full-text table first (its rowids), then their ids: the other way round, SQLite looked up the
    # whole database's keys and asked the index once for each (157 ms at 5,000 documents)
    # (CROSS JOIN: in that order, the matches streamed, not first copied into a list; "+": not by the db
    # index, which would read every key of the database)
    "sqlite": "SELECT k.id AS id FROM doc_search CROSS JOIN doc_search_keys k WHERE doc_search MATCH :match "
              "AND k.k = doc_search.rowid AND +k.db = :db",
    # (the index's own condition named, so that the planner may read it: see POSTGRES_SEARCHABLE)
    "postgres": "SELECT id FROM docs WHERE db = :db AND deleted = 0 AND " + POSTGRES_SEARCHABLE
                + " AND to_tsvector('simple', skyhub_search_text(body)) @@ to_tsquery('simple', :match)",
}
_TEXT_DENSE = {
    # the database's keys in id order (its index), each looked up in the matches' rowids (one list, built once)
    "sqlite": "SELECT k.id AS id FROM doc_search_keys k WHERE k.db = :db "
              "AND +k.k IN (SELECT rowid FROM doc_search WHERE doc_search MATCH :match)",
    # the ids in byte order (docs_by_id_bytes), each document's text checked: "|| ''" keeps the planner
    # off the GIN index, which would give every match to be sorted
    "postgres": "SELECT id FROM docs WHERE db = :db AND deleted = 0 AND " + POSTGRES_SEARCHABLE
                + " AND to_tsvector('simple', skyhub_search_text(body) || '') @@ to_tsquery('simple', :match)",
}
_PREFIX = {
    "sqlite": "SELECT id FROM docs WHERE db = :db AND id >= :prefix AND id < :prefix_end AND deleted = 0",
    "postgres": 'SELECT id FROM docs WHERE db = :db AND deleted = 0 AND id COLLATE "C" >= :prefix AND id COLLATE "C" < :prefix_end',
}
_BYTES = {"sqlite": "", "postgres": ' COLLATE "C"'}


@dataclass(frozen=True)
class SearchSQL:
    """A search's statements in one dialect: the number of matches, then a page (read one of two ways)."""

    count: str
    page: str  # the text's matches from the index, sorted (few matches, or no words)
    page_dense: str  # the ids in order, each checked (more than COUNT_CAP matches)


def search_sql(dialect: Dialect, words: bool) -> SearchSQL:
    """The statements for a search with words (ids and text) or without (ids only)."""
    name, order = dialect.name, _BYTES[dialect.name]

    def first(hits: str, every: bool = False) -> str:  # the first :n of some matches after :after, in id order
        if every:  # PostgreSQL: all of them from the GIN index, then sorted. "OFFSET 0" plans them apart from the
            # ORDER BY ... LIMIT, which drew the planner to walk the ids in order and check each document
            # (100,274 buffers for a word found once in 100,000 documents; the index reads 340)
            hits = f"SELECT id FROM ({hits} AND id{order} > :after OFFSET 0) AS every WHERE TRUE"
        return f"SELECT id FROM ({hits} AND id{order} > :after ORDER BY id{order} LIMIT :n) AS f"

    def page(text: str | None, sparse: bool = False) -> str:
        hits = first(_PREFIX[name]) + (" UNION " + first(text, sparse and name == "postgres") if text else "")
        # the page's ids first, then their documents (CROSS JOIN: SQLite keeps that order); every hit is a
        # live document already (the prefix reads only those, the text index holds only those)
        return ("WITH hits AS (" + hits + ") SELECT d.id, d.rev, {body} FROM (SELECT id FROM hits "
                "ORDER BY id" + order + " LIMIT :n) h CROSS JOIN docs d WHERE d.db = :db AND d.id = h.id ORDER BY h.id" + order)

    count = "SELECT (SELECT COUNT(*) FROM (" + _PREFIX[name] + " LIMIT :cap) AS a), "
    if words:  # the text's matches apart: their number alone says how dense they are
        outside = f" AND NOT (id{order} >= :prefix AND id{order} < :prefix_end)"
        count += "(SELECT COUNT(*) FROM (" + _TEXT[name] + outside + " LIMIT :cap) AS t)"
    else:
        count += "0"
    text, dense = (_TEXT[name], _TEXT_DENSE[name]) if words else (None, None)
    return SearchSQL(dialect.compile(count), dialect.compile(page(text, sparse=True)), dialect.compile(page(dense)))


def search_args(db: str, search: Search, dialect: Dialect) -> dict[str, object]:
    """The parameters of ``search_sql``'s statements (``after`` and ``n`` are the page's)."""
    args: dict[str, object] = {"db": db, "prefix": search.text, "prefix_end": search.prefix_end, "cap": COUNT_CAP + 1}
    if search.words:
        args["match"] = fts5_match(search.words) if dialect.name == "sqlite" else tsquery(search.words)
    return args
