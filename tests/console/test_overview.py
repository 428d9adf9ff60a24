"""The overview, the diagrams, the charts and the activity reader, on a local store: what needs
a person comes first and in order, counts match the machines, the SVG is well formed, and the
per-minute figures come from the last hour of the change log only."""

from __future__ import annotations

import hashlib
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hub.app import build_app, build_rules
from hub.console.activity import Activity
from hub.console.charts import bars_svg, lines_svg
from hub.console.diagram import machine_svg
from hub.console.overview import overview
from hub.samples import take_sample
from hub.settings import load_settings
from ledger import SYSTEM, FakeClock, Ledger, open_store
from ledger.jobs import JOBS
from publishers.queue import new_request, queue
from vault import Vault, parse_key


@pytest.fixture
def app(tmp_path, monkeypatch, key_text):
    monkeypatch.setenv("SKYHUB_VAULT_KEY", key_text)
    monkeypatch.setenv("SKYHUB_PROBE__LANES", '{"graph-api": "https://graph.example.org/"}')
    a = build_app(load_settings(None, database_url=f"sqlite:///{tmp_path}/x.db"), clock=SYSTEM)
    yield a
    a.stop()


def test_what_needs_a_person_comes_first_in_order(app, key_text):
    store, now = app.store, app.clock.now_ms()
    maya = Ledger(store, "user:maya", app.clock)
    Vault(maya, parse_key(key_text, "t")).put("instagram", "178", {"accessToken": "t"})
    cred = store.get("vault", "instagram:178")
    store.put("vault", {**cred, "status": "needs-reauth", "needsReauth": True, "lastError": "Meta 190: expired"}, actor="admin")
    held, _ = queue(maya, new_request("ig", account="178", slug="h", images=[{"url": "https://c.example.org/a.jpg", "alt": "a"}], now_ms=now))
    store.put("requests", {**held, "held": {"credential": "instagram:178", "reason": "needs a fresh secret", "since": now}}, actor="admin")
    failed, _ = queue(maya, new_request("threads", account="29", slug="f", caption="x", now_ms=now))
    store.put("requests", {**failed, "status": "error", "lastError": "Threads said no"}, actor="admin")
    store.put("deadletters", {"kind": "dead-letter", "status": "open", "handler": "on_change", "error": "boom", "at": now}, "on_change:7",
              actor="admin")
    store.put("jobs", {"type": "job", "status": "running", "input": {}, "attempts": 1, "claimId": "c", "leaseUntil": now - 5000},
              "j1", actor="admin")
    store.put("probes", {"kind": "probe", "lane": "graph-api", "ok": False, "lastError": "timed out", "checkedAt": now}, "graph-api",
              actor="admin")
    store.claim_tick_run("vault", now - 3_600_000, "test")
    store.finish_tick_run("vault", now - 3_600_000, "error", "the keyring is locked")

    data = overview(app, started_at=now - 3_600_000)
    whats = [a["what"] for a in data["attention"]]
    assert whats[:6] == ["needs-reauth", "held", "failed", "deadletter", "lease-expired", "tick-failed"]
    assert {"tick-late", "probe-failing"} <= set(whats[6:])
    first = data["attention"][0]
    assert first["title"] == "instagram:178 NEEDS RE-AUTH" and first["reason"] == "Meta 190: expired"
    assert data["attention"][1]["reason"] == "instagram:178: needs a fresh secret"
    assert data["attention"][2]["reason"] == "Threads said no" and data["attention"][2]["id"] == "threads:29:f"
    assert "the sweep takes it back" in data["attention"][4]["reason"]
    late = {a["title"] for a in data["attention"] if a["what"] == "tick-late"}
    assert "tick vault has not run on time" in late and "tick sweep has not run on time" in late
    jobs = next(m for m in data["machines"] if m["name"] == "jobs/job")
    assert jobs["counts"] == {"pending": 0, "running": 1, "done": 0, "failed": 0, "cancelled": 0}
    assert "auth" not in {d["db"] for d in data["databases"]}
    assert "sealed" not in str(data)


