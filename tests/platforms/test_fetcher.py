"""The guarded fetcher (platforms/fetcher.py, addresses.py): every address form that means this
machine or its network is refused before a connection is made, redirects are checked hop by
hop, the connection goes to the address that was checked (not to a second DNS answer), and the
caps hold. Real servers on loopback stand in for the internet: the policy allows 127.0.0.2 (the
"public" server) and nothing else, and a canary on 127.0.0.1 proves that no refused fetch ever
reached it."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from platforms.addresses import FetchPolicy
from platforms.errors import FetchRefused, NetworkError, Transient
from platforms.fetcher import Fetcher
from skyhub_testkit.servers import LocalServer

PUBLIC = "93.184.216.34"
NOT_PUBLIC = [
    "127.0.0.1", "127.1.2.3", "0.0.0.0", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
    "224.0.0.1", "240.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1",
    "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254",
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2001:0:4136:e378:8000:63bf:80ff:fffe", "2001:db8::1",
]


def Server(host, routes=None, delay=0.0):  # noqa: N802 - reads like the class it makes
    """A real server on ``host``; a path without a route answers the text "canary"."""
    return LocalServer(host, routes, default=b"canary", default_type="text/plain", delay=delay)


@pytest.fixture
def canary():
    s = Server("127.0.0.1")
    yield s
    s.stop()
    assert s.hits == [], f"the canary was reached: {s.hits}"


def public_policy(**kw) -> FetchPolicy:
    """127.0.0.2 stands in for the internet; everything else keeps the default refusals."""
    return FetchPolicy(allow_http=True, allow_networks=(ipaddress.ip_network("127.0.0.2/32"),), **kw)


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_every_non_public_address_is_refused_by_default(address):
    policy = FetchPolicy()
    assert not policy.address_allowed(ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    assert policy.url_problem(f"https://{host}/a.png") == "its address is not a public one"


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "017700000001", "127.1", "0x7f.1", "localhost", "LOCALHOST.",
                                  "shop.localhost", "ip6-localhost"])
def test_other_spellings_of_this_machine_are_refused(host):
    assert FetchPolicy().url_problem(f"https://{host}/cam.png") == "its address is not a public one"


@pytest.mark.parametrize("url,words", [
    ("file:///etc/passwd", "only http(s) URLs"), ("/var/lib/skyhub/vault.key", "not a URL"), ("ftp://x.example/a", "only http(s)"),
    ("http://[::1/a", "cannot be read"), ("https://x.example:99999/", "cannot be read"), ("https://user:pw@x.example/a", "user name"),
    ("https://x.example/a b", "spaces"), ("http://x.example/a.png", "only https"), ("https:///a.png", "no host"),
])
def test_urls_that_are_not_public_https_are_refused_with_a_sentence(url, words):
    assert words in (FetchPolicy().url_problem(url) or "")


def test_public_addresses_and_allowed_networks_pass():
    policy = FetchPolicy(allow_networks=(ipaddress.ip_network("10.1.2.0/24"),))
    assert policy.address_allowed(ipaddress.ip_address(PUBLIC)) and policy.address_allowed(ipaddress.ip_address("2606:4700::1"))
    assert policy.address_allowed(ipaddress.ip_address("10.1.2.3")) and not policy.address_allowed(ipaddress.ip_address("10.1.3.3"))
    assert policy.url_problem("https://cdn.example.org/a.jpg") is None


def test_a_name_that_resolves_to_this_machine_is_refused_and_nothing_is_connected(canary):
    for answer in (["127.0.0.1"], [PUBLIC, "127.0.0.1"], ["::ffff:127.0.0.1"], ["169.254.169.254"]):
        fetcher = Fetcher(FetchPolicy(allow_http=True), resolver=lambda host, port, a=answer: a)
        with pytest.raises(FetchRefused) as refused:
            fetcher.get(f"http://cam.example:{canary.port}/cam.png", what="image 1")
        assert refused.value.reason == "image 1 is not fetched: its address is not a public one"


def test_the_connection_goes_to_the_address_that_was_checked(canary):
    public = Server("127.0.0.2", {"/a.png": (200, {"Content-Type": "image/png"}, b"PNGDATA")})
    try:
        answers = iter([["127.0.0.2"], ["127.0.0.1"], ["127.0.0.1"]])  # DNS rebinding: a second answer points home
        fetcher = Fetcher(public_policy(), resolver=lambda host, port: next(answers))
        got = fetcher.get(f"http://pics.example:{public.port}/a.png")
        assert got.status == 200 and got.content == b"PNGDATA" and public.hits == ["/a.png"]
        with pytest.raises(FetchRefused):  # the next fetch is checked again
            fetcher.get(f"http://pics.example:{canary.port}/a.png")
    finally:
        public.stop()


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:{canary}/x", "http://localhost:{canary}/x", "http://[::1]:{canary}/x", "http://[::ffff:127.0.0.1]:{canary}/x",
    "http://169.254.169.254/latest/meta-data/", "file:///etc/passwd", "http://2130706433:{canary}/x", "http://inside.example:{canary}/x",
])
def test_a_redirect_to_any_refused_address_is_refused(canary, target):
    location = target.format(canary=canary.port)
    public = Server("127.0.0.2", {"/a.png": (302, {"Location": location}, b"")})
    try:
        resolve = {"pics.example": ["127.0.0.2"], "inside.example": ["127.0.0.1"]}
        fetcher = Fetcher(public_policy(), resolver=lambda host, port: resolve.get(host, ["127.0.0.1"]))
        with pytest.raises(FetchRefused) as refused:
            fetcher.get(f"http://pics.example:{public.port}/a.png", what="image 1")
        assert "127.0.0.1" not in refused.value.reason and str(canary.port) not in refused.value.reason
    finally:
        public.stop()


def test_redirects_are_followed_a_few_times_each_checked(canary):
    hops = {f"/r{i}": (302, {"Location": f"/r{i + 1}"}, b"") for i in range(5)}
    hops["/r5"] = (200, {"Content-Type": "image/png"}, b"end")
    public = Server("127.0.0.2", hops)
    try:
        fetcher = Fetcher(public_policy(max_redirects=5), resolver=lambda host, port: ["127.0.0.2"])
        assert fetcher.get(f"http://pics.example:{public.port}/r0").content == b"end"
        strict = Fetcher(public_policy(max_redirects=3), resolver=lambda host, port: ["127.0.0.2"])
        with pytest.raises(FetchRefused, match="redirects more than 3 times"):
            strict.get(f"http://pics.example:{public.port}/r0")
    finally:
        public.stop()


def test_sizes_and_time_are_capped():
    big = b"x" * 300_000
    public = Server("127.0.0.2", {"/declared": (200, {"Content-Length": str(50_000_000)}, b""),
                                  "/undeclared": (200, {"Content-Length": ""}, big)})
    slow = Server("127.0.0.2", delay=3.0)
    try:
        fetcher = Fetcher(public_policy(timeout=1.0), resolver=lambda host, port: ["127.0.0.2"])
        with pytest.raises(FetchRefused, match="is 50,000,000 bytes; at most 100,000"):
            fetcher.get(f"http://pics.example:{public.port}/declared", max_bytes=100_000)
        with pytest.raises(FetchRefused, match="over 100,000 bytes"):
            fetcher.get(f"http://pics.example:{public.port}/undeclared", max_bytes=100_000)
        with pytest.raises(Transient, match="in time"):
            fetcher.get(f"http://pics.example:{slow.port}/slow")
    finally:
        public.stop()
        slow.stop()


def test_http_needs_the_operators_permission_and_an_unknown_name_is_a_network_error():
    with pytest.raises(FetchRefused, match="only https"):
        Fetcher(resolver=lambda host, port: [PUBLIC]).get("http://pics.example/a.png")
    with pytest.raises(NetworkError, match="does not resolve"):
        Fetcher(resolver=lambda host, port: []).get("https://nowhere.example/a.png")


def test_a_trusted_first_hop_may_be_private_but_its_redirects_may_not(canary):
    lane = Server("127.0.0.3", {"/health": (200, {}, b"ok"), "/away": (302, {"Location": f"http://127.0.0.1:{canary.port}/"}, b"")})
    try:
        fetcher = Fetcher(resolver=lambda host, port: ["127.0.0.3"])  # the default policy: nothing private
        assert fetcher.get(f"http://pds.internal:{lane.port}/health", trusted=True).status == 200  # the operator's own lane
        with pytest.raises(FetchRefused):
            fetcher.get(f"http://pds.internal:{lane.port}/health")  # the same URL from a client: refused
        with pytest.raises(FetchRefused):
            fetcher.get(f"http://pds.internal:{lane.port}/away", trusted=True)
    finally:
        lane.stop()


def test_an_error_status_is_an_answer_not_an_exception():
    def handler(request):
        return httpx.Response(404, text="gone")

    fetcher = Fetcher(resolver=lambda host, port: [PUBLIC], transport=httpx.MockTransport(handler))
    got = fetcher.get("https://pics.example/a.png")
    assert got.status == 404 and got.content == b"gone" and got.url == "https://pics.example/a.png"
