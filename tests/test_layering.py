"""The product shape, held by a test: no product module reaches past its ledger into the
store or reads the wall clock (ticks and handlers get ``ctx.db`` and ``ctx.now()``, so every
one runs on a fake clock), and the platforms are reached only through ``platforms``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCTS = ("vault", "bot", "publishers")


def modules():
    for package in PRODUCTS:
        yield from sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("path", list(modules()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_product_module_touches_the_store_or_the_wall_clock(path):
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr == "store" and isinstance(node.value, ast.Name) and node.value.id in ("db", "ledger", "self"):
                found.append(f"line {node.lineno}: {node.value.id}.store")
            if node.attr == "clock" and isinstance(node.value, ast.Attribute) and node.value.attr == "store":
                found.append(f"line {node.lineno}: .store.clock")
            if node.attr in ("time", "time_ns") and isinstance(node.value, ast.Name) and node.value.id == "time":
                found.append(f"line {node.lineno}: time.{node.attr}()")
            if node.attr in ("now", "utcnow", "today") and isinstance(node.value, ast.Name) and node.value.id in ("datetime", "date"):
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr}()")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("httpx", "atproto", "atproto_client", "psycopg"):
            if path.name not in ("probe.py", "images.py", "checks.py", "reply.py"):  # the HTTP client itself is passed in
                found.append(f"line {node.lineno}: from {node.module} import ...")
    assert not found, f"{path.relative_to(ROOT)}: " + "; ".join(found)
