"""Indexes are declared (by the products, the settings, or an admin at the CLI), never made
by a read: `skyhub db index add|list|drop`, and `store.indexes` in the settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(tmp_path, *args, check=0, env=None):
    proc = subprocess.run([sys.executable, "-m", "hub", *args], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "PYTHONPATH": ROOT, **(env or {})})
    assert proc.returncode == check, (proc.stdout, proc.stderr)
    return proc


def indexed(tmp_path, **env):
    return {(i["db"], i["field"]): i["origin"] for i in json.loads(run(tmp_path, "db", "index", "list", "--json", env=env).stdout)}


def test_an_admin_adds_and_drops_an_index_and_queries_say_when_they_scan(tmp_path):
    before = indexed(tmp_path)
    assert before[("*", "status")] == "builtin" and before[("requests", "slug")] == "declared"
    for i in range(3):
        run(tmp_path, "db", "put", "--db", "notes", "--id", f"n{i}", json.dumps({"colour": "red" if i else "blue"}))
    assert ("notes", "colour") not in indexed(tmp_path)
    run(tmp_path, "db", "query", "--db", "notes", "--field", "colour", "--key", "red")
    assert ("notes", "colour") not in indexed(tmp_path)  # a query never makes an index
    added = json.loads(run(tmp_path, "db", "index", "add", "--db", "notes", "colour").stdout)
    assert added["origin"] == "admin" and indexed(tmp_path)[("notes", "colour")] == "admin"
    page = json.loads(run(tmp_path, "db", "query", "--db", "notes", "--field", "colour", "--key", "red", "--json").stdout)
    assert [d["_id"] for d in page["docs"]] == ["n1", "n2"]
    run(tmp_path, "db", "index", "drop", "--db", "notes", "colour")
    assert ("notes", "colour") not in indexed(tmp_path)
    refused = run(tmp_path, "db", "index", "drop", "--db", "requests", "slug", check=1)
    assert refused.stderr.startswith("skyhub: invalid:") and len(refused.stderr.strip().splitlines()) == 1


def test_the_settings_declare_more_indexes(tmp_path):
    assert indexed(tmp_path, SKYHUB_STORE__INDEXES='["notes.colour"]')[("notes", "colour")] == "declared"
    bad = run(tmp_path, "db", "index", "list", check=2, env={"SKYHUB_STORE__INDEXES": '["colour"]'})
    assert "store.indexes: 'colour' is not db.field" in bad.stderr
