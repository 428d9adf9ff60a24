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
``/metrics``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .metrics import Measured, Scope
from .routes import console_app
from .web import Console

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..app import App

PATHS = ("/", "/metrics", "/v1/overview")
PREFIX = "/console/"


def is_console_path(path: str) -> bool:
    """Whether the console (not the API) answers ``path``."""
    return path in PATHS or path.startswith(PREFIX)


class Front:
    """The outermost middleware: the console's paths to the console, the rest to the API (``app``,
    the stack under it). Both are counted for ``/metrics`` by the route templates of their own app."""

    def __init__(self, app: Any, *, console: Console, api: FastAPI) -> None:
        web = console_app(console)
        self.api = Measured(app, console.metrics, lambda: api.routes)
        self.console = Measured(web, console.metrics, lambda: web.routes)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        """ASGI: an HTTP request for a console path to the console, anything else to the API."""
        if scope["type"] == "http" and is_console_path(str(scope.get("path", ""))):
            await self.console(scope, receive, send)
        else:
            await self.api(scope, receive, send)


def mount(api: FastAPI, app: App) -> Console:
    """Serve the console in front of ``api`` (see the module docstring). Call it last in
    ``create_api``, so the console is the outermost layer."""
    console = Console.make(app, lambda: str(getattr(api.state, "public_url", "") or ""))
    console.failures = getattr(api.state, "failures", console.failures)  # one count per address for the API and sign-in
    api.add_middleware(Front, console=console, api=api)
    api.state.console = console
    return console


__all__ = ["Console", "Front", "is_console_path", "mount"]
