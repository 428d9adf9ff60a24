"""What the vault adds to a hub: the credential machine and its tick, and egress probes.

Light to import: the ticks' modules are imported by the factories below.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger import ADMIN, Interval, Policy, Product, Section, Tick, tick, user

from .credentials import CREDENTIALS, DB
from .probe import DB as PROBES


class VaultSettings(Section):
    """``[vault]``: the write-only vault and its tick."""

    key_file: str = ""
    """the master key file, mode 0600 (or SKYHUB_VAULT_KEY, SKYHUB_VAULT_KEY_FILE, the OS keyring)"""
    every: Interval = 60.0
    """the vault tick: verify fresh pastes, rotate tokens, flag dead ones (it also keeps the bot's Bluesky session alive)"""
    refresh_after: Interval = 7 * 86400.0
    """Meta long-lived tokens older than this are refreshed"""
    min_age: Interval = 86400.0
    """... but never before they are this old"""
    bluesky_refresh_before: Interval = 900.0
    """a Bluesky session is refreshed this long before its access token expires"""
    create_session_budget: int = 10
    """Bluesky createSession fallbacks per UTC day (a network failure spends none)"""
    retries: int = 3
    """tries of a platform call that timed out or answered 5xx/429"""
    retry_wait: Interval = 0.5
    """first wait between those tries; it doubles"""


class ProbeSettings(Section):
    """``[probe]``: egress probes, one cheap request per API lane you use."""

    every: Interval = 300.0
    """how often each lane is probed"""
    timeout: Interval = 5.0
    """a lane that takes longer is down"""
    lanes: dict[str, str] = {}
    """lane name -> URL (none by default: configure the lanes you use, e.g. `bluesky-pds = "https://bsky.social/xrpc/_health"`)"""


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
    settings=VaultSettings,
    ticks=_vault_ticks,
    tick_help={"vault": "verifies fresh pastes, rotates tokens before they expire, keeps Bluesky sessions alive, flags dead credentials"},
    cli={"vault": "vault.cli:vault_group"},
)

PROBE = Product(
    "probe", "Egress probes: one document per API lane in `probes`.",
    policies=[Policy(PROBES, free=(tick("probe"), user(), ADMIN), blind=(user(), ADMIN))],
    settings=ProbeSettings,
    ticks=_probe_ticks,
    tick_help={"probe": "one cheap request per configured lane (runs once [probe.lanes] names one)"},
)

PRODUCTS = (VAULT, PROBE)
