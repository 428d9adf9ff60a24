"""PostgreSQL that stalls with its sockets open (a frozen server, a black-holed network):
health answers within its budget with the reason, writes fail with BackendError within the
statement timeout instead of hanging, and everything recovers when traffic flows again."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ledger import SYSTEM, BackendError, Rules, open_store

pytestmark = pytest.mark.slow
STATEMENT_TIMEOUT = 1.0


class Proxy:
    """Forwards a local port to PostgreSQL. ``pause()`` stops forwarding and leaves every
    socket open; ``resume()`` carries on with what was held."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.port = self.server.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.stopped = threading.Event()
        self.sockets: list[socket.socket] = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def pause(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.stopped.set()
        self.flowing.set()
        for s in [self.server, *self.sockets]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                client, _ = self.server.accept()
            except (TimeoutError, OSError):
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self.sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self.stopped.is_set():
                data = src.recv(65536)
                if not data:
                    break
                self.flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def proxied(pg_url):
    proxy = Proxy("127.0.0.1", 5432)
    assert "127.0.0.1:5432" in pg_url
    yield proxy, pg_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    proxy.close()


def eventually(action, timeout=30.0):
    """``action()``'s result once it stops raising BackendError (the pool recovering)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except BackendError:
            assert time.monotonic() < deadline, "did not recover"
            time.sleep(0.2)


def test_a_stalled_database_fails_fast_and_everything_recovers(proxied, pg_url):
    proxy, url = proxied
    store = open_store(url, Rules(), SYSTEM, statement_timeout=STATEMENT_TIMEOUT, connect_timeout=2)
    direct = open_store(pg_url, Rules(), SYSTEM)
    store.listen_check = 0.3
    woken = threading.Event()
    store.subscribe(lambda change: woken.set() if change is None else None)
    try:
        store.put("notes", {"v": 0}, "n0", actor="user:ana")
        woken.clear()
        direct.put("notes", {"v": 1}, "n1", actor="user:ana")
        assert woken.wait(10), "NOTIFY through the proxy never arrived"

        proxy.pause()
        started = time.monotonic()
        with pytest.raises(BackendError) as err:
            store.ping(1.0)
        assert time.monotonic() - started < 2.0
        assert "did not answer within 1 s" in err.value.reason

        failures: list[tuple[float, BackendError]] = []

        def write(i):
            began = time.monotonic()
            try:
                store.put("notes", {"v": i}, f"stalled{i}", actor="user:ana")
            except BackendError as exc:
                failures.append((time.monotonic() - began, exc))

        threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(STATEMENT_TIMEOUT + 10)
        assert not any(t.is_alive() for t in threads), "a write hung on the stalled database"
        assert len(failures) == 4
        assert all(took < STATEMENT_TIMEOUT + 1.5 for took, _ in failures), [took for took, _ in failures]
        time.sleep(1.0)  # the LISTEN connection's check stalls too, and is cut

        proxy.resume()
        eventually(lambda: store.put("notes", {"v": 2}, "n2", actor="user:ana"))
        for i in range(20):  # every pooled connection works again: none stays broken
            store.put("notes", {"v": i}, f"after{i}", actor="user:ana")
            store.get("notes", f"after{i}")
        assert store.ping(1.0) < 1.0

        woken.clear()
        direct.put("notes", {"v": 3}, "n3", actor="user:ana")
        assert woken.wait(20), "the LISTEN connection did not recover"
    finally:
        proxy.resume()
        store.close()
        direct.close()


def test_an_unreachable_database_is_reported_by_ping(pg_url):
    proxy = Proxy("127.0.0.1", 5432)
    url = pg_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    store = open_store(url, Rules(), SYSTEM, statement_timeout=STATEMENT_TIMEOUT, connect_timeout=2)
    try:
        proxy.close()  # nothing listens on the port any more, and open connections end
        started = time.monotonic()
        for _ in range(3):
            with pytest.raises(BackendError) as err:
                store.ping(1.0)
            assert "PostgreSQL" in err.value.reason
        assert time.monotonic() - started < 3 * 2.0
    finally:
        store.close()


def test_connections_killed_by_the_server_are_replaced(pg_url):
    """A restart of PostgreSQL (here: its backends terminated) breaks the idle pooled
    connections; ping tries a fresh one within its budget, and writes carry on."""
    import psycopg

    from tests.conftest import PG_URL

    name = "skyhub-kill-test"
    store = open_store(f"{pg_url}&application_name={name}", Rules(), SYSTEM, statement_timeout=STATEMENT_TIMEOUT)
    try:
        store.put("notes", {"v": 1}, "n1", actor="user:ana")
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s) k",
                (name,),
            ).fetchone()[0]
        assert killed >= 1
        assert store.ping(1.0) < 1.0
        eventually(lambda: store.put("notes", {"v": 2}, "n2", actor="user:ana"))
        assert store.get("notes", "n2")["v"] == 2
    finally:
        store.close()


def test_a_hub_on_a_stalled_database_says_so_fast_and_recovers(proxied, tmp_path):
    """The issue's acceptance, through `skyhub run`: /health within 2 s with the reason, writes
    answered 503 within the statement timeout, traffic again once the database answers."""
    import httpx

    from skyhub_testkit.hub import Hub

    proxy, url = proxied
    hub = Hub(url, tmp_path, jobs=False, env={"SKYHUB_STORE__STATEMENT_TIMEOUT": f"{STATEMENT_TIMEOUT}s",
                                              "SKYHUB_STORE__CONNECT_TIMEOUT": "2s"})
    try:
        http = httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {hub.token('ana')}"}, timeout=30)
        assert http.put("/v1/db/notes/docs/before", json={"v": 1}).status_code == 200
        proxy.pause()
        started = time.monotonic()
        health = http.get("/health")
        assert time.monotonic() - started < 2.0 and health.status_code == 503
        assert health.json()["store"]["ok"] is False and health.json()["store"]["error"]
        started = time.monotonic()
        write = http.put("/v1/db/notes/docs/during", json={"v": 2})
        assert write.status_code == 503 and write.json()["error"] == "backend", write.text
        assert time.monotonic() - started < STATEMENT_TIMEOUT + 4.0
        proxy.resume()
        deadline = time.monotonic() + 30
        while http.put("/v1/db/notes/docs/after", json={"v": 3}).status_code != 200:
            assert time.monotonic() < deadline, "the hub did not recover"
            time.sleep(0.2)
        assert http.get("/health").json()["store"]["ok"] is True
        http.close()
    finally:
        hub.stop()
