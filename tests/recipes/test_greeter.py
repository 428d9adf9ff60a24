"""docs/architecture.md's recipes, followed: a product with its own console page (and template),
HTTP route, item for "needs a person", and a platform adapter its tick calls, added to a hub
by naming its declaration's module, and nothing else: no file of hub/ mentions it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from hub.auth import add_user
from ledger import SYSTEM, Services, TickEvent
from skyhub_testkit.hub import serving
from tests.console.conftest import Console

ROOT = Path(__file__).resolve().parents[2]
DECLARATION = "tests.recipes.greeter.product"


def _clear_caches():
    from hub import products, settings

    products.products.cache_clear()
    settings.settings_model.cache_clear()


@pytest.fixture
def greeter_hub(tmp_path, monkeypatch):
    from hub import products
    from hub.app import build_app
    from hub.settings import load_settings
    from hub.webapp import create_api

    monkeypatch.setattr(products, "DECLARATIONS", (*products.DECLARATIONS, DECLARATION))  # the one line the recipe adds
    _clear_caches()
    app = build_app(load_settings(database_url=f"sqlite:///{tmp_path}/hub.db"), clock=SYSTEM)
    try:
        with serving(create_api(app)) as url:
            yield app, url
    finally:
        app.stop()
        monkeypatch.undo()
        _clear_caches()


def test_a_product_brings_its_page_route_and_attention_item_without_touching_the_hub(greeter_hub):
    app, url = greeter_hub
    token = add_user(app.store, "ana", clock=SYSTEM)
    assert httpx.get(f"{url}/v1/greetings").status_code == 401  # behind the hub's gate like every route
    assert httpx.get(f"{url}/v1/greetings", headers={"Authorization": f"Bearer {token}"}).json() == []
    console = Console(url)
    try:
        console.sign_in(token)
        page = console.http.get("/console/greet")
        assert page.status_code == 200 and 'href="/console/greet"' in page.text and "Greetings" in page.text  # in the frame's nav
        sent = console.post("/console/greet", {"text": "Hello there"}, form_page="/console/greet")
        assert sent.status_code == 303
        assert "Hello there" in console.http.get("/console/greet").text
        forged = console.http.post("/console/greet", data={"text": "no csrf"})
        assert forged.status_code == 403  # the frame's CSRF check holds for the product's form too
        overview = console.http.get("/").text
        assert "waits for an answer" in overview and 'href="/console/greet">Answer it' in overview
        scraped = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}).text
        assert "skyhub_greetings_sent 1.0" in scraped  # its metric, after the hub's own
    finally:
        console.close()
    assert httpx.get(f"{url}/v1/greetings", headers={"Authorization": f"Bearer {token}"}).json() == ["Hello there"]
    [doc] = app.store.query("greetings", "status", "sent", 10).docs
    assert [c.actor for c in app.store.history("greetings", doc["_id"])] == ["user:ana"]


def test_the_products_tick_calls_its_platform_through_ctx_http(greeter_hub):
    from ledger import Ledger
    from ledger.context import make_context
    from tests.recipes.greeter.tick import weather

    app, _ = greeter_hub
    answers = [httpx.Response(503), httpx.Response(200, json={"summary": "sunny"})]
    http = httpx.Client(transport=httpx.MockTransport(lambda request: answers.pop(0)))
    ctx = make_context(Ledger(app.store, "tick:weather", app.clock), "weather", Services(http=http))
    event = TickEvent("weather", datetime.now(UTC))
    assert weather(event, ctx) == {"error": "read the weather: the service failed; it is tried again later"}
    assert weather(event, ctx) == {"sent": 1}
    assert [d["text"] for d in app.store.query("greetings", "status", "sent", 10).docs] == ["Good day: sunny"]
    assert "weather" in app.scheduler.ticks


def test_no_file_of_the_hub_names_the_product():
    for path in (ROOT / "hub").rglob("*"):
        if path.is_file() and path.suffix in (".py", ".html", ".js", ".css"):
            assert "greet" not in path.read_text(), path
