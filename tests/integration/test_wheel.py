"""skyhub as a user installs it: the wheel, in a fresh virtual environment outside the
checkout. Its settings and guardrails ship inside the package, so `skyhub run` with the bot
configured and `skyhub tick ingest` work from there (a wheel once left config/ out, and every
tick died with a FileNotFoundError traceback); the API's docs are served from the installed
Swagger UI package, and no test tool (axe-core) ships."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def run(cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 900), **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}: {proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


def test_the_wheel_runs_from_a_fresh_environment(tmp_path):
    dist = tmp_path / "dist"
    source = tmp_path / "source"  # a copy: building writes build/ and *.egg-info/ beside the sources
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "node_modules", "__pycache__", "build", "dist", "*.egg-info", ".*_cache", "*.db*", "site"))
    # the build frontend: pip, with the build backend pyproject.toml names, in its own environment
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check", "-w", str(dist), str(source)])
    (wheel,) = dist.glob("skyhub-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    import zipfile

    shipped = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in shipped if "axe" in n or n.startswith("tests/")], "test tools do not ship"
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)])
    home = tmp_path / "somewhere-else"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYHUB_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"SKYHUB_BOT__HANDLE": "skybot.test", "SKYHUB_DATABASE_URL": f"sqlite:///{home}/hub.db",
                "SKYHUB_PLATFORMS__BLUESKY_PDS": "http://127.0.0.1:9", "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"})
    skyhub = str(venv / "bin" / "skyhub")
    imported = run([str(venv / "bin" / "python"), "-c", "import hub, skyhub_config; print(hub.__file__)"], env=env, cwd=home)
    assert str(venv) in imported.stdout and str(ROOT) not in imported.stdout  # not the checkout
    # the test kit works from a plain install, but for its pytest fixtures, which say what to install
    kit = "import skyhub_testkit.memory, skyhub_testkit.hub, skyhub_testkit.postgres, skyhub_testkit.fakemeta, " \
          "skyhub_testkit.fakepds, skyhub_testkit.servers; from ledger import SYSTEM; print(skyhub_testkit.memory.memory_store(None, SYSTEM).head_seq())"
    assert run([str(venv / "bin" / "python"), "-c", kit], env=env, cwd=home).stdout.strip() == "0"
    fixtures = subprocess.run([str(venv / "bin" / "python"), "-c", "import skyhub_testkit.fixtures"], capture_output=True,
                              text=True, env=env, cwd=home, timeout=60)
    assert fixtures.returncode == 1
    assert fixtures.stderr.strip().splitlines()[-1] == "ImportError: skyhub_testkit.fixtures needs pytest: install skyhub[test]"

    # the built-in codegen ships (bot.codegen is a subpackage); without the browser extra its load check says why it is skipped
    job = '{"_id": "did:plc:x:3k", "text": "@skybot.test make me a timer"}'
    page = run([str(venv / "bin" / "python"), "-m", "bot.codegen", "--out", str(home / "site"), "--base-url", "https://me.example/b"],
               input=job, env=env, cwd=home)
    assert '"title": "Timer"' in page.stdout and "skipped: Playwright is not installed (pip install 'skyhub[browser]')" in page.stdout
    assert "Content-Security-Policy" in (home / "site" / "did-plc-x-3k" / "index.html").read_text()

    tick = subprocess.run([skyhub, "tick", "ingest"], capture_output=True, text=True, env=env, cwd=home, timeout=120)
    # no credential was pasted: the tick fails, recorded, with the reason and the remedy, and no traceback
    assert tick.returncode == 1 and '"outcome": "error"' in tick.stdout, tick.stderr
    assert "bluesky:skybot.test" in tick.stdout and "skyhub vault put bluesky skybot.test" in tick.stdout
    assert "Traceback" not in tick.stderr and "FileNotFoundError" not in tick.stderr

    hub = subprocess.Popen([skyhub, "run", "--port", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=home)
    try:
        deadline = time.monotonic() + 60
        url = None
        lines = []
        while url is None and time.monotonic() < deadline:
            line = hub.stderr.readline()
            lines.append(line)
            found = re.search(r"API on (http://[0-9.]+:\d+)", line)
            url = found.group(1) if found else None
            assert line or hub.poll() is None, "".join(lines)
        assert url, "".join(lines)
        health = httpx.get(f"{url}/health", timeout=10).json()
        assert {t["name"] for t in health["scheduler"]["ticks"]} >= {"ingest", "reply", "vault", "sweep"}
        docs = httpx.get(f"{url}/docs", timeout=10)  # the API's docs from the installed package, not a CDN
        assert docs.status_code == 200 and "/docs/swagger-ui-bundle.js" in docs.text and "http" not in docs.text.split("<body>")[1]
        assert httpx.get(f"{url}/docs/swagger-ui-bundle.js", timeout=10).status_code == 200
    finally:
        hub.send_signal(signal.SIGTERM)
        _, rest = hub.communicate(timeout=30)
    assert hub.returncode == 0 and "Traceback" not in "".join(lines) + rest
