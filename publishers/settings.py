"""``[publish]``: the publishers' settings section (loaded when the settings are read)."""

from __future__ import annotations

from ledger.section import Interval, Section


class PublishSettings(Section):
    """``[publish]``: queued posts to Instagram, Threads and Bluesky."""

    every: Interval = 30.0
    """the publish tick: one step per queued post per run"""
    accounts: dict[str, str] = {}
    """the account a post goes to without --account, per platform: `ig = "17841400000000000"`, `threads = "..."`, `bsky = "shop.bsky.social"`"""
    image_hosts: list[str] = []
    """hosts images may come from (empty: any host with a public address; see [fetch])"""
    devices: list[str] = []
    """device actors allowed to queue posts, as `["device:scheduler"]` (none by default: only people queue posts, so a leaked CI key cannot post)"""
    require_review: bool = False
    """every post of an editor (and of a device) waits for an approver: it is created in review or as a draft, never queued directly; approvers and admins queue directly (roles: `skyhub user add NAME --role`)"""
    status_checks: int = 5
    """checks of a container that is still IN_PROGRESS, a minute apart, before it is recreated"""
    check_every: Interval = 60.0
    """the wait between those checks"""
    republish_after: Interval = 60.0
    """an unfinished call older than this is resolved: a publish is read back and, still FINISHED, tried again (an attempt); containers are made again; a Bluesky post is read back under its record key"""
    containers_per_day: int = 400
    """containers an Instagram or Threads account may create in 24 hours (Meta's limit: 400)"""
    quota_wait: Interval = 3600.0
    """a post whose account has used its publishing limit (Instagram 100, Threads 250 posts in 24 hours) is tried again this much later"""
    rate_limit_wait: Interval = 900.0
    """an account that hit a rate limit (or reports over 90 % of one used) waits this long when the platform names no reset time"""
    retries: int = 3
    """tries of a read (status, limit, permalink) that timed out or answered 5xx; calls that create or publish are never repeated"""
    retry_wait: Interval = 0.5
    """first wait between those tries; it doubles"""
    thumbnail_cache_bytes: int = 16 * 1024 * 1024
    """memory for the console's thumbnails of posts' images, per hub process (the least recently shown go first; 0 keeps none)"""

    def credentials(self) -> list[tuple[tuple[str, ...], str]]:
        """The vault credentials these settings name, for the vault's list of missing ones (``vault.wanted``):
        each as the vault ids any one of which will do (an Instagram account: Instagram or Facebook Login)."""
        from .tick import candidates
        from .validate import CREDENTIAL_PLATFORM

        return [(tuple(candidates(platform, account)), f"publish.accounts.{platform}")
                for platform, account in sorted(self.accounts.items()) if platform in CREDENTIAL_PLATFORM and account]
