"""skyhub as a new user tries it (issue 17's defects): the CLI from a fresh folder, with the
mistakes a newcomer makes. Each answer is one line that names what was wrong and what to do;
nothing is written by a command that failed, and a read creates nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from skyhub_testkit.hub import Hub

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sh(tmp_path):
    """``skyhub ARGS`` in an empty folder, with no skyhub setting in the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYHUB_")}
    env.update(PYTHONPATH=str(ROOT), SKYHUB_ACTOR="user:ana")

    def run(*args, check=None, input=None, extra=None):
        proc = subprocess.run([sys.executable, "-m", "hub", *args], capture_output=True, text=True, input=input,
                              env={**env, **(extra or {})}, cwd=tmp_path, timeout=120)
        if check is not None:
            assert proc.returncode == check, (proc.returncode, proc.stdout, proc.stderr)
        return proc

    run.folder = tmp_path
    return run


def lines(text):
    return [line for line in text.splitlines() if line.strip()]


def test_a_read_in_an_empty_folder_creates_nothing(sh):
    for args in (["db", "get", "--db", "jobs", "x"], ["db", "query", "--db", "jobs", "--field", "status", "--key", "pending"],
                 ["db", "history", "--db", "jobs", "x"]):
        out = sh(*args, check=5)
        assert lines(out.stderr) == [lines(out.stderr)[0]] and "nothing has been written there yet" in out.stderr
    assert list(sh.folder.iterdir()) == []  # no skyhub.db, no -wal, no -shm


def test_a_database_that_does_not_exist_is_named(sh):
    sh("db", "put", "--db", "jobs", '{"type": "job", "status": "pending", "input": {}}', check=0)
    for args in (["db", "get", "--db", "nosuchdb", "x"], ["db", "query", "--db", "nosuchdb", "--field", "status", "--key", "x"]):
        out = sh(*args, check=5)
        assert lines(out.stderr) == ["skyhub: not_found: no database 'nosuchdb': nothing was ever written to it (a database is "
                                     "made by its first write; check the name)"]
    bad = sh("publish", "ls", "--status", "nonsense", check=2)
    assert len(lines(bad.stderr)) == 1 and "'nonsense' is not one of" in bad.stderr and "pending" in bad.stderr


def test_global_options_work_after_the_command_too(sh):
    mine = sh.folder / "mine.toml"
    mine.write_text(f'database_url = "sqlite:///{sh.folder}/elsewhere.db"\n')
    sh("db", "put", "--db", "notes", "--id", "a", '{"v": 1}', "--config", str(mine), check=0)
    assert (sh.folder / "elsewhere.db").exists() and not (sh.folder / "skyhub.db").exists()
    assert json.loads(sh("db", "get", "--db", "notes", "a", "--config", str(mine), check=0).stdout)["v"] == 1
    assert json.loads(sh("--config", str(mine), "db", "get", "--db", "notes", "a", check=0).stdout)["v"] == 1
    unreachable = sh("status", "--hub", "http://127.0.0.1:9", "--token", "skh_x", check=1)
    assert "cannot reach the hub at http://127.0.0.1:9" in unreachable.stderr  # --hub reached the command


def test_a_skyhub_toml_in_the_folder_is_read(sh):
    (sh.folder / "skyhub.toml").write_text(f'database_url = "sqlite:///{sh.folder}/from-toml.db"\n')
    sh("db", "put", "--db", "notes", "--id", "a", '{"v": 1}', check=0)
    assert (sh.folder / "from-toml.db").exists()


