"""The load check: a page is opened in headless chromium and must load without a JavaScript
error, without trying to load anything, and without breaking its Content-Security-Policy.

The browser is one already installed (Debian's ``chromium``, or Google Chrome on a GitHub
runner), driven by Playwright; nothing is downloaded. The page is served to it at a made-up
https origin by the check itself, every other request is refused and counted, and host names
resolve to nothing, so the check reaches no network. Without Playwright or a browser the check
is skipped, and the result says why (``Browser.find``).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
ORIGIN = "https://page.skyhub.invalid/"
FLAGS = ["--headless", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-default-apps", "--host-resolver-rules=MAP * ~NOTFOUND"]
SETTLE_MS = 300  # after "load": timers and handlers that run at once get to throw


class Browser:
    """Headless chromium at ``executable``, started on the first check and kept for the next ones; ``close()`` ends it."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self._playwright: Any = None
        self._browser: Any = None

    def __repr__(self) -> str:
        return f"<Browser {self.executable}>"

    @classmethod
    def find(cls, setting: str) -> tuple[Browser | None, str]:
        """The browser ``codegen.browser`` names (empty: the first candidate on the PATH), or None and why not."""
        if setting.strip().lower() == "off":
            return None, "skipped: codegen.browser is off"
        try:
            import playwright.sync_api  # noqa: F401 - only asking whether it is there
        except ImportError:
            return None, "skipped: Playwright is not installed (pip install 'skyhub[browser]')"
        names = (setting,) if setting else CANDIDATES
        for name in names:
            found = shutil.which(name) or (name if os.path.isfile(name) and os.access(name, os.X_OK) else None)
            if found:
                return cls(found), ""
        wanted = f"codegen.browser {setting!r} is not an executable" if setting else f"none of {', '.join(CANDIDATES)} is on the PATH"
        return None, f"skipped: no browser ({wanted})"

    def _start(self, timeout_ms: float) -> Any:
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            # chromium's sandbox needs an unprivileged user; as root (a container) it cannot run with it
            flags = FLAGS + (["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])
            self._browser = self._playwright.chromium.launch(executable_path=self.executable, args=flags, timeout=timeout_ms)
        return self._browser

    def problem(self, page: str, timeout_s: float = 20.0) -> str | None:
        """None when ``page`` loads cleanly; else what went wrong, as one sentence."""
        from playwright.sync_api import Error as PlaywrightError

        timeout_ms = max(1000.0, timeout_s * 1000)
        errors: list[str] = []
        blocked: list[str] = []
        requests: list[str] = []
        try:
            browser = self._start(timeout_ms)
            context = browser.new_context(viewport={"width": 390, "height": 844}, service_workers="block")
        except PlaywrightError as exc:
            return f"the browser could not start ({_first_line(str(exc))})"
        try:
            def route(r: Any) -> None:
                if r.request.url == ORIGIN:
                    r.fulfill(status=200, content_type="text/html; charset=utf-8", body=page)
                else:
                    requests.append(r.request.url)
                    r.abort()

            def console(message: Any) -> None:
                if message.type == "error" and "Content Security Policy" in message.text:
                    blocked.append(message.text)

            context.route("**/*", route)
            tab = context.new_page()
            tab.on("pageerror", lambda exc: errors.append(_first_line(str(getattr(exc, "message", exc)))))
            tab.on("console", console)
            tab.goto(ORIGIN, wait_until="load", timeout=timeout_ms)
            tab.wait_for_timeout(SETTLE_MS)
        except PlaywrightError as exc:
            return f"the page did not load in the browser ({_first_line(str(exc))})"
        finally:
            try:
                context.close()
            except PlaywrightError:
                pass
        if errors:
            return f"the page throws a JavaScript error when it loads: {errors[0][:200]}"
        if requests:
            return f"the page tried to load {requests[0][:100]}: pages load nothing"
        if blocked:
            return f"the page broke its Content-Security-Policy: {blocked[0][:200]}"
        return None

    def close(self) -> None:
        """Stop the browser (when it was started)."""
        if self._browser is not None:
            try:
                self._browser.close()
            finally:
                self._playwright.stop()
                self._browser = self._playwright = None


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]


__all__ = ["Browser"]
