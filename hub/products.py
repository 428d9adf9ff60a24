"""The products this hub knows. Adding a product is adding its declaration module here.

Each module exports ``PRODUCTS``, a tuple of ``ledger.Product`` declarations. Declaration
modules are light (machines, a settings section, factories): what a product runs (the Bluesky
adapter, say) is imported by its factories only when the product is configured.
"""

from __future__ import annotations

import functools
import importlib

from ledger import Product

DECLARATIONS = (
    "ledger.jobs",       # the reference jobs machine
    "vault.product",     # credentials, their rotation tick, egress probes
    "bot.product",       # mention builds
    "publishers.product",  # queued posts to Instagram, Threads and Bluesky
)


@functools.cache
def products() -> tuple[Product, ...]:
    """Every declared product, in the order above."""
    out: list[Product] = []
    for module in DECLARATIONS:
        out.extend(importlib.import_module(module).PRODUCTS)
    names = [p.name for p in out]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise RuntimeError(f"two products share the name {sorted(duplicates)[0]!r}: names are settings sections")
    return tuple(out)