def test_a_machine_is_drawn_with_its_counts_and_a_chart_describes_itself():
    svg = machine_svg(JOBS, {"pending": 3, "done": 12}, link="/console/db/jobs?status={status}")
    root = ET.fromstring(svg)
    assert root.get("role") == "group" and root.get("data-machine") == "jobs/job"
    text = "".join(root.itertext())
    for state in JOBS.states:
        assert state in text
    assert "12" in text and "(end)" in text and "(start)" in text
    assert '/console/db/jobs?status=running' in svg and "handler:on_change" in svg  # edges name their actors
    bars = ET.fromstring(bars_svg("b", "done per minute", [i * 60_000 for i in range(60)], [0] * 58 + [4, 2], [0] * 58 + [1, 0]))
    svg_ns = "{http://www.w3.org/2000/svg}"
    assert bars.get("role") == "img"
    assert "6 done and 1 failed in the last hour; at most 5 in one minute; last minute 2 done, 0 failed" in "".join(bars.itertext())
    assert [t.text for t in bars.iter(svg_ns + "text") if t.get("class") == "value"] == ["5", "2"]  # each bar's total, written on it
    assert [r.get("fill") for r in bars.iter(svg_ns + "rect") if r.get("class") == "bar failed"] == ["url(#b-hatch)"]  # hatched, not only red
    lines = ET.fromstring(lines_svg("d", "depth", [(0, {"jobs/job": 2}), (60_000, {"jobs/job": 5})], (0, 120_000)))
    assert "now: jobs/job 5" in "".join(lines.itertext())
    assert [t.text for t in lines.iter(svg_ns + "text") if t.get("class") == "value"] == ["jobs/job 5"]  # the line's last value at its end


def test_a_failed_job_is_drawn_as_waiting_for_a_person_with_the_retry_edge_a_person_takes():
    assert "failed" not in JOBS.terminal and {"failed", "cancelled", "done"} <= JOBS.at_rest and "pending" not in JOBS.at_rest
    root = ET.fromstring(machine_svg(JOBS, {"failed": 10}))
    failed = next(g for g in root.iter("{http://www.w3.org/2000/svg}g") if "state" in (g.get("class") or "").split()
                  and "failed" in "".join(g.itertext()))
    assert "rest" in failed.get("class", "").split() and "(person)" in "".join(failed.itertext())
    person = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if "person" in (g.get("class") or "").split()]
    labels = sorted("".join(g.itertext()) for g in person)
    assert labels == ["failed → pending: Retry by user:*, Retry by admin", "pending → cancelled: Cancel by user:*, Cancel by admin"]


def test_activity_counts_the_last_hour_of_terminal_writes_from_the_change_log(tmp_path):
    clock = FakeClock()
    rules = build_rules()
    store = open_store(f"sqlite:///{tmp_path}/a.db", rules, clock)
    try:
        maya = Ledger(store, "user:maya", clock)
        for i in range(30):  # two hours ago: outside the window
            store.put("notes", {"n": i}, actor="user:maya")
        old, _ = queue(maya, new_request("threads", account="29", slug="old", caption="x", now_ms=clock.now_ms()))
        store.put("requests", {**old, "status": "error", "lastError": "no"}, actor="admin")
        clock.advance(2 * 3_600_000)
        for slug in ("a", "b"):
            doc, _ = queue(maya, new_request("threads", account="29", slug=slug, caption="x", now_ms=clock.now_ms()))
            store.put("requests", {**doc, "status": "done", "mediaId": "m", "permalink": "https://t/p"}, actor="admin")
        clock.advance(60_000)
        doc, _ = queue(maya, new_request("bsky", account="shop.bsky.social", slug="c", caption="x", now_ms=clock.now_ms()))
        store.put("requests", {**doc, "status": "error", "lastError": "no"}, actor="admin")
        take_sample(store, rules, clock.now_ms(), 86_400)
        activity = Activity(store, rules, now=clock.now_ms)
        assert activity.advance() > 0
        series = activity.series()
        done, failed = series["done"]["requests/publish-request"], series["failed"]["requests/publish-request"]
        assert len(done) == len(failed) == 60
        assert done[-2] == 2 and sum(done) == 2 and failed[-1] == 1 and sum(failed) == 1  # apart: two done, then one failed
        assert activity.outcome_counts() == [("requests/publish-request", "bsky", "error", 1),
                                             ("requests/publish-request", "threads", "done", 2)]
        assert series["depth"] and series["depth"][-1][1]["requests/publish-request"] == 0
        assert activity.advance() == 0  # nothing new: nothing read again
    finally:
        store.close()


def test_axe_core_is_vendored_for_the_tests_at_its_pinned_version_with_its_licence():
    root = Path(__file__).resolve().parent / "vendor" / "axe-core-4.10.3"  # a test tool: not in the package, never served
    data = (root / "axe.min.js").read_bytes()
    assert data.startswith(b"/*! axe v4.10.3")
    assert hashlib.sha256(data).hexdigest() == "880970c081707360e64f34cea25ff91892f5bc95675b0776925b9709dd8a68bb"
    assert "Mozilla Public License" in (root / "LICENSE").read_text()


def test_every_asset_the_pages_load_is_served_by_the_hub_itself():
    templates = Path(__file__).resolve().parents[2] / "hub" / "console" / "templates"
    for page in templates.glob("*.html"):
        for ref in re.findall(r'(?:src|href)="([^"{]+)"', page.read_text()):
            assert ref.startswith(("/", "#")), f"{page.name} loads {ref} from elsewhere"
