"""The console: one page where the queue, its failures and the accounts that need a person are
visible at a glance and change live, served by ``skyhub run`` at ``/`` (the API stays under
``/v1``). Server-rendered HTML, a little vanilla JavaScript for live updates, every asset
shipped in this package.

    sessions.py   sign-in with a person's token into a server-side session; CSRF
    overview.py   counts, machines and what needs a person (also ``GET /v1/overview`` and ``skyhub status``)
    diagram.py    each machine drawn as SVG with its live counts
    activity.py   done and failed per minute (from the change log) and queue depth (from the samples database)
    charts.py     those as SVG
    metrics.py    ``GET /metrics`` (prometheus_client) and the HTTP request counter
    forms.py      the publishing form and where each validation sentence is shown
    web.py        plumbing: rendering, forms, cookies, static files
    routes.py     the routes

``hub/webapp.py`` calls ``mount(api, app)`` once. The console is put in front of the API as the
outermost middleware: requests for ``/``, ``/console/...``, ``/metrics`` and ``/v1/overview``
go to the console's own app (which authenticates them itself: a session cookie, or a token),
everything else to the API unchanged; every request is counted by route template for
``/metrics``. The console itself (its templates and jinja2, its pages, prometheus_client) is
made on the first request for one of its paths, once (``Front.console``): a hub only the API is
asked of never loads it.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .metrics import Measured, Metrics, Scope

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..app import App
    from .web import Console

PATHS = ("/", "/metrics", "/v1/overview")
PREFIX = "/console/"


def is_console_path(path: str) -> bool:
    """Whether the console (not the API) answers ``path``."""
    return path in PATHS or path.startswith(PREFIX)


class Front:
    """The outermost middleware: the console's paths to the console, the rest to the API (``app``,
    the stack under it). Both are counted for ``/metrics`` by the route templates of their own app.
    The console is made on the first request for one of its paths (``console``)."""

    def __init__(self, app: Any, *, hub: App, api: FastAPI, metrics: Metrics) -> None:
        self.hub = hub
        self.api_app = api
        self.metrics = metrics
        self.api = Measured(app, metrics, lambda: api.routes)
        self._console: Console | None = None
        self._web: Measured | None = None
        self._making = threading.Lock()  # two first requests at once (threads, or several loops): one console

    @property
    def console(self) -> Console:
        """The console, made (with its app) on first use, once."""
        if self._console is None:
            with self._making:
                if self._console is None:
                    from .routes import console_app
                    from .web import Console

                    api = self.api_app
                    console = Console.make(self.hub, lambda: str(getattr(api.state, "public_url", "") or ""), metrics=self.metrics)
                    console.failures = getattr(api.state, "failures", console.failures)  # one count per address: API and sign-in
                    web = console_app(console)
                    self._web = Measured(web, self.metrics, lambda: web.routes)
                    self._console = console
        return self._console

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """ASGI: an HTTP request for a console path to the console, anything else to the API."""
        if scope["type"] == "http" and is_console_path(str(scope.get("path", ""))):
            if self._web is None:
                self.console  # noqa: B018 - made here, on the first console request
            assert self._web is not None
            await self._web(scope, receive, send)
        else:
            await self.api(scope, receive, send)


def mount(api: FastAPI, app: App) -> None:
    """Serve the console in front of ``api`` (see the module docstring). Call it last in
    ``create_api``, so the console is the outermost layer (``front_of(api).console`` is the console)."""
    api.add_middleware(Front, hub=app, api=api, metrics=Metrics(app.clock.now_ms))


def front_of(api: FastAPI) -> Front:
    """The console's middleware of ``api`` (built when the app first starts: ``api.build_middleware_stack``)."""
    stack: Any = api.middleware_stack or api.build_middleware_stack()
    api.middleware_stack = stack
    while stack is not None and not isinstance(stack, Front):
        stack = getattr(stack, "app", None)
    if stack is None:
        raise LookupError("no console is mounted on this app")
    return stack


__all__ = ["Front", "front_of", "is_console_path", "mount"]
