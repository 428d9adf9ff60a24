"""``skyhub status`` as a subprocess: the table, ``--json``, ``--hub`` and ``--watch`` stopped
by Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading

from skyhub_testkit.hub import ROOT, Hub


def skyhub(*args: str, env: dict[str, str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hub", *args], env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                          capture_output=True, text=True, timeout=60, **kwargs)  # type: ignore[call-overload]


def test_status_prints_the_overview_as_a_table_and_as_json(tmp_path):
    env = {"SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/s.db"}
    assert skyhub("db", "put", "--db", "jobs", '{"type": "job", "status": "pending", "input": {}}', env=env).returncode == 0
    table = skyhub("status", env=env)
    assert table.returncode == 0, table.stderr
    assert "NEEDS A PERSON (0)" in table.stdout and "jobs  job   pending  1" in table.stdout and "on_change" in table.stdout
    data = json.loads(skyhub("status", "--json", env=env).stdout)
    assert data["databases"][0]["kinds"][0]["counts"] == {"pending": 1}
    assert {m["name"] for m in data["machines"]} >= {"jobs/job", "requests/publish-request", "vault/credential"}


def test_status_over_a_hub_and_watch_until_ctrl_c(tmp_path):
    hub = Hub(f"sqlite:///{tmp_path}/h.db", tmp_path)
    try:
        token = hub.token("ana")
        env = {"SKYHUB_HUB_URL": hub.url, "SKYHUB_TOKEN": token}
        remote = skyhub("status", "--json", env=env)
        assert remote.returncode == 0, remote.stderr
        assert json.loads(remote.stdout)["ticks"][0]["name"] == "sweep"  # the hub's own ticks, not this machine's
        denied = skyhub("status", env={"SKYHUB_HUB_URL": hub.url, "SKYHUB_TOKEN": "skh_000000000000_" + "x" * 30})
        assert denied.returncode == 4 and "unknown token" in denied.stderr
        proc = subprocess.Popen([sys.executable, "-m", "hub", "status", "--watch", "--every", "200ms"],
                                env={**os.environ, "PYTHONPATH": str(ROOT), **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                # started with SIGINT ignored, as a shell starts a background job (CI runners do)
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        # Ctrl-C once it has refreshed twice (a fixed sleep raced the interpreter's start on a busy machine)
        screens: queue.Queue[str] = queue.Queue()
        seen: list[str] = []

        def read() -> None:
            for line in proc.stdout:  # type: ignore[union-attr]
                seen.append(line)
                if line.startswith("NEEDS A PERSON"):
                    screens.put(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for _ in range(2):
            screens.get(timeout=120)  # a guard against hanging, not a timing assertion
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(60)
        err = proc.stderr.read()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
        proc.stdout.close()  # type: ignore[union-attr]
        assert proc.returncode == 0, err
        assert "".join(seen).count("NEEDS A PERSON") >= 2 and "Traceback" not in err
    finally:
        hub.stop()
