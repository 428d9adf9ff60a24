"""skyhub's test kit: what skyhub's own tests and benchmarks use, for your tests of a hub too.

    skyhub_testkit.memory     memory_store(), MemoryDatabase: an in-memory store that passes the contract suite
    skyhub_testkit.hub        Hub: a real ``skyhub run`` on a free port, with tokens and device keys
    skyhub_testkit.postgres   schema(): a PostgreSQL schema per test (SKYHUB_TEST_PG_URL)
    skyhub_testkit.fakemeta   FakeMeta: Meta's publishing endpoints, stateful, with faults to inject
    skyhub_testkit.fakepds    FakePDS: enough of a Bluesky PDS behind an httpx.MockTransport
    skyhub_testkit.fakemodel  FakeModel: OpenAI's and Anthropic's chat APIs, streaming or not, a naive model with faults
    skyhub_testkit.servers    LocalServer: a real HTTP server on a local address (a canary, an image host)
    skyhub_testkit.fixtures   the above as pytest fixtures (``pytest_plugins = ["skyhub_testkit.fixtures"]``)

and ``FakeClock`` (``ledger.FakeClock``) for time. Every module but ``fixtures`` needs only
what skyhub itself installs; ``fixtures`` needs pytest, and says so: install ``skyhub[test]``.
"""

from ledger.clock import FakeClock

__all__ = ["FakeClock"]
