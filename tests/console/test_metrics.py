"""``GET /metrics``: scraped from a real hub while jobs run, the counts move; a person's token,
or loopback only when the operator turned it on; labels a client cannot grow."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request

from hub.app import build_app
from hub.auth import add_user
from hub.console import front_of
from hub.console.web import Console
from hub.settings import load_settings
from hub.webapp import create_api
from ledger import SYSTEM
from skyhub_testkit.hub import Hub


def scrape(url: str, **kwargs: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    r = httpx.get(f"{url}/metrics", **kwargs)  # type: ignore[arg-type]
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(r.text) for s in f.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_scrape_while_jobs_run_finds_the_counts_moving(tmp_path):
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, env={"SKYHUB_SWEEP__SAFETY_INTERVAL": "1s"})
    try:
        token = hub.token("ana")
        assert httpx.get(f"{hub.url}/metrics").status_code == 401  # loopback is not enough by default
        auth = {"headers": {"Authorization": f"Bearer {token}"}}
        before = scrape(hub.url, **auth)
        assert value(before, "skyhub_documents", db="jobs", kind="job", status="done") == 0
        with httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {token}"}) as api:
            for i in range(20):
                assert api.post("/v1/db/jobs/docs", json={"type": "job", "status": "pending", "input": {"n": i}}).status_code == 200
        deadline = time.monotonic() + 30
        while True:
            now = scrape(hub.url, **auth)
            if value(now, "skyhub_documents", db="jobs", kind="job", status="done") == 20 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert value(now, "skyhub_documents", db="jobs", kind="job", status="done") == 20
        assert value(now, "skyhub_documents", db="jobs", kind="job", status="pending") == 0
        assert value(now, "skyhub_http_requests_total", route="/v1/db/{db}/docs", method="POST", status="200") == 20
        assert value(now, "skyhub_http_requests_total", route="/metrics", method="GET", status="200") >= 1
        assert ("skyhub_feed_behind", (("handler", "on_change"),)) in now
        assert not [k for k in now if k[0] == "skyhub_documents" and dict(k[1]).get("db") == "auth"]  # sessions and tokens stay private
        deadline = time.monotonic() + 20
        while value(now, "skyhub_tick_runs_total", tick="sweep", outcome="ok") < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
            now = scrape(hub.url, **auth)
        assert value(now, "skyhub_tick_runs_total", tick="sweep", outcome="ok") >= 1
        assert value(now, "skyhub_tick_duration_seconds_count", tick="sweep") >= 1
        assert value(now, "skyhub_credentials_needing_reauth") == 0
        wrong = httpx.get(f"{hub.url}/metrics", headers={"Authorization": "Bearer skh_000000000000_" + "x" * 30})
        assert wrong.status_code == 401
    finally:
        hub.stop()


def _request(client: str, authorization: str | None = None) -> Request:
    headers = [(b"authorization", authorization.encode())] if authorization else []
    return Request({"type": "http", "method": "GET", "path": "/metrics", "headers": headers, "client": (client, 50000),
                    "query_string": b""})


def test_metrics_need_a_persons_token_and_loopback_only_when_turned_on(tmp_path):
    app = build_app(load_settings(None, database_url=f"sqlite:///{tmp_path}/x.db"), clock=SYSTEM)
    try:
        console = Console.make(app)
        token = add_user(app.store, "ops", clock=SYSTEM)
        assert not console.metrics_allowed(_request("127.0.0.1")) and not console.metrics_allowed(_request("::1"))
        assert console.metrics_allowed(_request("127.0.0.1", f"Bearer {token}"))
        app.settings.http.metrics_from_loopback = True  # the operator's choice (no proxy on this machine)
        assert console.metrics_allowed(_request("127.0.0.1")) and console.metrics_allowed(_request("::1"))
        assert not console.metrics_allowed(_request("192.0.2.10"))
        assert not console.metrics_allowed(_request("192.0.2.10", "Bearer skh_000000000000_" + "x" * 30))
        assert console.metrics_allowed(_request("192.0.2.10", f"Bearer {token}"))
    finally:
        app.stop()


def test_each_product_brings_its_own_metrics_and_the_hub_names_none_of_their_machines(tmp_path):
    import ast
    from pathlib import Path

    from hub.products import products
    from ledger import FakeClock

    clock = FakeClock()
    app = build_app(load_settings(None, database_url=f"sqlite:///{tmp_path}/x.db"), clock=clock)
    try:
        for i, (kind, status, platform) in enumerate([("publish-request", "error", "bsky"), ("publish-request", "done", "ig"),
                                                      ("mention", "replied", None), ("mention", "skipped", None)]):
            app.store.put("requests", {"kind": kind, "status": status, **({"platform": platform} if platform else {})}, f"r{i}",
                          actor="admin")
        app.store.put("vault", {"kind": "credential", "status": "needs-reauth"}, "instagram:1", actor="admin")
        console = Console.make(app)
        console.activity.advance()
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(console.metrics.scrape().decode()) for s in f.samples}
    finally:
        app.stop()
    assert value(samples, "skyhub_publishes_total", platform="bsky", outcome="error") == 1  # publishers/metrics.py
    assert value(samples, "skyhub_publishes_total", platform="ig", outcome="done") == 1
    assert value(samples, "skyhub_replies_total", platform="bsky", outcome="replied") == 1  # bot/metrics.py
    assert value(samples, "skyhub_replies_total", platform="bsky", outcome="skipped") == 1
    assert value(samples, "skyhub_credentials_needing_reauth") == 1  # vault/metrics.py
    product_words = {w for p in products() if p.name != "jobs" for m in p.machines for w in (m.name, m.db, m.kind, *m.states)}
    source = Path(__file__).resolve().parents[2] / "hub" / "console" / "metrics.py"
    named = {n.value for n in ast.walk(ast.parse(source.read_text())) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not named & product_words, f"hub/console/metrics.py names {sorted(named & product_words)}: a product's metrics are its own"


def test_two_first_console_requests_at_once_are_both_answered_as_usual(tmp_path):
    # the console (templates, pages, prometheus_client) is made on the first request for one of its paths
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path)
    try:
        token = hub.token("ana")
        start = threading.Barrier(4)

        def ask(path: str, auth: bool) -> httpx.Response:
            start.wait()
            return httpx.get(f"{hub.url}{path}", follow_redirects=False,
                             headers={"Authorization": f"Bearer {token}"} if auth else {})

        with ThreadPoolExecutor(4) as pool:
            scrapes = [pool.submit(ask, "/metrics", True) for _ in range(2)]
            pages = [pool.submit(ask, "/", False) for _ in range(2)]
            for f in scrapes:
                r = f.result()
                assert r.status_code == 200 and "skyhub_documents" in r.text and "skyhub_http_requests_total" in r.text
            for f in pages:
                r = f.result()
                assert r.status_code == 303 and "/console/sign-in" in r.headers["location"]
        now = scrape(hub.url, headers={"Authorization": f"Bearer {token}"})
        assert value(now, "skyhub_http_requests_total", route="/metrics", method="GET", status="200") >= 2
        assert value(now, "skyhub_http_requests_total", route="/", method="GET", status="303") == 2
    finally:
        hub.stop()


def test_the_console_is_made_once_when_two_threads_ask_for_it_first(tmp_path, monkeypatch):
    app = build_app(load_settings(None, database_url=f"sqlite:///{tmp_path}/x.db"), clock=SYSTEM)
    try:
        front = front_of(create_api(app))
        made, real = [], Console.make.__func__  # type: ignore[attr-defined]

        def slow(cls: type[Console], *args: object, **kwargs: object) -> Console:
            made.append(1)
            time.sleep(0.05)  # widen the window two unguarded makers would both pass through
            return real(cls, *args, **kwargs)

        monkeypatch.setattr(Console, "make", classmethod(slow))
        start = threading.Barrier(2)
        with ThreadPoolExecutor(2) as pool:
            got = list(pool.map(lambda _: (start.wait(), front.console)[1], range(2)))
        assert len(made) == 1 and got[0] is got[1]
    finally:
        app.stop()
