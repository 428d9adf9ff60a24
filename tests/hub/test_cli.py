"""The CLI as a user runs it: a subprocess, on every backend."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def cli(backend_url, tmp_path):
    env = {**os.environ, "SKYHUB_DATABASE_URL": backend_url, "SKYHUB_ACTOR": "user:ana", "PYTHONPATH": ROOT}

    def run(*args, input=None, check=None):
        proc = subprocess.run(
            [sys.executable, "-m", "hub", *args], input=input, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
        )
        if check is not None:
            assert proc.returncode == check, (proc.returncode, proc.stdout, proc.stderr)
        return proc

    run.env = env
    run.cwd = tmp_path
    return run


def one_line(stderr):
    lines = [l for l in stderr.splitlines() if l.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_put_get_query_history_round_trip(cli):
    out = json.loads(cli("db", "put", "--db", "notes", "--id", "n1", '{"status": "open", "text": "hi"}', check=0).stdout)
    assert out["id"] == "n1" and out["rev"].startswith("1-")
    doc = json.loads(cli("db", "get", "--db", "notes", "n1", check=0).stdout)
    assert doc == {"_id": "n1", "_rev": out["rev"], "status": "open", "text": "hi"}
    out2 = json.loads(cli("db", "put", "--db", "notes", "--id", "n1", "--if-rev", out["rev"], '{"status": "closed"}', check=0).stdout)
    table = cli("db", "query", "--db", "notes", "--field", "status", "--key", "closed", check=0).stdout
    assert table.splitlines()[0].split() == ["_id", "_rev", "status"]
    assert "n1" in table and out2["rev"] in table
    page = json.loads(cli("db", "query", "--db", "notes", "--field", "status", "--key", "closed", "--json", check=0).stdout)
    assert [d["_id"] for d in page["docs"]] == ["n1"] and page["next"] is None
    history = json.loads(cli("db", "history", "--db", "notes", "n1", "--json", check=0).stdout)
    assert [(h["rev"], h["actor"]) for h in history] == [(out["rev"], "user:ana"), (out2["rev"], "user:ana")]


def test_put_reads_stdin_and_create_only(cli):
    cli("db", "put", "--db", "notes", "--id", "s", "--create-only", "-", input='{"from": "stdin"}', check=0)
    assert json.loads(cli("db", "get", "--db", "notes", "s", check=0).stdout)["from"] == "stdin"
    proc = cli("db", "put", "--db", "notes", "--id", "s", "--create-only", '{"again": 1}', check=3)
    assert one_line(proc.stderr).startswith("skyhub: conflict: document 's' already exists")


def test_query_pages_with_after(cli):
    for i in range(5):
        cli("db", "put", "--db", "notes", "--id", f"n{i}", '{"status": "open"}', check=0)
    first = cli("db", "query", "--db", "notes", "--field", "status", "--key", "open", "--limit", "2", check=0)
    assert "more: --after n1" in first.stderr
    page = json.loads(cli("db", "query", "--db", "notes", "--field", "status", "--key", "open", "--limit", "2", "--after", "n1", "--json", check=0).stdout)
    assert [d["_id"] for d in page["docs"]] == ["n2", "n3"] and page["next"] == "n3"


def test_changes_lists_and_follows(cli):
    cli("db", "put", "--db", "notes", "--id", "a", '{"v": 1}', check=0)
    listed = json.loads(cli("db", "changes", "--json", check=0).stdout)  # a listing is one JSON array
    assert [c["id"] for c in listed] == ["a"]
    since = listed[-1]["seq"]
    follower = subprocess.Popen(
        [sys.executable, "-m", "hub", "db", "changes", "--since", str(since), "--follow", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env, cwd=cli.cwd,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in follower.stdout], daemon=True).start()
    try:
        time.sleep(1.0)
        cli("db", "put", "--db", "notes", "--id", "b", '{"v": 2}', check=0)
        assert json.loads(lines.get(timeout=20))["id"] == "b"  # a stream prints one JSON object per line
    finally:
        # SIGTERM, then SIGKILL: a follower must not outlive the test even where SIGINT is ignored (nohup)
        follower.terminate()
        try:
            follower.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            follower.kill()
            follower.communicate(timeout=10)


def test_machines_prints_markdown_with_fenced_diagrams(cli):
    out = cli("db", "machines", check=0).stdout
    assert '**jobs** documents with `type: "job"`' in out and "```mermaid\nstateDiagram-v2" in out and "pending --> running" in out
    assert out.count("```mermaid") == out.count("\n```\n") >= 2  # every diagram fenced, so `> machines.md` renders
    data = json.loads(cli("db", "machines", "--json", check=0).stdout)
    assert {m["db"] for m in data} >= {"jobs", "deadletters"}


def test_usage_mistakes_are_one_line_and_exit_2(cli):
    for args in (["nosuch"], ["db", "get", "--db", "x"], ["db", "get", "--nope", "--db", "x", "y"], ["tick", "nosuch"],
                 ["--database-url"]):
        proc = cli(*args, check=2)
        assert one_line(proc.stderr).startswith("skyhub: usage: "), (args, proc.stderr)
    assert "no tick named 'nosuch'" in cli("tick", "nosuch").stderr
    helped = cli("tick", "--help", check=0).stdout
    assert all(name in helped for name in ("sweep", "vault", "ingest", "reply", "probe"))


def test_every_json_listing_is_one_json_value(cli):
    cli("db", "put", "--db", "notes", "--id", "n", '{"status": "open"}', check=0)
    for args in (["db", "changes", "--json"], ["db", "history", "--db", "notes", "n", "--json"], ["user", "list", "--json"],
                 ["device", "list", "--json"], ["vault", "list", "--json"]):
        assert isinstance(json.loads(cli(*args, check=0).stdout), list), args
    assert isinstance(json.loads(cli("db", "query", "--db", "notes", "--field", "status", "--key", "open", "--json", check=0).stdout), dict)


def test_a_job_put_through_the_cli_is_done_by_skyhub_run(cli, backend_url):
    proc = subprocess.Popen(
        [sys.executable, "-m", "hub", "run", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env, cwd=cli.cwd,
    )
    try:
        out = json.loads(cli("db", "put", "--db", "jobs", '{"type": "job", "status": "pending", "input": {"n": 1}}', check=0).stdout)
        deadline = time.monotonic() + 30
        while json.loads(cli("db", "get", "--db", "jobs", out["id"], check=0).stdout)["status"] != "done":
            assert time.monotonic() < deadline, "skyhub run did not finish the job"
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    history = json.loads(cli("db", "history", "--db", "jobs", out["id"], "--json", check=0).stdout)
    assert [(h["doc"]["status"], h["actor"]) for h in history] == [
        ("pending", "user:ana"), ("running", "handler:on_change"), ("done", "handler:on_change"),
    ]


def test_tick_runs_one_tick_once(cli):
    out = json.loads(cli("tick", "sweep", check=0).stdout)
    assert out == {"tick": "sweep", "outcome": "ok", "error": None}
    proc = cli("tick", "nope", check=2)  # a usage mistake
    assert "no tick named 'nope'; ticks: " in one_line(proc.stderr)
    proc = cli("tick", "ingest", check=2)  # a real tick, but the bot is not configured here
    assert "tick 'ingest' is not configured here" in one_line(proc.stderr)


BIG = json.dumps({"blob": "x" * (1024 * 1024 + 1)})


@pytest.mark.parametrize(
    "args,stdin,code,reason",
    [
        (["--db", "notes", "--id", "bad", '{"status": '], None, 2, "skyhub: usage: malformed JSON"),
        (["--db", "notes", "--id", "bad", "[1, 2]"], None, 1, "skyhub: invalid: a document must be a JSON object, not list"),
        (["--db", "Bad Name!", "--id", "bad", "{}"], None, 1, "skyhub: invalid: database name 'Bad Name!' is not valid"),
        (["--db", "notes", "--id", "bad", '{"_deleted": true}'], None, 1, "skyhub: invalid: field '_deleted' is reserved"),
        (["--db", "notes", "--id", "bad", "-"], BIG, 1, "skyhub: too_large: document is 1,048,588 bytes; the limit is 1,048,576"),
        (["--db", "jobs", "--id", "bad", '{"type": "job", "status": "done"}'], None, 4, "skyhub: forbidden: a new job must start in pending, not done"),
        (["--db", "notes", "--id", "bad", "--as", "robot", "{}"], None, 1, "skyhub: invalid: actor 'robot' is not valid"),
    ],
)
def test_bad_input_gives_its_exit_code_a_one_line_reason_and_writes_nothing(cli, args, stdin, code, reason):
    proc = cli("db", "put", *args, input=stdin, check=code)
    line = one_line(proc.stderr)
    assert line.startswith(reason), line
    assert proc.stdout == ""
    db = args[args.index("--db") + 1]
    if db == "notes" or db == "jobs":
        gone = one_line(cli("db", "history", "--db", db, "bad", check=5).stderr)
        # the document was never written; on SQLite the reader does not even make the file
        assert "has ever been written" in gone or "nothing has been written there yet" in gone, gone


def test_stale_if_rev_and_illegal_transition_write_nothing(cli):
    first = json.loads(cli("db", "put", "--db", "notes", "--id", "n", '{"v": 1}', check=0).stdout)
    cli("db", "put", "--db", "notes", "--id", "n", "--if-rev", first["rev"], '{"v": 2}', check=0)
    proc = cli("db", "put", "--db", "notes", "--id", "n", "--if-rev", first["rev"], '{"v": 3}', check=3)
    assert one_line(proc.stderr).startswith("skyhub: conflict: stale revision: notes/n is at 2-")
    job = json.loads(cli("db", "put", "--db", "jobs", "--id", "j", '{"type": "job", "status": "pending", "input": 1}', check=0).stdout)
    proc = cli("db", "put", "--db", "jobs", "--id", "j", "--if-rev", job["rev"], '{"type": "job", "status": "done", "input": 1}', check=4)
    assert one_line(proc.stderr) == "skyhub: forbidden: no transition pending -> done for a job"
    assert len(json.loads(cli("db", "history", "--db", "notes", "n", "--json", check=0).stdout)) == 2
    assert len(json.loads(cli("db", "history", "--db", "jobs", "j", "--json", check=0).stdout)) == 1


def test_not_found_and_usage_exit_codes(cli):
    proc = cli("db", "get", "--db", "notes", "missing", check=5)  # on SQLite, no file yet: the read makes none
    assert one_line(proc.stderr).startswith(("skyhub: not_found: no database at", "skyhub: not_found: no database 'notes'"))
    cli("db", "put", "--db", "notes", "--id", "here", "{}", check=0)
    proc = cli("db", "get", "--db", "notes", "missing", check=5)
    assert one_line(proc.stderr) == "skyhub: not_found: no document 'missing' in 'notes'"
    proc = cli("db", "get", "--db", "nosuchdb", "x", check=5)
    assert one_line(proc.stderr).startswith("skyhub: not_found: no database 'nosuchdb': nothing was ever written to it")
    proc = cli("db", "query", "--db", "nosuchdb", "--field", "status", "--key", "x", check=5)
    assert one_line(proc.stderr).startswith("skyhub: not_found: no database 'nosuchdb'")
    assert cli("db", "query", "--db", "notes", "--field", "status", "--key", "x", check=0).stdout.strip() == "_id  _rev"
    assert one_line(cli("db", "put", "--id", "x", "{}", check=2).stderr).startswith("skyhub: usage: Missing option '--db'")
    assert one_line(cli("db", "frobnicate", check=2).stderr).startswith("skyhub: usage: No such command 'frobnicate'")


def test_an_unreachable_database_is_one_clear_line(tmp_path):
    env = {**os.environ, "SKYHUB_DATABASE_URL": "postgresql://nobody:s3cret-pw@127.0.0.1:1/none", "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-m", "hub", "db", "get", "--db", "notes", "x"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    line = one_line(proc.stderr)
    assert line.startswith("skyhub: backend: cannot connect to PostgreSQL at postgresql://nobody:***@127.0.0.1:1/none")
    assert "s3cret-pw" not in proc.stderr


def test_search_finds_by_a_word_or_an_id_prefix_with_the_total(cli):
    cli("db", "put", "--db", "notes", "--lines", "-", check=0, input="\n".join(json.dumps(d) for d in [
        {"_id": "m-1", "kind": "mention", "text": "make me a Pomodoro timer"},
        {"_id": "m-2", "kind": "mention", "text": "a weather widget", "lastError": "codegen timed out"},
        {"_id": "p-1", "kind": "post", "caption": "pomodoro stickers, 3 for 2"},
    ]))
    table = cli("db", "search", "--db", "notes", "pomodoro", check=0)
    assert table.stdout.splitlines()[0].split() == ["_id", "_rev", "kind", "text", "caption"]
    assert [line.split()[0] for line in table.stdout.splitlines()[1:]] == ["m-1", "p-1"]
    assert "2 found, 2 shown" in table.stderr
    page = json.loads(cli("db", "search", "--db", "notes", "TIMED", "--json", check=0).stdout)
    assert [d["_id"] for d in page["docs"]] == ["m-2"] and page["total"] == 1 and page["next"] is None
    first = cli("db", "search", "--db", "notes", "m-", "--limit", "1", check=0)
    assert "2 found, 1 shown" in first.stderr and "more: --after m-1" in first.stderr
    rest = json.loads(cli("db", "search", "--db", "notes", "m-", "--after", "m-1", "--json", check=0).stdout)
    assert [d["_id"] for d in rest["docs"]] == ["m-2"] and rest["total"] == 2
    proc = cli("db", "search", "--db", "notes", "  ", check=1)
    assert one_line(proc.stderr) == ("skyhub: invalid: a search needs at least one character: an id's first characters or "
                                     "a word of a document's text")
    assert "no database 'nowhere'" in one_line(cli("db", "search", "--db", "nowhere", "x", check=5).stderr)
