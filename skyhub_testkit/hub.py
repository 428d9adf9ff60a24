"""A real `skyhub run` process on a free local port, and credentials to talk to it."""

from __future__ import annotations

import importlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hub.app import build_rules
from hub.auth import add_user, approve_device, new_device_key, public_key_of
from hub.remote import DeviceAuth, RemoteStore, TokenAuth
from ledger import SYSTEM, Invalid, open_store
from ledger.actor import parse_actor

ROOT = Path(importlib.import_module("hub").__file__ or ".").resolve().parents[1]  # the source root the hub runs from


class Hub:
    """``skyhub run --port 0`` on a database URL; ``.url`` once it listens."""

    def __init__(self, database_url: str, cwd: Path, *, jobs: bool = True, env: dict[str, str] | None = None) -> None:
        self.database_url = database_url
        self.env = {
            **os.environ, "SKYHUB_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT),
            "SKYHUB_JOBS__ENABLED": "true" if jobs else "false", "SKYHUB_LOG_LEVEL": "WARNING", **(env or {}),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hub", "run", "--port", "0"], cwd=cwd, env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        self.stderr: list[str] = []
        found = threading.Event()
        self.url = ""

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr.append(line)
                m = re.search(r"API on (http://[0-9.]+:\d+)", line)
                if m:
                    self.url = m.group(1)
                    found.set()
            self.proc.stderr.close()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 60
        while not found.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("skyhub run did not start:\n" + "".join(self.stderr))
        self.clock = SYSTEM  # the hub process's clock: the wall clock
        self._admin = open_store(database_url, build_rules(), self.clock)
        self._clients: list[RemoteStore] = []

    def token(self, name: str) -> str:
        """A new token for the person ``name`` (made on the hub's database, as `skyhub user add` does)."""
        return add_user(self._admin, name, clock=self.clock)

    def device(self, name: str, actor: str) -> DeviceAuth:
        """A device key approved as ``actor``, ready to sign requests."""
        key = new_device_key()
        approve_device(self._admin, name, actor, public_key_of(key), clock=self.clock)
        return DeviceAuth(name, key, self.clock)

    def client(self, actor: str) -> RemoteStore:
        """A remote store acting as ``actor``: a token for people, a device key for the rest."""
        kind, name = parse_actor(actor)
        if kind == "admin":
            raise Invalid("admin does not act over the API")
        if kind == "user":
            client = RemoteStore(self.url, TokenAuth(self.token(name)))
        else:
            client = RemoteStore(self.url, self.device(f"{kind}-{name}".lower().replace(":", "-")[:60], actor))
        self._clients.append(client)
        return client

    def close_clients(self) -> None:
        """Close every client ``client()`` made."""
        for client in self._clients:
            client.close()
        self._clients.clear()

    @property
    def admin(self) -> Any:
        """The hub's database opened directly, with every product's rules (writes as ``admin`` need no credential)."""
        return self._admin

    def _drain(self) -> None:
        """After the process ended its stderr is at EOF: wait for the reader to take the rest and close the
        pipe (a pipe left open is a ResourceWarning in whatever test runs when it is collected)."""
        self._reader.join(60)
        if self._reader.is_alive() and self.proc.stderr is not None:
            self.proc.stderr.close()

    def kill(self) -> None:
        """``kill -9`` the hub."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._drain()

    def stop(self) -> int:
        """SIGTERM, then kill after 30 s; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._drain()
        self.close_clients()
        if getattr(self, "_admin", None) is not None:
            self._admin.close()
            self._admin = None
        return int(self.proc.returncode)


class ActorRouter:
    """The store interface over a hub, sending each write with the credential of its actor."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.url = hub.url
        self._clients: dict[str, RemoteStore] = {}
        self._lock = threading.Lock()

    def _for(self, actor: str) -> RemoteStore:
        parse_actor(actor)
        with self._lock:
            if actor not in self._clients:
                self._clients[actor] = self.hub.client(actor)
            return self._clients[actor]

    def _reader(self) -> RemoteStore:
        return self._for("user:reader")

    def put(self, db, doc, id=None, *, actor, if_rev=None, create_only=False):  # noqa: ANN001
        """A write, sent with the credential of ``actor``."""
        return self._for(actor).put(db, doc, id, actor=actor, if_rev=if_rev, create_only=create_only)

    def put_many(self, db, writes, *, actor):  # noqa: ANN001
        """A batch of writes, sent with the credential of ``actor``."""
        return self._for(actor).put_many(db, writes, actor=actor)

    def delete(self, db, id, *, actor, if_rev=None):  # noqa: ANN001
        """A delete, sent with the credential of ``actor``."""
        return self._for(actor).delete(db, id, actor=actor, if_rev=if_rev)

    def __getattr__(self, name: str) -> Any:
        if name in ("get", "query", "by_time", "history", "changes", "head_seq"):
            return getattr(self._reader(), name)
        raise AttributeError(name)

    def close(self) -> None:
        """Close every client it made."""
        for client in self._clients.values():
            client.close()


@contextmanager
def serving(api: Any) -> Iterator[str]:
    """An ASGI app (``hub.webapp.create_api(app)``) served in a thread of this process on a free port, for the
    ``with`` block: its URL. For tests that reach into the hub's objects; ``Hub`` runs a real process."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the API did not start")
        time.sleep(0.02)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)

