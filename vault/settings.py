"""``[vault]`` and ``[probe]``: the vault's settings sections (loaded when the settings are read)."""

from __future__ import annotations

from ledger.section import Interval, Section


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
