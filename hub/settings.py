"""One settings object: defaults in config/skyhub.toml, then a user's file (--config /
SKYHUB_CONFIG), then SKYHUB_* environment variables (nested with __, e.g. SKYHUB_FEED__LEASE)."""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, TomlConfigSettingsSource

from ledger import parse_interval

DEFAULTS = Path(__file__).resolve().parent.parent / "config" / "skyhub.toml"


def _seconds(value: Any) -> float:
    return parse_interval(value)


class FeedSettings(BaseModel):
    lease: float = 10.0
    batch_size: int = 10
    handler_timeout: float = 900.0
    max_tries: int = 5
    backoff: float = 1.0

    _to_seconds = field_validator("lease", "handler_timeout", "backoff", mode="before")(_seconds)


class SweepSettings(BaseModel):
    safety_interval: float = 30.0

    _to_seconds = field_validator("safety_interval", mode="before")(_seconds)


class JobsSettings(BaseModel):
    enabled: bool = True  # run the reference jobs handler in `skyhub run`
    lease: float = 30.0

    _to_seconds = field_validator("lease", mode="before")(_seconds)


class VaultSettings(BaseModel):
    key_file: str = ""                 # or SKYHUB_VAULT_KEY_FILE / SKYHUB_VAULT_KEY / the OS keyring
    every: float = 60.0                # the vault tick
    refresh_after: float = 7 * 86400.0  # Meta long-lived tokens older than this are refreshed
    min_age: float = 86400.0           # ... never before they are a day old
    bluesky_refresh_before: float = 900.0
    create_session_budget: int = 10    # Bluesky createSession fallbacks per UTC day
    retries: int = 3
    retry_wait: float = 0.5
    bluesky_pds: str = "https://bsky.social"
    instagram_url: str = "https://graph.instagram.com"
    threads_url: str = "https://graph.threads.net"
    graph_url: str = "https://graph.facebook.com/v21.0"

    _to_seconds = field_validator("every", "refresh_after", "min_age", "bluesky_refresh_before", "retry_wait", mode="before")(_seconds)


class BotSettings(BaseModel):
    handle: str = ""                    # the bot's account; its app password goes in the vault
    pds: str = "https://bsky.social"
    ingest_every: float = 30.0
    reply_every: float = 30.0
    guardrails: str = ""                # default: config/guardrails.toml
    reply_template: str = "Your build is ready: {url}"
    codegen: str = "python -m bot.codegen"
    build_lease: float = 900.0
    build_timeout: float = 600.0

    _to_seconds = field_validator("ingest_every", "reply_every", "build_lease", "build_timeout", mode="before")(_seconds)


class ProbeSettings(BaseModel):
    every: float = 300.0
    lanes: dict[str, str] = {}         # name -> URL; none by default: configure the lanes you use

    _to_seconds = field_validator("every", mode="before")(_seconds)


# ---- the HTTP server's limits (hub/server.py, hub/gate.py, hub/stream.py) ----------------
class HttpSettings(BaseModel):
    header_timeout: float = 10.0    # a request line and its headers must arrive within this
    body_timeout: float = 30.0      # ... and its body (at most 1 MiB) within this after them
    keep_alive: float = 5.0         # an idle keep-alive connection is closed after this
    max_connections: int = 1000     # open connections, change streams included; beyond, 503
    threads: int = 16               # requests served at once; each thread holds a database connection
    stream_queue: int = 1000        # changes waiting for one slow change stream before it is dropped
    stream_keepalive: float = 15.0  # a comment line on a quiet change stream, this often

    _to_seconds = field_validator("header_timeout", "body_timeout", "keep_alive", "stream_keepalive", mode="before")(_seconds)


def default_actor() -> str:
    try:
        name = getpass.getuser()
    except Exception:  # no user database entry (containers)
        name = "operator"
    return f"user:{name}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SKYHUB_", env_nested_delimiter="__", extra="ignore")

    database_url: str = "sqlite:///skyhub.db"
    host: str = "127.0.0.1"
    port: int = 8470
    hub_url: str = ""
    token: SecretStr = SecretStr("")
    device: str = ""
    device_key: SecretStr = SecretStr("")  # the PEM itself, e.g. from a CI secret
    device_key_file: str = ""
    actor: str = ""
    log_level: str = "INFO"
    public_url: str = ""  # the URL devices sign for (SKYHUB_PUBLIC_URL); default http://HOST:PORT as bound
    http: HttpSettings = HttpSettings()
    feed: FeedSettings = FeedSettings()
    sweep: SweepSettings = SweepSettings()
    jobs: JobsSettings = JobsSettings()
    vault: VaultSettings = VaultSettings()
    probe: ProbeSettings = ProbeSettings()
    bot: BotSettings = BotSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


def load_settings(config: str | None = None, **overrides: Any) -> Settings:
    """Read the settings; ``config`` is a user's TOML file layered over the defaults."""
    path = config or os.environ.get("SKYHUB_CONFIG")
    files = [DEFAULTS]
    if path:
        if not Path(path).is_file():
            raise FileNotFoundError(f"config file {path!r} does not exist")
        files.append(Path(path))

    class _Layered(Settings):
        model_config = SettingsConfigDict(**{**Settings.model_config, "toml_file": files})

    settings: Settings = _Layered(**{k: v for k, v in overrides.items() if v is not None})
    if not settings.actor:
        settings.actor = default_actor()
    return settings
