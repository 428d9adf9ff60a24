"""What a command loads is what it uses: `skyhub db get` reads the ledger without the bot, the
API or the scheduler (nor pydantic: the core settings have their own reader, which must agree
with the full one), and no hub loads the atproto SDK (platforms.bluesky speaks XRPC over httpx)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hub.config import core
from hub.settings import load_settings
from vault import new_key_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAVY = ("atproto", "fastapi", "uvicorn", "apscheduler", "pydantic", "httpx", "cryptography", "PIL")  # atproto: any atproto_* too

PROBE = """
import json, sys
sys.argv = ["skyhub", *json.loads(sys.argv[1])]
try:
    from hub.cli import entry
    entry()
except SystemExit as exc:
    code = exc.code
names = {m.split(".")[0].split("_")[0] if m.startswith("atproto") else m.split(".")[0] for m in sys.modules}
print(json.dumps({"code": code, "loaded": sorted(m for m in HEAVY if m in names)}), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def loaded_by(tmp_path, *args):
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "PYTHONPATH": ROOT}, timeout=60)
    return json.loads(proc.stderr.strip().splitlines()[-1])


def test_reading_the_ledger_loads_no_bot_api_scheduler_or_pydantic(tmp_path):
    got = loaded_by(tmp_path, "db", "get", "--db", "notes", "missing")
    assert got == {"code": 5, "loaded": []}
    for args in (["db", "history", "--db", "notes", "missing", "--json"], ["db", "query", "--db", "notes", "--field", "status", "--key", "x"]):
        assert not set(loaded_by(tmp_path, *args)["loaded"]) & {"atproto", "fastapi", "uvicorn", "apscheduler"}


def test_help_and_listing_posts_load_no_imaging(tmp_path):
    assert "PIL" not in loaded_by(tmp_path, "--help")["loaded"]
    assert "PIL" not in loaded_by(tmp_path, "publish", "ls")["loaded"]
    assert "PIL" not in loaded_by(tmp_path, "publish", "bsky", "--slug", "s", "--account", "a.test", "--caption", "Hi")["loaded"]


def test_writing_loads_the_rules_but_not_the_bot_the_api_or_the_scheduler(tmp_path):
    got = loaded_by(tmp_path, "db", "put", "--db", "notes", '{"v": 1}')
    assert got["code"] == 0 and not set(got["loaded"]) & {"atproto", "fastapi", "uvicorn", "apscheduler"}


def test_no_hub_imports_the_atproto_sdk_with_or_without_the_bot(tmp_path):
    code = (  # what `skyhub run` builds and imports: the app, the API with the console, the server
        "import sys; from ledger import SYSTEM; from hub.settings import load_settings; from hub.app import build_app; "
        "from hub.webapp import create_api; import hub.server; "
        "app = build_app(load_settings(), clock=SYSTEM); create_api(app); app.stop(); "
        "print(any(m.startswith('atproto') for m in sys.modules), [t.name for t in app.ticks], 'PIL' in sys.modules)"
    )
    env = {**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "PYTHONPATH": ROOT}
    without = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert without.stdout.startswith("False"), without.stderr
    assert without.stdout.strip().endswith("False"), "a hub loads Pillow only when it processes an image"
    with_bot = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                              env={**env, "SKYHUB_BOT__HANDLE": "skybot.test"})
    assert with_bot.stdout.startswith("False") and "ingest" in with_bot.stdout, with_bot.stderr


