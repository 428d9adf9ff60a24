"""The HTTP API as a client sees it: status codes, the change stream, and the CLI with --hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import httpx
import pytest

from skyhub_testkit.hub import ROOT
from tests.conftest import reset_database


@pytest.fixture(params=["sqlite", "postgres"])
def hub(request, remote_hubs):
    hub = remote_hubs(request.param)
    reset_database(hub.database_url)
    yield hub
    hub.close_clients()


@pytest.fixture
def http(hub):
    token = hub.token("ana")
    with httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


def test_errors_map_to_statuses_with_one_body_shape(hub, http):
    first = http.put("/v1/db/notes/docs/n1", json={"v": 1})
    assert first.status_code == 200 and first.json()["rev"].startswith("1-")
    cases = [
        (http.put("/v1/db/notes/docs/n1", params={"if_rev": "9-stale"}, json={"v": 2}), 409, "conflict"),
        (http.put("/v1/db/notes/docs/n1", params={"create_only": "true"}, json={"v": 2}), 409, "conflict"),
        (http.get("/v1/db/notes/docs/missing"), 404, "not_found"),
        (http.put("/v1/db/notes/docs/n2", json={"_deleted": True}), 400, "invalid"),
        (http.put("/v1/db/notes/docs/n2", json=[1, 2]), 422, "unprocessable"),
        (http.put("/v1/db/notes/docs/n2", content=b"{not json", headers={"Content-Type": "application/json"}), 422, "unprocessable"),
        (http.put("/v1/db/notes/docs/n2", json={"blob": "x" * (1024 * 1024)}), 413, "too_large"),
        (http.put("/v1/db/notes/docs/n2", content=b"x" * (2 * 1024 * 1024)), 413, "too_large"),
        (http.put("/v1/db/jobs/docs/j", json={"type": "job", "status": "done"}), 403, "forbidden"),
        (http.get("/v1/db/notes/query", params={"field": "v"}), 400, "invalid"),
        (http.get("/v1/nowhere"), 404, "not_found"),
    ]
    for response, status, code in cases:
        assert (response.status_code, response.json()["error"]) == (status, code), response.text
        assert set(response.json()) == {"error", "reason"} and response.json()["reason"]
    assert len(hub.admin.history("notes", "n1")) == 1
    assert hub.admin.history("notes", "n2") == [] and hub.admin.history("jobs", "j") == []


def test_query_history_and_machines(http):
    for i in range(3):
        http.put(f"/v1/db/tasks/docs/t{i}", json={"status": "open", "n": i})
    page = http.get("/v1/db/tasks/query", params={"field": "status", "key": "open", "limit": 2}).json()
    assert [d["_id"] for d in page["docs"]] == ["t0", "t1"] and page["next"] == "t1"
    typed = http.get("/v1/db/tasks/query", params={"field": "n", "key_json": "2"}).json()
    assert [d["_id"] for d in typed["docs"]] == ["t2"]
    history = http.get("/v1/db/tasks/history/t0").json()
    assert [h["actor"] for h in history] == ["user:ana"]
    machines = http.get("/v1/machines").json()
    assert {m["db"] for m in machines} >= {"jobs", "deadletters"}
    assert "stateDiagram-v2" in http.get("/v1/machines", params={"format": "mermaid"}).json()["mermaid"]


def test_search_pages_with_a_total_over_the_api_and_the_cli_with_a_hub(hub, http, tmp_path):
    for i in range(3):
        http.put(f"/v1/db/tasks/docs/t{i}", json={"status": "failed", "lastError": f"quota exceeded on try {i}"})
    http.put("/v1/db/tasks/docs/other", json={"status": "failed", "lastError": "network down"})
    page = http.get("/v1/db/tasks/search", params={"q": "quota", "limit": 2}).json()
    assert [d["_id"] for d in page["docs"]] == ["t0", "t1"] and (page["total"], page["capped"], page["next"]) == (3, False, "t1")
    rest = http.get("/v1/db/tasks/search", params={"q": "quota", "after": "t1"}).json()
    assert [d["_id"] for d in rest["docs"]] == ["t2"] and rest["next"] is None
    bad = http.get("/v1/db/tasks/search", params={"q": " "})
    assert (bad.status_code, bad.json()["error"]) == (400, "invalid") and "at least one character" in bad.json()["reason"]
    assert http.get("/v1/db/auth/search", params={"q": "x"}).status_code == 403
    env = {**os.environ, "SKYHUB_HUB_URL": hub.url, "SKYHUB_TOKEN": hub.token("ana"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "hub", "db", "search", "--db", "tasks", "netw", "--json"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [d["_id"] for d in json.loads(out.stdout)["docs"]] == ["other"]


def test_the_change_stream_delivers_commits_and_resumes_from_a_sequence_number(hub):
    client = hub.client("user:ana")
    start = client.head_seq()
    got, stop = [], threading.Event()

    def follow():
        for change in client.follow(start, stop):
            got.append(change)
            if len(got) == 3:
                stop.set()
                return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    writer = hub.client("user:bob")
    for i in range(3):
        writer.put("notes", {"i": i}, f"s{i}", actor="user:bob")
    thread.join(20)
    assert [c.id for c in got] == ["s0", "s1", "s2"] and [c.actor for c in got] == ["user:bob"] * 3
    # resume after the first: Last-Event-ID semantics through ?since=
    resumed = []
    for change in client.follow(got[0].seq):
        resumed.append(change.id)
        if len(resumed) == 2:
            break
    assert resumed == ["s1", "s2"]
    token = hub.token("sse")
    with httpx.stream("GET", f"{hub.url}/v1/changes/stream", headers={"Authorization": f"Bearer {token}", "Last-Event-ID": str(got[1].seq)}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                assert json.loads(line[6:])["id"] == "s2"
                break


def test_cli_against_a_hub_has_the_same_exit_codes(hub, tmp_path):
    env = {**os.environ, "SKYHUB_HUB_URL": hub.url, "SKYHUB_TOKEN": hub.token("ana"), "PYTHONPATH": str(ROOT)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "hub", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)

    ok = cli("db", "put", "--db", "notes", "--id", "n", '{"v": 1}')
    assert ok.returncode == 0, ok.stderr
    rev = json.loads(ok.stdout)["rev"]
    assert cli("db", "put", "--db", "notes", "--id", "n", "--if-rev", "1-stale", '{"v": 2}').returncode == 3
    assert cli("db", "put", "--db", "jobs", "--id", "j", '{"type": "job", "status": "done"}').returncode == 4
    assert cli("db", "get", "--db", "notes", "missing").returncode == 5
    bad = cli("db", "put", "--db", "notes", "--id", "x", "[1]")
    assert bad.returncode == 1 and bad.stderr.startswith("skyhub: invalid:")
    assert cli("db", "put", "--db", "notes", "--id", "n", "--as", "user:bob", '{"v": 3}').returncode == 1
    history = json.loads(cli("db", "history", "--db", "notes", "n", "--json").stdout)
    assert [h["rev"] for h in history] == [rev]
    denied = subprocess.run([sys.executable, "-m", "hub", "db", "get", "--db", "notes", "n"], capture_output=True, text=True,
                            env={**env, "SKYHUB_TOKEN": "skh_0123456789ab_" + "z" * 43}, cwd=tmp_path, timeout=60)
    assert denied.returncode == 4 and denied.stderr.startswith("skyhub: unauthorized:")
    assert cli("user", "add", "eve").returncode == 2  # people are added on the hub, not over it


def test_health_answers_from_its_own_budget_while_the_store_hangs():
    import asyncio
    from types import SimpleNamespace

    from hub.health import HealthProbe

    release, calls = threading.Event(), []

    def hanging_health():
        calls.append(1)
        release.wait(30)
        return {"ok": True, "store": {"ok": True}}

    app = SimpleNamespace(health=hanging_health, store=SimpleNamespace(url="postgresql://u:secret@db/x"),
                          feed=SimpleNamespace(running=True), scheduler=SimpleNamespace(running=True))
    probe = HealthProbe(app, budget=0.2)  # type: ignore[arg-type]

    async def checks():
        first, second = await probe(), await probe()
        release.set()
        while not probe._pending.done():
            await asyncio.sleep(0.01)
        return first, second, await probe()

    first, second, after = asyncio.run(checks())
    assert first == second == {
        "ok": False, "store": {"url": "postgresql://u:***@db/x", "ok": False, "error": "the store did not answer within 0.2 s"},
        "feed": {"running": True}, "scheduler": {"running": True},
    }
    assert after == {"ok": True, "store": {"ok": True}}
    assert len(calls) == 2  # the second check joined the first instead of piling up a thread


def test_a_stream_on_one_hub_gets_the_writes_made_through_another_hub_process(hub, tmp_path):
    from skyhub_testkit.hub import Hub

    other = Hub(hub.database_url, tmp_path, jobs=False)
    try:
        reader, writer = hub.client("user:ana"), other.client("user:bob")
        start = reader.head_seq()
        got, stop = [], threading.Event()

        def follow():
            for change in reader.follow(start, stop):
                got.append(change.id)
                if len(got) == 5:
                    stop.set()
                    return

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        for i in range(5):
            writer.put("notes", {"i": i}, f"x{i}", actor="user:bob")
        thread.join(30)
        assert got == [f"x{i}" for i in range(5)]
    finally:
        assert other.stop() == 0


def test_changes_of_some_databases_fill_the_page_over_the_api_and_the_remote_backend(hub, http):
    start = hub.client("user:ana").head_seq()
    for i in range(6):
        http.put(f"/v1/db/{'apples' if i % 2 else 'pears'}/docs/d{i}", json={"n": i})
    page = http.get("/v1/changes", params={"since": start, "limit": 2, "db": "apples"}).json()["changes"]
    assert [(c["db"], c["id"]) for c in page] == [("apples", "d1"), ("apples", "d3")]
    both = http.get("/v1/changes", params=[("since", start), ("db", "apples"), ("db", "pears")]).json()["changes"]
    assert len(both) == 6
    remote = hub.client("user:ana").changes(start, limit=3, dbs=["pears"])
    assert [c.id for c in remote] == ["d0", "d2", "d4"]