def test_a_settings_file_that_is_not_utf8_or_has_a_typo_is_one_line(sh):
    (sh.folder / "latin1.toml").write_bytes('[bot]\nhandle = "caf\xe9"\n'.encode("latin-1"))
    out = sh("db", "get", "--db", "jobs", "x", "--config", "latin1.toml", check=2)
    assert lines(out.stderr) == ["skyhub: usage: settings file latin1.toml is not UTF-8 text (byte 19 cannot be read): save it as UTF-8"]
    (sh.folder / "typo.toml").write_text('databse_url = "sqlite:///x.db"\n[http]\ntreads = 4\n')
    for args in (["db", "get", "--db", "jobs", "x"], ["tick", "sweep"]):
        out = sh(*args, "--config", "typo.toml", check=2)
        assert len(lines(out.stderr)) == 1 and "databse_url is not a setting" in out.stderr, out.stderr
    helped = sh("--help", extra={"SKYHUB_CONFIG": "typo.toml"}, check=0)
    assert "Commands:" in helped.stdout and "skyhub: note: the settings are not valid: databse_url is not a setting" in helped.stderr


def test_run_on_a_bad_address_or_a_taken_port_is_one_line_and_starts_nothing(sh):
    out = sh("run", "--host", "999.1.1.1", check=2)
    assert lines(out.stderr) == [lines(out.stderr)[0]] and "cannot serve on '999.1.1.1': it is not an address or a name" in out.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = sh("run", "--port", str(port), check=2)
    assert lines(out.stderr) == [f"skyhub: usage: port {port} on 127.0.0.1 is taken by another process: stop it, or choose "
                                 "another port with --port (0 picks a free one)"]
    assert not (sh.folder / "skyhub.db").exists()


def test_a_tick_that_fails_says_so_in_one_skyhub_line(sh):
    out = sh("tick", "ingest", extra={"SKYHUB_BOT__HANDLE": "skybot.test"}, check=1)
    assert json.loads(out.stdout)["outcome"] == "error"
    assert lines(out.stderr) == ["skyhub: tick ingest failed: bluesky:skybot.test is not in the vault: paste the bot's app "
                                 "password with `skyhub vault put bluesky skybot.test`"]


def test_the_version_and_the_hubs_first_lines(sh, tmp_path):
    assert sh("--version", check=0).stdout.strip() == "skyhub 0.1.0"
    hub = Hub(f"sqlite:///{tmp_path}/h.db", tmp_path, env={"SKYHUB_LOG_LEVEL": "INFO", "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"})
    try:
        said = "".join(hub.stderr)
        assert "skyhub: note: the vault has no key yet; everything runs, but credentials" in said
        assert "ticks sweep every 30s, sample every 1m, vault every 1m, publish every 30s" in said  # intervals with their units
    finally:
        hub.stop()


def test_columns_that_say_what_to_do_are_never_cut(sh):
    sh("publish", "bsky", "--account", "shop.bsky.social", "--slug", "hello", "--caption", "Hello", check=0)
    sh("tick", "publish", check=0)
    listed = sh("publish", "ls", check=0).stdout
    assert "paste one with `skyhub vault put bluesky shop.bsky.social`" in listed
    status = sh("status", check=0).stdout
    assert "paste one with `skyhub vault put bluesky shop.bsky.social`" in status and "…" not in status


def test_dev_says_what_it_does_and_refuses_what_it_does_not_know():
    helped = subprocess.run([str(ROOT / "dev"), "help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and "./dev test" in helped.stdout and "set -euo" not in helped.stdout
    assert "trust auth" in helped.stdout and "665 MB" in helped.stdout
    bogus = subprocess.run([str(ROOT / "dev"), "bogus"], capture_output=True, text=True, timeout=30)
    assert bogus.returncode == 2 and bogus.stderr.startswith("dev: unknown command 'bogus'")


def test_the_readmes_examples_hold():
    readme = (ROOT / "README.md").read_text()
    assert "--image examples/box.png" in readme and (ROOT / "examples" / "box.png").read_bytes().startswith(b"\x89PNG")
    assert "trust" in readme and "665 MB" in readme and "Chromium" in readme  # what ./dev test installs and changes
    guide = (ROOT / "docs" / "guides" / "mention-builds.md").read_text()
    assert "skyhub vault init" in guide and "SKYHUB_VAULT_KEY_FILE" in guide  # the bot's setup starts with the key