@pytest.mark.parametrize("env,flags,file", [
    ({}, {}, ""),
    ({"SKYHUB_DATABASE_URL": "sqlite:////tmp/env.db", "SKYHUB_ACTOR": "user:env"}, {}, ""),
    ({"skyhub_hub_url": "http://lower.test"}, {}, ""),
    ({"SKYHUB_DATABASE_URL": "sqlite:////tmp/env.db"}, {"database_url": "sqlite:////tmp/flag.db"}, ""),
    ({}, {}, 'database_url = "postgresql://file@db/x"\nactor = "user:file"\n[store]\npool_size = 3\nstatement_timeout = "2s"\n'),
    ({"SKYHUB_STORE__CONNECT_TIMEOUT": "750ms", "SKYHUB_TOKEN": "skh_x"}, {"device": "gha"}, 'log_level = "DEBUG"\n'),
])
def test_the_core_reader_agrees_with_the_settings(tmp_path, monkeypatch, env, flags, file):
    for key in [k for k in os.environ if k.upper().startswith("SKYHUB_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    config = None
    if file:
        config = str(tmp_path / "mine.toml")
        (tmp_path / "mine.toml").write_text(file)
    fast, full = core(config, **flags), load_settings(config, **flags)
    assert fast.database_url == full.database_url and fast.hub_url == full.hub_url and fast.device == full.device
    assert fast.token == full.token.get_secret_value() and fast.log_level == full.log_level
    assert (fast.actor or full.actor) == full.actor
    assert (fast.pool_size, fast.statement_timeout, fast.connect_timeout) == (
        full.store.pool_size, full.store.statement_timeout, full.store.connect_timeout)


COMPILED = """
import importlib._bootstrap_external as be, json, os, sys
compiled = []
plain = be.SourceLoader.source_to_code
def spy(self, data, path, *, _optimize=-1):  # only called when no current bytecode is there to load
    compiled.append(os.path.relpath(path, ROOT))
    return plain(self, data, path, _optimize=_optimize)
be.SourceLoader.source_to_code = spy
sys.argv = ["skyhub", *json.loads(sys.argv[1])]
try:
    from hub.cli import entry
    entry()
except SystemExit:
    pass
print(json.dumps([p for p in compiled if not p.startswith("..")]), file=sys.stderr)
""".replace("ROOT", repr(ROOT))


@pytest.mark.parametrize("args", [["--help"], ["db", "get", "--db", "notes", "missing"]])
def test_the_cli_starts_from_bytecode_not_by_compiling_skyhub(tmp_path, args):
    # ./dev compiles the sources' bytecode: the editable install runs them in place, and where
    # PYTHONDONTWRITEBYTECODE is set Python would compile every module again at every start
    proc = subprocess.run([sys.executable, "-c", COMPILED, json.dumps(args)], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "PYTHONPATH": ROOT}, timeout=60)
    compiled = json.loads(proc.stderr.strip().splitlines()[-1])
    assert compiled == [], f"compiled at start (run ./dev, which compiles them): {compiled}"


def test_an_idle_hub_without_a_vault_key_says_so_without_loading_keyring(tmp_path):
    # whether the machine has an OS keyring is asked in a child process: keyring and its backends stay out of the hub
    code = (
        "import sys; from ledger import SYSTEM; from hub.settings import load_settings; from hub.app import build_app; "
        "from hub.webapp import create_api; from starlette.testclient import TestClient; "
        "app = build_app(load_settings(), clock=SYSTEM); client = TestClient(create_api(app)); "
        "health = client.get('/health').json()['vault']; notices = list(app.notices()); app.stop(); "
        "print(health['key'], 'no OS keyring' in health['reason'], any('no OS keyring' in n for n in notices), 'keyring' in sys.modules)"
    )
    env = {**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "PYTHONPATH": ROOT, "SKYHUB_VAULT_KEY": "",
           "SKYHUB_VAULT_KEY_FILE": "", "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert got.stdout.split() == ["False", "True", "True", "False"], got.stderr


IDLE = """
import json, sys
from ledger import SYSTEM
from hub.settings import load_settings
from hub.app import build_app
from hub.webapp import create_api
from starlette.testclient import TestClient
from hub.console import front_of
HEAVY = ("jinja2", "prometheus_client", "pydantic.v1", "regex", "hub.console.web", "hub.console.routes", "pydantic_settings", "dotenv",
         "publishers.api", "publishers.api_posts", "vault.api")
app = build_app(load_settings(), clock=SYSTEM)
api = create_api(app)
client = TestClient(api)
steps = {"health": client.get("/health").status_code, "api": client.get("/v1/db/notes/docs/x").status_code}
loaded = {"idle": [m for m in HEAVY if m in sys.modules]}
steps["console"] = client.get("/", follow_redirects=False).status_code
loaded["console"] = [m for m in HEAVY if m in sys.modules]
steps["metrics"] = client.get("/metrics").status_code  # refused without a token: nothing scraped yet
loaded["refused"] = [m for m in HEAVY if m in sys.modules]
text = front_of(api).console.metrics.scrape().decode()  # what /metrics answers a person's token
steps["counted"] = [line for line in text.splitlines() if line.startswith("skyhub_http_requests_total") and 'route="/health"' in line]
loaded["metrics"] = [m for m in HEAVY if m in sys.modules]
app.stop()
print(json.dumps({"steps": steps, "loaded": loaded}))
"""


def test_an_idle_hub_loads_the_console_and_prometheus_only_when_asked_for_them(tmp_path):
    # jinja2 and the pages on the first console request, prometheus_client on the first scrape; pydantic.v1 (which
    # FastAPI imports to ask whether a type is a v1 model), regex (richtext's patterns) and pydantic-settings (the
    # settings are read by hub.settings itself) never by an idle hub; nor the routes of publishing and the vault
    # (made on the first request under their paths: test_a_products_routes_are_made_on_the_first_request_for_them)
    env = {**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "PYTHONPATH": ROOT, "SKYHUB_VAULT_KEY": new_key_text()}
    proc = subprocess.run([sys.executable, "-c", IDLE], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["loaded"]["idle"] == [], proc.stderr
    assert {"jinja2", "hub.console.web", "hub.console.routes"} <= set(got["loaded"]["console"])
    assert "prometheus_client" not in got["loaded"]["refused"] and "prometheus_client" in got["loaded"]["metrics"]
    health = got["steps"]["health"]  # counted since the hub started, before prometheus_client was loaded
    assert got["steps"]["counted"] == [f'skyhub_http_requests_total{{method="GET",route="/health",status="{health}"}} 1.0']
    assert "pydantic.v1" not in got["loaded"]["metrics"] and "regex" not in got["loaded"]["metrics"]
    assert got["steps"]["api"] == 401  # the API answers as before (no credential)
    assert got["steps"]["console"] in (302, 303, 307) and got["steps"]["metrics"] == 401


ROUTES = """
import json, sys
from ledger import SYSTEM
from hub.settings import load_settings
from hub.app import build_app
from hub.api.web import Web
from hub.webapp import create_api
from starlette.testclient import TestClient
from hub.console import front_of
app = build_app(load_settings(), clock=SYSTEM)
api = create_api(app)
client = TestClient(api)
LAZY = ("publishers.api", "vault.api")
got = {"idle": [m for m in LAZY if m in sys.modules]}
got["vault"] = client.get("/v1/vault/credentials").status_code  # refused by the gate: no credential
got["after_vault"] = [m for m in LAZY if m in sys.modules]
got["publish"] = client.post("/v1/publish", json={}).status_code
got["after_publish"] = [m for m in LAZY if m in sys.modules]
text = front_of(api).console.metrics.scrape().decode()
got["counted"] = sorted(line.split("{")[1].split("}")[0] for line in text.splitlines()
                        if line.startswith("skyhub_http_requests_total") and "/v1/" in line)
paths = set(client.get("/openapi.json").json()["paths"])
web = Web(app.store, app.settings, app.clock, None, app.context)
def walk(routes):  # an included router is one route (FastAPI 0.165): its own routes are in original_router
    for r in routes:
        yield from walk(r.original_router.routes) if hasattr(r, "original_router") else [r]
outside = {}
for product in app.products:
    if product.api_paths:
        routes = list(walk(product.router(web).routes))
        outside[product.name] = [r.path for r in routes if not r.path.startswith(tuple(product.api_paths))]
        assert {r.path for r in routes} <= paths, product.name
got["outside"] = outside
got["declared"] = sorted(p.name for p in app.products if p.api_paths)
app.stop()
print(json.dumps(got))
"""


def test_a_products_routes_are_made_on_the_first_request_for_them(tmp_path):
    # building a router's routes (FastAPI's models of each body and answer) is 1.4 MB an idle hub does not need: a
    # product that declares its paths (Product.api_paths) has its router made on the first request under one of them,
    # before the gate and the request counter see it (so a refused request is answered and counted as before), and
    # for the OpenAPI description. Every route of such a router must be under the paths it declares.
    env = {**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "PYTHONPATH": ROOT, "SKYHUB_VAULT_KEY": new_key_text()}
    proc = subprocess.run([sys.executable, "-c", ROUTES], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["idle"] == [] and got["declared"] == ["publish", "vault"]
    assert got["vault"] == 401 and got["after_vault"] == ["vault.api"]
    assert got["publish"] == 401 and got["after_publish"] == ["publishers.api", "vault.api"]
    assert got["counted"] == ['method="GET",route="/v1/vault/credentials",status="401"',
                              'method="POST",route="/v1/publish",status="401"']
    assert got["outside"] == {"publish": [], "vault": []}


TICKS = """
import json, sys
from ledger import SYSTEM
from hub.settings import load_settings
from hub.app import build_app
app = build_app(load_settings(), clock=SYSTEM)
ran = {t.name: app.scheduler.run(t.name, manual=True) for t in app.ticks}
app.stop()
print(json.dumps({"ran": ran, "loaded": sorted(m for m in ("httpx", "httpcore", "rich") if m in sys.modules)}))
"""


def test_an_idle_hubs_ticks_load_no_http_client_while_nothing_is_queued(tmp_path):
    # every tick of a hub with nothing to do runs without loading httpx (and what its package imports: rich, pygments,
    # 6 MB in all): the publish tick makes the guarded fetcher (for its policy) only when a queued post is checked again
    env = {**os.environ, "SKYHUB_DATABASE_URL": f"sqlite:///{tmp_path}/hub.db", "PYTHONPATH": ROOT, "SKYHUB_VAULT_KEY": new_key_text()}
    proc = subprocess.run([sys.executable, "-c", TICKS], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ran"] == {"sweep": "ok", "sample": "ok", "vault": "ok", "publish": "ok"} and got["loaded"] == []
