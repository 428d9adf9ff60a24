"""What the browser tests share: Debian's chromium (driven by Playwright with ``executable_path``;
nothing is downloaded), where screenshots go, and the vendored axe-core handed to each page."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).parent / "artifacts"
AXE = "/console/static/axe-for-tests.js"  # the hub never serves it: the browser is handed the test's copy at this URL
AXE_JS = (Path(__file__).resolve().parent / "vendor" / "axe-core-4.10.3" / "axe.min.js").read_bytes()
