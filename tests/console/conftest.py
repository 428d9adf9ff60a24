"""A real `skyhub run` with a vault key, and a console client that signs in like a browser
(cookies, the CSRF value from each form)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from skyhub_testkit.hub import Hub
from vault import new_key_text

from .chromium import ARTIFACTS, CHROMIUM, FLAGS

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, "the page has no form with a CSRF value"
    return found.group(1)


class Console:
    """The console over HTTP as one person's browser would use it."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, follow_redirects=False, timeout=30)

    def sign_in(self, token: str) -> httpx.Response:
        page = self.http.get("/console/sign-in")
        return self.http.post("/console/sign-in", data={"csrf": csrf_of(page.text), "token": token, "next": "/"})

    def csrf(self, path: str = "/") -> str:
        return csrf_of(self.http.get(path).text)

    def post(self, path: str, data: dict[str, str], *, form_page: str = "/", **kwargs: object) -> httpx.Response:
        return self.http.post(path, data={"csrf": self.csrf(form_page), **data}, **kwargs)  # type: ignore[arg-type]

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def key_text() -> str:
    return new_key_text()


@pytest.fixture
def hub(tmp_path: Path, key_text: str) -> Iterator[Hub]:
    hub = Hub(f"sqlite:///{tmp_path}/skyhub.db", tmp_path, env={"SKYHUB_VAULT_KEY": key_text})
    yield hub
    hub.stop()


@pytest.fixture
def console(hub: Hub) -> Iterator[Console]:
    c = Console(hub.url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless chromium, one per test module."""
    from playwright.sync_api import sync_playwright

    assert shutil.which(CHROMIUM) or Path(CHROMIUM).exists(), "Debian's chromium is missing: ./dev test installs it"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def signed_in(hub: Hub, name: str) -> Iterator[tuple[Hub, Console]]:
    """A fixture's body: ``hub`` with a console signed in as ``name``, both stopped afterwards."""
    console = Console(hub.url)
    try:
        console.sign_in(hub.token(name))
        yield hub, console
    finally:
        console.close()
        hub.stop()
