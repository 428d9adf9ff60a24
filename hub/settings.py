"""One settings object: defaults in ``config/skyhub.toml`` (shipped inside the package), then a
user's file (``--config`` / ``SKYHUB_CONFIG``), then ``SKYHUB_*`` environment variables
(nested with ``__``, e.g. ``SKYHUB_FEED__LEASE=5s``). The layers are read by ``hub.config``.

Files are merged key by key: a user's file that sets one key of a table keeps every other
key of that table from the defaults. The engine's own sections are declared here; each
product adds its section (``Product.settings``), so the settings model is composed from the
products the hub knows, like everything else.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator
from typing import Any

from pydantic import SecretStr, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ledger import Usage, parse_interval
from ledger.section import Interval, Section
from ledger.text import duration
from platforms.settings import FetchSettings, PlatformSettings

from .config import default_actor, layers, merged
from .products import products

_LAYERS: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar("skyhub_settings_layers", default=())

# Settings that moved: a file or variable that still uses the old name gets told the new one.
MOVED = {
    "bot.pds": "platforms.bluesky_pds (one Bluesky setting for the vault, the bot and the publishers)",
    "vault.bluesky_pds": "platforms.bluesky_pds",
    "vault.instagram_url": "platforms.instagram_url",
    "vault.threads_url": "platforms.threads_url",
    "vault.graph_url": "platforms.facebook_url and platforms.graph_version",
}


class FeedSettings(Section):
    """``[feed]``: the change feed."""

    lease: Interval = 10.0
    """how long a batch stays with a process that stopped answering"""
    batch_size: int = 10
    """changes handed to a handler per batch"""
    handler_timeout: Interval = 900.0
    """a handler running longer is retried"""
    max_tries: int = 5
    """tries before a change goes to a dead letter in `deadletters`"""
    backoff: Interval = 1.0
    """first retry delay; doubles on every try"""


class SweepSettings(Section):
    """``[sweep]``: taking back expired leases."""

    safety_interval: Interval = 30.0
    """the sweep wakes at the earliest lease, and at least this often"""


class ActivitySettings(Section):
    """``[activity]``: the console's Activity page."""

    samples_kept: Interval = 86_400.0
    """how long the queue depth samples are kept (one a minute, written by the `sample` tick into the `samples` database as a ring: at most this many minutes of documents, at least an hour)"""


class StoreSettings(Section):
    """``[store]``: how the hub holds its database."""

    pool_size: int = 0
    """connections kept per process (0: 8 for SQLite, 10 for PostgreSQL)"""
    statement_timeout: Interval = 5.0
    """PostgreSQL: a statement running longer fails (a stalled database makes writes fail, not hang)"""
    connect_timeout: Interval = 5.0
    """PostgreSQL: the time limit of opening a connection"""
    indexes: list[str] = []
    """more fields to index, as `"db.field"` (the products declare what they query; `skyhub db index add` adds at run time)"""


class HttpSettings(Section):
    """``[http]``: the limits of the HTTP server (hub/server.py, hub/gate.py, hub/stream.py)."""

    header_timeout: Interval = 10.0
    """a request line and its headers must arrive within this"""
    body_timeout: Interval = 30.0
    """... and its body (at most 1 MiB) within this after them (else 408)"""
    keep_alive: Interval = 5.0
    """an idle keep-alive connection is closed after this"""
    max_connections: int = 1000
    """open connections, change streams included; beyond, new ones are refused with 503"""
    threads: int = 16
    """requests served at once; each holds a database connection while it runs"""
    stream_queue: int = 1000
    """changes waiting for one slow change stream before that stream is dropped with a reason"""
    stream_keepalive: Interval = 15.0
    """a comment line on a quiet change stream, this often"""
    trusted_proxies: list[str] = []
    """addresses of reverse proxies whose X-Forwarded-For and X-Forwarded-Proto headers the hub believes (`["127.0.0.1"]` for a proxy on the same machine); none by default, so a client cannot pose as another address"""
    metrics_from_loopback: bool = False
    """serve `/metrics` without a token to requests from this machine's loopback address; off by default, because a reverse proxy on the same machine makes every outside request come from loopback (leave it off behind one, or list the proxy in trusted_proxies)"""


