"""Bluesky rich text: facets for links, mentions and hashtags, and the grapheme count.

A facet (``app.bsky.richtext.facet``) marks a slice of a post's text by **UTF-8 byte**
offsets, start inclusive, end exclusive, so ``"café @ana.test"`` marks the mention at bytes
6..15, not characters 5..14. What is detected, following Bluesky's own rules:

    links     ``http://`` or ``https://`` URLs, after a space or "(" or at the start; trailing
              punctuation (``.,;:!?``) and an unbalanced ")" are left out. Bare domains
              ("example.com") are not linked: in a published post a link we did not mean is
              worse than one we did not make.
    mentions  ``@handle.domain`` after a space or "(" or at the start, resolved to a DID through
              the ``resolve`` callable; a handle it cannot resolve (``None``) gets no facet.
    tags      ``#tag`` (or the full-width ``＃``) after a space or at the start, not only digits,
              trailing punctuation left out, at most 64 graphemes; the facet's ``tag`` has no "#".

The grapheme count is Unicode's extended grapheme clusters (UAX #29, through the ``regex``
package's ``\\X``), which is what Bluesky's 300-grapheme limit counts: a family emoji or a
flag is one, "e" plus a combining accent is one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

MAX_GRAPHEMES = 300  # app.bsky.feed.post text
MAX_TAG_GRAPHEMES = 64  # app.bsky.richtext.facet#tag

_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
_INVISIBLE = "\u00ad\u2060\u200a\u200b\u200c\u200d\u20e2"


@functools.cache
def _re() -> Any:
    """The patterns, compiled on first use: ``regex`` (about 2 MB) stays out of a hub that never counts a post."""
    import regex

    return SimpleNamespace(
        grapheme=regex.compile(r"\X"),
        mention=regex.compile(rf"(?:^|(?<=[\s(]))@({_LABEL}(?:\.{_LABEL})*\.[a-zA-Z](?:[a-zA-Z0-9-]{{0,61}}[a-zA-Z0-9])?)(?![\w.-]*\w)"),
        link=regex.compile(r"(?:^|(?<=[\s(]))https?://[^\s]+", regex.IGNORECASE),
        tag=regex.compile(rf"(?:^|(?<=\s))[#\uff03]((?!\ufe0f)[^\s{_INVISIBLE}]*[^\d\s\p{{P}}{_INVISIBLE}]+[^\s{_INVISIBLE}]*)"),
        trailing_punct=regex.compile(r"\p{P}+$"),
    )

Resolve = Callable[[str], "str | None"]


def graphemes(text: str) -> int:
    """How many user-perceived characters ``text`` has (extended grapheme clusters)."""
    return len(_re().grapheme.findall(text))


def byte_slice(text: str, start: int, end: int) -> dict[str, int]:
    """The facet index for characters ``start``..``end`` of ``text``, in UTF-8 bytes."""
    byte_start = len(text[:start].encode("utf-8"))
    return {"byteStart": byte_start, "byteEnd": byte_start + len(text[start:end].encode("utf-8"))}


def _facet(text: str, start: int, end: int, feature: dict[str, str]) -> dict[str, Any]:
    return {"index": byte_slice(text, start, end), "features": [feature]}


def _trim_link(url: str) -> str:
    url = url.rstrip(".,;:!?\"'")
    if url.endswith(")") and url.count("(") < url.count(")"):
        url = url[:-1].rstrip(".,;:!?\"'")
    return url


def link_facets(text: str) -> list[dict[str, Any]]:
    """``#link`` facets for the http(s) URLs in ``text``."""
    out = []
    for m in _re().link.finditer(text):
        url = _trim_link(m.group(0))
        if len(url) > len("https://"):
            out.append(_facet(text, m.start(), m.start() + len(url), {"$type": "app.bsky.richtext.facet#link", "uri": url}))
    return out


def mention_facets(text: str, resolve: Resolve) -> list[dict[str, Any]]:
    """``#mention`` facets for the ``@handle``s in ``text`` that ``resolve`` turns into a DID."""
    out, dids = [], {}
    for m in _re().mention.finditer(text):
        handle = m.group(1).lower()
        if handle not in dids:
            dids[handle] = resolve(handle)
        did = dids[handle]
        if did:
            out.append(_facet(text, m.start(), m.end(), {"$type": "app.bsky.richtext.facet#mention", "did": did}))
    return out


def tag_facets(text: str) -> list[dict[str, Any]]:
    """``#tag`` facets for the hashtags in ``text`` (the ``tag`` without its "#")."""
    out = []
    for m in _re().tag.finditer(text):
        tag = _re().trailing_punct.sub("", m.group(1))
        if not tag or graphemes(tag) > MAX_TAG_GRAPHEMES:
            continue
        end = m.start(1) + len(tag)
        out.append(_facet(text, m.start(), end, {"$type": "app.bsky.richtext.facet#tag", "tag": tag}))
    return out


def facets(text: str, resolve: Resolve | None = None) -> list[dict[str, Any]]:
    """Every facet of ``text``, in order: links, tags, and mentions when ``resolve`` is given.

    A slice covered by an earlier facet (a ``#fragment`` inside a URL) gets no second one."""
    found = link_facets(text) + tag_facets(text) + (mention_facets(text, resolve) if resolve else [])
    found.sort(key=lambda f: (f["index"]["byteStart"], -f["index"]["byteEnd"]))
    out: list[dict[str, Any]] = []
    for facet in found:
        if out and facet["index"]["byteStart"] < out[-1]["index"]["byteEnd"]:
            continue
        out.append(facet)
    return out
