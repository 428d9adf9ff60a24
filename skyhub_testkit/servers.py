"""A real HTTP server on a local address, for what must cross a real socket: a canary that must
never be reached, an image host, a page host. ``routes`` maps a path to ``(status, headers,
body)`` or to a function of the handler; every request's path is kept in ``hits``."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable
from typing import Any

Route = tuple[int, dict[str, str], bytes] | Callable[[http.server.BaseHTTPRequestHandler], None]


class LocalServer:
    """A threading HTTP server on ``host`` (a free port); ``url`` once it listens, ``stop()`` at the end.
    A path without a route answers 200 with ``default`` (a small PNG by default); ``delay`` slows every answer."""

    def __init__(self, host: str = "127.0.0.1", routes: dict[str, Route] | None = None, *, default: bytes = b"",
                 default_type: str = "image/png", delay: float = 0.0) -> None:
        self.routes = routes if routes is not None else {}
        self.hits: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                outer.hits.append(self.path)
                if delay:
                    time.sleep(delay)
                route = outer.routes.get(self.path.split("?")[0])
                if callable(route):
                    route(self)
                    return
                status, headers, body = route if route is not None else (200, {"Content-Type": default_type}, default)
                self.send_response(status)
                for key, value in headers.items():
                    if value:  # an empty value: left out (a body that ends when the connection does)
                        self.send_header(key, value)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()


def redirect(location: str) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    """A route that answers 302 to ``location``."""

    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


__all__ = ["LocalServer", "redirect"]
