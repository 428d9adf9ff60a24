"""A person's time zone (``hub.auth.set_zone``, ``skyhub user zone``): kept on the person beside their
role (neither write loses the other), checked against zoneinfo, "browser" to go back to the browser's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hub.app import build_rules
from hub.auth import role_of, set_role, set_zone, zone_of
from ledger import FakeClock, Invalid
from skyhub_testkit.hub import ROOT
from skyhub_testkit.memory import memory_store


def test_the_zone_and_the_role_live_on_the_person_side_by_side():
    clock = FakeClock(1_800_000_000_000)
    store = memory_store(build_rules(), clock)
    assert zone_of(store, "ana") is None
    set_role(store, "ana", "editor", clock=clock)
    set_zone(store, "ana", "Europe/Berlin", clock=clock)
    set_role(store, "ana", "approver", clock=clock)  # a new role keeps the zone
    assert (zone_of(store, "ana"), role_of(store, "ana")) == ("Europe/Berlin", "approver")
    set_zone(store, "ana", None, clock=clock)  # the browser's again; the role stays
    assert (zone_of(store, "ana"), role_of(store, "ana")) == (None, "approver")


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../../etc/passwd", "", "Europe/" + "x" * 80])
def test_a_zone_that_is_not_one_is_refused_with_a_sentence(zone):
    clock = FakeClock(1_800_000_000_000)
    store = memory_store(build_rules(), clock)
    with pytest.raises(Invalid, match="is not one: give an IANA name such as Europe/Berlin"):
        set_zone(store, "ana", zone, clock=clock)
    assert zone_of(store, "ana") is None


def test_skyhub_user_zone(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db"}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "hub", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)

    ok = run("user", "zone", "ana", "America/New_York")
    assert ok.returncode == 0 and json.loads(ok.stdout) == {"user": "user:ana", "zone": "America/New_York"}
    bad = run("user", "zone", "ana", "Mars/Olympus")
    assert bad.returncode != 0 and "time zone 'Mars/Olympus' is not one" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    back = run("user", "zone", "ana", "browser")
    assert back.returncode == 0 and json.loads(back.stdout) == {"user": "user:ana", "zone": None}
