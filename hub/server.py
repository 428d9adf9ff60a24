"""Serving an ``App`` over HTTP: ``skyhub run``.

The server runs in a thread and the main thread owns the signals, so a stop always goes
through ``App.stop()``: the API finishes its requests, in-flight handlers finish or are left
to their leases, and the store closes. (uvicorn in the main thread would re-raise the signal
and end the process before that.)
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from ledger import LedgerError

from .app import App


def serve(app: App, host: str, port: int, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve the API until SIGTERM/SIGINT, with the feed, sweep and scheduler running."""
    import uvicorn

    from .api import create_api

    server = uvicorn.Server(
        uvicorn.Config(
            create_api(app), host=host, port=port, log_level="warning",
            timeout_graceful_shutdown=5, lifespan="off", access_log=False,
        )
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    app.start()
    thread = threading.Thread(target=server.run, name="api", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise LedgerError(f"the API could not start on {host}:{port} (is the port taken?)")
            if stop.wait(0.05):
                break
        if server.started and on_ready:
            bound = server.servers[0].sockets[0].getsockname()
            on_ready(f"http://{bound[0]}:{bound[1]}")
        while not stop.wait(0.5) and thread.is_alive():
            pass
    finally:
        app.stopping.set()
        server.should_exit = True
        thread.join(10)
        app.stop()
