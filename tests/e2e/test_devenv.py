"""The harness itself: a mention reaches the mentioned account's notifications, and a reply in
its thread shows in the AppView's thread view, on a real local Bluesky network.

The network is shared by the session, so these accounts get handles no other test uses
(skybot-xxxxxx.test, alice-xxxxxx.test) rather than skybot.test and alice.test."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import BskyNetwork, mention_facets


def test_mention_facets_use_utf8_byte_offsets() -> None:
    text = "héllo 👋 @skybot.test, and @skybot.testing is someone else"
    [facet] = mention_facets(text, {"skybot.test": "did:plc:skybot"})
    start, end = facet["index"]["byteStart"], facet["index"]["byteEnd"]
    assert text.encode("utf-8")[start:end] == b"@skybot.test"
    assert (start, end) != (text.index("@"), text.index("@") + len("@skybot.test"))  # bytes, not characters
    with pytest.raises(ValueError):
        mention_facets("no mention here", {"skybot.test": "did:plc:skybot"})


def test_mention_notifies_and_reply_threads(bsky_network: BskyNetwork) -> None:
    net = bsky_network
    skybot = net.create_account(net.unique_handle("skybot"))
    alice = net.create_account(net.unique_handle("alice"))
    assert skybot.did.startswith("did:plc:") and alice.did.startswith("did:plc:")

    text = f"héllo 👋 @{skybot.handle} please build this"
    mention = net.post(alice, text, mentions=[skybot])
    net.process_all()

    # The PDS proxies app.bsky.* to the AppView for the signed-in account.
    notifs = net.query("app.bsky.notification.listNotifications", account=skybot)["notifications"]
    assert [(n["reason"], n["uri"]) for n in notifs] == [("mention", mention.uri)]
    assert notifs[0]["author"]["did"] == alice.did
    assert notifs[0]["author"]["handle"] == alice.handle  # the AppView resolved the handle
    [facet] = notifs[0]["record"]["facets"]
    assert facet["features"][0]["did"] == skybot.did
    assert text.encode("utf-8")[facet["index"]["byteStart"]:facet["index"]["byteEnd"]] == f"@{skybot.handle}".encode()

    reply = net.reply(skybot, mention, "on it")
    net.process_all()

    thread = net.query("app.bsky.feed.getPostThread", {"uri": mention.uri})["thread"]  # the AppView, anonymous
    assert thread["post"]["uri"] == mention.uri
    [child] = thread["replies"]
    assert child["post"]["uri"] == reply.uri
    assert child["post"]["author"]["handle"] == skybot.handle
    assert child["post"]["record"]["reply"] == {"root": mention.ref, "parent": mention.ref}
    alice_notifs = net.query("app.bsky.notification.listNotifications", account=alice)["notifications"]
    assert [(n["reason"], n["uri"]) for n in alice_notifs] == [("reply", reply.uri)]

    # A reply to the reply keeps the thread's root. (A reply that also mentions its parent's
    # author notifies them once, as a mention, not as a reply.)
    nested = net.reply(alice, reply, f"thanks @{skybot.handle}!", mentions=[skybot])
    net.process_all()
    [nested_view] = net.query("app.bsky.feed.getPosts", {"uris": [nested.uri]})["posts"]
    assert nested_view["record"]["reply"] == {"root": mention.ref, "parent": reply.ref}
    notifs = net.query("app.bsky.notification.listNotifications", account=skybot)["notifications"]
    assert sorted((n["reason"], n["uri"]) for n in notifs) == sorted([("mention", mention.uri), ("mention", nested.uri)])