class Settings(BaseSettings):
    """The engine's and the hub's settings; product sections are added by ``settings_model``."""

    model_config = SettingsConfigDict(
        env_prefix="SKYHUB_", env_nested_delimiter="__", extra="ignore", use_attribute_docstrings=True,
    )

    database_url: str = "sqlite:///skyhub.db"
    """the store: `sqlite:///skyhub.db` (relative) or `sqlite:////var/lib/skyhub/skyhub.db` (absolute); `postgresql://user@host:5432/db` to scale out"""
    host: str = "127.0.0.1"
    """where `skyhub run` serves the API"""
    port: int = 8470
    """the API's port (0 picks a free one)"""
    hub_url: str = ""
    """work against a hub over HTTP instead of a local database (CLI)"""
    token: SecretStr = SecretStr("")
    """a person's token for `hub_url`"""
    device: str = ""
    """sign requests to `hub_url` as this device"""
    device_key: SecretStr = SecretStr("")
    """the device's private key itself (PEM), e.g. from a CI secret"""
    device_key_file: str = ""
    """the device's private key file"""
    actor: str = ""
    """who the local CLI writes as (default `user:$USER`)"""
    log_level: str = "INFO"
    """DEBUG, INFO, WARNING or ERROR"""
    public_url: str = ""
    """the URL devices reach this hub at and sign for (default `http://HOST:PORT` as bound; set it behind a proxy)"""
    http: HttpSettings = HttpSettings()
    store: StoreSettings = StoreSettings()
    feed: FeedSettings = FeedSettings()
    sweep: SweepSettings = SweepSettings()
    activity: ActivitySettings = ActivitySettings()
    platforms: PlatformSettings = PlatformSettings()
    fetch: FetchSettings = FetchSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Where settings come from, the first that sets one winning: the arguments given (the CLI's options),
        SKYHUB_* environment variables, then the TOML files (``config/skyhub.toml`` under the user's file).
        No .env file, no secrets directory."""
        return (init_settings, env_settings, _MergedToml(settings_cls, _LAYERS.get()))

    def section(self, name: str) -> Any:
        """A product's settings section (``bot``, ``vault``, ...)."""
        return getattr(self, name)


@functools.cache
def settings_model() -> type[Settings]:
    """``Settings`` with one section per product the hub knows."""
    sections: dict[str, Any] = {}
    for p in products():
        model = p.section_model()
        if model is not None:
            sections[p.name] = (model, FieldInfo(default_factory=model, description=p.summary))
    return create_model("SkyhubSettings", __base__=Settings, __doc__=Settings.__doc__, **sections)


class _MergedToml(PydanticBaseSettingsSource):
    """The TOML files, merged key by key (a later file overrides only the keys it sets)."""

    def __init__(self, settings_cls: type[BaseSettings], files: tuple[tuple[str, str], ...]) -> None:
        super().__init__(settings_cls)
        self.data = merged(files)
        # the root ignores unknown SKYHUB_* variables (other tools share the prefix), but a file names only settings
        unknown = sorted(set(self.data) - set(settings_cls.model_fields))
        if unknown:
            where = files[-1][0]
            moved = MOVED.get(unknown[0])
            raise Usage(f"the settings are not valid: {unknown[0]} is {'now ' + moved if moved else 'not a setting'} "
                        f"(in {where}; every setting is listed in docs/reference/settings.md)")

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover - unused
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self.data


def load_settings(config: str | None = None, **overrides: Any) -> Settings:
    """Read the settings; ``config`` is a user's TOML file layered over the defaults.

    Raises ``Usage`` with one sentence per problem (an unknown key, a moved key, a bad value).
    """
    token = _LAYERS.set(layers(config))
    try:
        settings: Settings = settings_model()(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise Usage("the settings are not valid: " + "; ".join(_problems(exc))) from None
    finally:
        _LAYERS.reset(token)
    if not settings.actor:
        settings.actor = default_actor()
    return settings


def _problems(exc: ValidationError) -> Iterator[str]:
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()))
        if error.get("type") == "extra_forbidden":
            refusal = _refused(where)
            if refusal is not None:
                yield f"{where}: {refusal}"
                continue
            moved = MOVED.get(where)
            yield f"{where} is {'now ' + moved if moved else 'not a setting'} ({_env_name(where)} / [{where.rpartition('.')[0]}] in a settings file)"
        else:
            yield f"{where}: {error.get('msg', 'is not valid')} (got {error.get('input')!r})"


def _refused(dotted: str) -> str | None:
    """The sentence a section gives for a key it refuses (``Section.refused``), or None."""
    section, _, key = dotted.partition(".")
    field = settings_model().model_fields.get(section)
    model = field.annotation if field is not None else None
    if isinstance(model, type) and issubclass(model, Section):
        return model.refused.get(key)
    return None


def _env_name(dotted: str) -> str:
    return "SKYHUB_" + dotted.upper().replace(".", "__")


def _shown(field: FieldInfo, default: Any) -> str:
    if isinstance(default, SecretStr) or default in ("", None):
        return "unset"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, dict):
        return "none" if not default else ", ".join(f"{k} = {v}" for k, v in default.items())
    if any(getattr(getattr(m, "func", None), "__wrapped__", None) is parse_interval for m in field.metadata):
        return f"`{duration(float(default))}`"
    return f"`{default}`"


def describe() -> list[tuple[str, str, str, str]]:
    """Every setting as (dotted name, default as shown, environment variable, meaning), for the README."""
    rows: list[tuple[str, str, str, str]] = []

    def walk(model: type[Any], prefix: str) -> None:
        for name, field in model.model_fields.items():
            annotation = field.annotation
            dotted = f"{prefix}{name}"
            if isinstance(annotation, type) and issubclass(annotation, Section):
                walk(annotation, dotted + ".")
                continue
            default = field.get_default(call_default_factory=True)
            rows.append((dotted, _shown(field, default), _env_name(dotted), (field.description or "").strip()))

    walk(settings_model(), "")
    return rows


__all__ = ["FeedSettings", "FetchSettings", "HttpSettings", "PlatformSettings", "Settings", "StoreSettings", "SweepSettings", "describe", "load_settings", "settings_model"]
