"""The hub's web application, composed in one place: the API's routers (``hub/api``: one per
topic, each given only what it needs), each configured product's router (``Product.api``), the
gate in front of them, the console in front of the API (``hub/console``), and the security
headers around everything. ``skyhub run`` serves what ``create_api`` returns (``hub/server.py``).
"""

from __future__ import annotations

import inspect
import sys
import threading
from typing import Any

from fastapi import FastAPI

from ledger import Product

from .api import errors
from .api.bulk import bulk_router
from .api.changes import Shown, changes_router
from .api.documents import documents_router
from .api.errors import ERRORS
from .api.health import health_router
from .api.machines import machines_router
from .api.pauses import pauses_router
from .api.triage import triage_router
from .api.web import Web
from .api.whoami import whoami_router
from .app import App
from .auth import Authenticator
from .console import mount
from .gate import MAX_BODY, Gate
from .headers import DOCS_PATHS, DOCS_ROUTES, SecureHeaders
from .health import HealthProbe
from .stream import Fanout
from .throttle import Failures
from .worker import Worker

PUBLIC = ("/health",)  # with the OpenAPI description and its pages: no credential needed

# FastAPI 0.165 and later trace every request through OpenTelemetry unless told not to; with no
# exporter configured that is work (and memory) for nothing on every request.
_QUIET: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {}
)



def _v1_only_if_loaded() -> None:
    """FastAPI (0.128 and later) asks of every route's types, and of every value it encodes, whether it is a
    ``pydantic.v1`` model, importing ``pydantic.v1`` (1.5 MB, for good) to find out. Nothing can be a v1 model
    unless something imported ``pydantic.v1``, so its checks are made to answer "no" without importing it while
    nothing has (and to ask as before once something has). ``tests/hub/test_lean.py`` fails if an idle hub loads it."""
    try:
        from fastapi import _compat, encoders
        from fastapi._compat import shared
    except ImportError:  # pragma: no cover - another FastAPI layout: it imports what it imports
        return
    for name in ("is_pydantic_v1_model_class", "is_pydantic_v1_model_instance"):
        plain = getattr(shared, name, None)
        if plain is None or getattr(plain, "__wrapped__", None) is not None:
            continue

        def check(obj: Any, _plain: Any = plain) -> bool:
            return "pydantic.v1" in sys.modules and bool(_plain(obj))

        check.__wrapped__ = plain  # type: ignore[attr-defined]
        for module in (shared, _compat, encoders):
            if getattr(module, name, None) is plain:
                setattr(module, name, check)


_v1_only_if_loaded()


def create_api(app: App) -> FastAPI:
    """The hub's HTTP application over ``app``: every endpoint behind the gate, the console in front (see the
    module docstring and ``hub/api``)."""
    store, settings = app.store, app.settings
    api = FastAPI(
        title="skyhub",
        version="1",
        description="The skyhub ledger over HTTP: documents, queries, history, the change stream and machines.",
        responses=ERRORS,
        docs_url=None,  # /docs is served from the installed package instead of a CDN (hub/headers.py)
        redoc_url=None,
        **_QUIET,
    )
    api.router.routes.extend(DOCS_ROUTES)
    api.state.public_url = settings.public_url or f"http://{settings.host}:{settings.port}"  # hub/server.py sets the bound one
    pool = Worker("api", settings.http.threads)  # the endpoints' store calls: see hub/worker.py
    api.state.failures = Failures()  # refused credentials, per address: the gate's and the console's sign-in
    api.add_middleware(
        Gate, authenticator=Authenticator(store, lambda: api.state.public_url), clock=app.clock,
        public={p for p in (*PUBLIC, *DOCS_PATHS, api.openapi_url) if p}, max_body=MAX_BODY,
        body_timeout=settings.http.body_timeout, run=pool.run, failures=api.state.failures,
        uploads={path: size for p in app.products for path, size in p.uploads.items()},  # binary bodies (images)
    )
    errors.install(api)
    shown = Shown({db: fields for p in app.products for db, fields in p.redact.items()})
    fanout = Fanout(store, shown.render, queue_size=settings.http.stream_queue, keepalive=settings.http.stream_keepalive,
                    stopping=app.stopping.is_set)
    private = {db: why for p in app.products for db, why in p.private.items()}
    for router in (
        health_router(HealthProbe(app), fanout.stats),
        whoami_router(pool.run),
        documents_router(store, private, pool.run),
        changes_router(store, fanout, shown, pool.run),
        machines_router(app.rules, pool.run),
        pauses_router(store, app.clock, lambda: [t.name for t in app.ticks], app.pausable, pool.run),
        bulk_router(store, app.rules, private, app.clock, pool.run),
        triage_router(store, app.rules, private, pool.run),
    ):
        api.include_router(router)
    web = Web(store, settings, app.clock, pool.run, app.context)
    later = OnDemand(api, web)
    for product in app.products:  # each product's own routes, behind the same gate
        if product.api_paths:
            later.add(product)
            continue
        router = product.router(web)
        if router is not None:
            api.include_router(router)
    mount(api, app)  # the console at / (hub/console), in front of the API
    if later.waiting:
        api.add_middleware(Routes, later=later)  # before the console counts a request by its route, and before the gate
        plain = api.openapi

        def openapi() -> dict[str, Any]:
            later.make_all()  # the description has every route
            return plain()

        api.openapi = openapi  # type: ignore[method-assign]
    api.add_middleware(SecureHeaders)  # outermost: every answer, the console's included, gets the security headers
    return api


class OnDemand:
    """The routers of the products that declare their paths (``Product.api_paths``), each made and included
    on the first request under one of them (or when the OpenAPI description is made), once: building a
    router's routes (FastAPI's models of every body, parameter and answer) costs memory an idle hub does not
    need. Its routes are the last of the API's, as they would have been at start; the paths of two products
    never overlap, so the order they come in makes no difference."""

    def __init__(self, api: FastAPI, web: Web) -> None:
        self.api = api
        self.web = web
        self.waiting: dict[str, Product] = {}
        self._making = threading.Lock()

    def add(self, product: Product) -> None:
        for name, other in self.waiting.items():
            for mine in product.api_paths:
                if any(mine.startswith(theirs) or theirs.startswith(mine) for theirs in other.api_paths):
                    raise ValueError(f"products {name!r} and {product.name!r} both declare paths under {mine!r}")
        self.waiting[product.name] = product

    def make_for(self, path: str) -> None:
        """Include the router of the product whose paths ``path`` is under, unless it is already."""
        for product in list(self.waiting.values()):
            if any(path.startswith(prefix) for prefix in product.api_paths):
                self._make(product)

    def make_all(self) -> None:
        for product in list(self.waiting.values()):
            self._make(product)

    def _make(self, product: Product) -> None:
        with self._making:
            if product.name not in self.waiting:  # made meanwhile, by another thread's request
                return
            router = product.router(self.web)
            if router is not None:
                self.api.include_router(router)
            del self.waiting[product.name]  # only now: a request that finds it gone finds its routes


class Routes:
    """ASGI middleware: makes the routes a request may be for before it goes on (``OnDemand``). (The OpenAPI
    description makes every product's: ``api.openapi`` is wrapped in ``create_api``.)"""

    def __init__(self, app: Any, *, later: OnDemand) -> None:
        self.app = app
        self.later = later

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.later.waiting and scope["type"] in ("http", "websocket"):
            self.later.make_for(str(scope.get("path", "")))
        await self.app(scope, receive, send)


__all__ = ["create_api"]
