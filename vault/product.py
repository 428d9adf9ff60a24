"""What the vault adds to a hub: the credential machine and its tick, and egress probes.

Light to import: the ticks' modules are imported by the factories below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger import ADMIN, Policy, Product, Tick, tick, user

from .credentials import CREDENTIALS, DB
from .probe import DB as PROBES

if TYPE_CHECKING:
    from .settings import ProbeSettings, VaultSettings


def _vault_ticks(section: VaultSettings) -> Sequence[Tick]:
    from .rotation import maintain

    return [Tick("vault", section.every, maintain, settings=section)]


def _probe_ticks(section: ProbeSettings) -> Sequence[Tick]:
    if not section.lanes:
        return []
    from .probe import probe_tick

    return [Tick("probe", section.every, probe_tick, settings=section)]


VAULT = Product(
    "vault", "The write-only vault: sealed credentials, verified, rotated and flagged by its tick.",
    machines=[CREDENTIALS],
    indexes=[(DB, "kind")],
    settings="vault.settings:VaultSettings",
    ticks=_vault_ticks,
    tick_help={"vault": "verifies fresh pastes, rotates tokens before they expire, keeps Bluesky sessions alive, flags dead credentials"},
    cli={"vault": "vault.cli:vault_group"},
    api="vault.api:vault_router",
    api_paths=("/v1/vault",),  # its router is made on the first request under these (hub/webapp.py)
    services="vault.services:offered",
    private={DB: "is reachable only through /v1/vault (metadata, never secrets)"},
    pages="vault.pages:credential_pages",
    nav=(("/console/credentials", "Credentials"),),
    templates="vault",
    redact={DB: ("sealed",)},
    metrics="vault.metrics:metrics",
)

PROBE = Product(
    "probe", "Egress probes: one document per API lane in `probes`.",
    policies=[Policy(PROBES, free=(tick("probe"), user(), ADMIN), blind=(user(), ADMIN))],
    settings="vault.settings:ProbeSettings",
    ticks=_probe_ticks,
    tick_help={"probe": "one cheap request per configured lane (runs once [probe.lanes] names one)"},
    services="vault.services:probe_offered",
)

PRODUCTS = (VAULT, PROBE)
