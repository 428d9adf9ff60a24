"""Facets mark UTF-8 byte slices: what a reader sees linked must be exactly the link, mention
or tag, with emoji and accents before it; and the grapheme count is what Bluesky counts."""

from __future__ import annotations

import pytest

from platforms.richtext import MAX_GRAPHEMES, byte_slice, facets, graphemes

DIDS = {"ana.test": "did:plc:ana", "bob.example.com": "did:plc:bob"}


def marked(text: str, found: list[dict]) -> list[tuple[str, str, str]]:
    """(kind, the text under the facet, its value) for each facet, by slicing the UTF-8 bytes."""
    raw = text.encode("utf-8")
    out = []
    for facet in found:
        feature = facet["features"][0]
        kind = feature["$type"].rsplit("#", 1)[1]
        value = feature.get("uri") or feature.get("did") or feature.get("tag")
        out.append((kind, raw[facet["index"]["byteStart"]:facet["index"]["byteEnd"]].decode("utf-8"), value))
    return out


def test_byte_offsets_after_multibyte_text():
    text = "👨‍👩‍👧 café ñ @ana.test"
    (facet,) = facets(text, DIDS.get)
    start = len("👨‍👩‍👧 café ñ ".encode())
    assert facet["index"] == {"byteStart": start, "byteEnd": start + len("@ana.test")}
    assert start == 28 and text.index("@") == 13  # bytes, not characters
    assert byte_slice("é@x", 1, 3) == {"byteStart": 2, "byteEnd": 4}


def test_links_mentions_and_tags_in_one_text():
    text = "Nouveautés 🎉 par @ana.test et @bob.example.com: https://shop.example/été?x=1. #Été2027 #🎉 (https://a.example/b) #42"
    assert marked(text, facets(text, DIDS.get)) == [
        ("mention", "@ana.test", "did:plc:ana"),
        ("mention", "@bob.example.com", "did:plc:bob"),
        ("link", "https://shop.example/été?x=1", "https://shop.example/été?x=1"),
        ("tag", "#Été2027", "Été2027"),
        ("tag", "#🎉", "🎉"),
        ("link", "https://a.example/b", "https://a.example/b"),
    ]


def test_an_unresolvable_mention_simply_gets_no_facet():
    text = "hi @nobody.test and @ana.test"
    assert marked(text, facets(text, DIDS.get)) == [("mention", "@ana.test", "did:plc:ana")]
    assert facets("hi @ana.test") == []  # no resolver: no mentions at all


def test_a_resolver_is_asked_once_per_handle_case_insensitively():
    asked: list[str] = []

    def resolve(handle: str) -> str | None:
        asked.append(handle)
        return DIDS.get(handle)

    text = "@Ana.Test @ana.test @ana.test"
    assert [m[1] for m in marked(text, facets(text, resolve))] == ["@Ana.Test", "@ana.test", "@ana.test"]
    assert asked == ["ana.test"]


@pytest.mark.parametrize("text", [
    "mail me at ana@ana.test",  # not after a space
    "@ana.test_underscore",  # not a handle
    "@notahandle",  # no domain
    "see example.com/page",  # bare domains are not linked
    "a#tag in a word",
    "#123 only digits",
    "https://",
])
def test_what_is_not_a_facet(text):
    assert facets(text, DIDS.get) == []


def test_trailing_punctuation_and_parentheses_stay_outside():
    text = "Read (https://en.example/wiki/Foo_(bar)) and https://x.example/a, then #done!"
    assert marked(text, facets(text)) == [
        ("link", "https://en.example/wiki/Foo_(bar)", "https://en.example/wiki/Foo_(bar)"),
        ("link", "https://x.example/a", "https://x.example/a"),
        ("tag", "#done", "done"),
    ]


def test_a_fragment_inside_a_link_is_not_a_tag():
    text = "https://x.example/page#section"
    assert marked(text, facets(text)) == [("link", text, text)]


def test_a_tag_longer_than_64_graphemes_gets_no_facet():
    assert facets("#" + "a" * 64) != [] and facets("#" + "a" * 65) == []


@pytest.mark.parametrize("text,count", [
    ("hello", 5),
    ("café", 4),
    ("cafe\u0301", 4),  # e + combining accent: one grapheme
    ("👨‍👩‍👧‍👦", 1),  # a family: one grapheme, seven code points
    ("🇫🇷🇩🇪", 2),  # two flags
    ("👍🏽", 1),  # skin tone modifier
    ("नमस्ते", 3),
    ("", 0),
])
def test_graphemes(text, count):
    assert graphemes(text) == count


def test_the_post_limit():
    assert MAX_GRAPHEMES == 300 and graphemes("👍🏽" * 300) == 300 and len("👍🏽" * 300) == 600
