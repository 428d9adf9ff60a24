"""Security headers on every answer the hub gives, and the API's interactive docs served from
the installed package (nothing loaded from another host).

``SecureHeaders`` is the outermost ASGI layer: every HTTP response (the API's JSON, errors,
``/health``, ``/metrics``, the change stream, the console's pages, ``/docs``) gets the headers
below unless the response set its own value for one (the console's pages carry their own
Content-Security-Policy; static files their own Cache-Control).

| header | value |
| --- | --- |
| ``Content-Security-Policy`` | ``default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'`` (JSON and text load nothing) |
| ``X-Content-Type-Options`` | ``nosniff`` |
| ``X-Frame-Options`` | ``DENY`` |
| ``Referrer-Policy`` | ``no-referrer`` |
| ``Permissions-Policy`` | every powerful feature off (camera, microphone, geolocation, payment, USB, ...) |
| ``Cross-Origin-Opener-Policy`` / ``-Resource-Policy`` | ``same-origin`` |
| ``Cache-Control`` | ``no-store`` (answers carry documents and credentials' metadata) |

``/docs`` is Swagger UI from the ``swagger-ui-bundle-v2`` package: the page, its script and its
stylesheet are served by the hub under ``/docs/``, started by a script file (no inline script),
with a policy that allows only the hub itself.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PERMISSIONS = ("accelerometer=(), autoplay=(), camera=(), display-capture=(), encrypted-media=(), fullscreen=(), "
               "geolocation=(), gyroscope=(), magnetometer=(), microphone=(), midi=(), payment=(), "
               "picture-in-picture=(), publickey-credentials-get=(), screen-wake-lock=(), usb=(), xr-spatial-tracking=()")
DEFAULTS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"permissions-policy", PERMISSIONS.encode()),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
DOCS_CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")


class SecureHeaders:
    """ASGI: add the module's headers to every HTTP response that does not set them itself."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add what is missing to the response's headers as it starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {name.lower() for name, _ in headers}
                headers.extend((name, value) for name, value in DEFAULTS if name not in present)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, sending)


# ---- /docs ------------------------------------------------------------------------------------
DOCS_FILES = {"swagger-ui-bundle.js": "text/javascript; charset=utf-8", "swagger-ui.css": "text/css; charset=utf-8",
              "favicon-32x32.png": "image/png"}
INIT = b"""window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis], layout: "BaseLayout"});
});
"""
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>skyhub API</title><link rel="stylesheet" href="/docs/swagger-ui.css"><link rel="icon" href="/docs/favicon-32x32.png"></head>
<body><div id="swagger-ui"></div><script src="/docs/swagger-ui-bundle.js"></script><script src="/docs/init.js"></script></body></html>
"""


@functools.cache
def _bundle() -> Path | None:
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:  # the package is a dependency; a broken install answers 404 rather than failing the hub
        return None
    return Path(str(swagger_ui_path))


@functools.cache
def _asset(name: str) -> bytes | None:
    if name == "init.js":
        return INIT
    folder = _bundle()
    if name not in DOCS_FILES or folder is None:
        return None
    return (folder / name).read_bytes()


async def docs_page(request: Request) -> Response:
    """``GET /docs``: the interactive API description."""
    return HTMLResponse(PAGE, headers={"Content-Security-Policy": DOCS_CSP, "Cache-Control": "no-cache"})


async def docs_asset(request: Request) -> Response:
    """``GET /docs/{name}``: Swagger UI's script and stylesheet, from the installed package."""
    name = str(request.path_params["name"])
    data = _asset(name)
    if data is None:
        return Response("not found\n", status_code=404, media_type="text/plain")
    kind = "text/javascript; charset=utf-8" if name == "init.js" else DOCS_FILES[name]
    return Response(data, media_type=kind, headers={"Cache-Control": "public, max-age=86400"})


DOCS_ROUTES = [Route("/docs", docs_page, methods=["GET"]), Route("/docs/{name}", docs_asset, methods=["GET"])]
DOCS_PATHS = ("/docs", "/docs/init.js", *(f"/docs/{name}" for name in DOCS_FILES))

__all__ = ["DOCS_PATHS", "DOCS_ROUTES", "SecureHeaders"]
