"""One settings object: defaults in ``config/skyhub.toml`` (shipped inside the package), then a
user's file (``--config`` / ``SKYHUB_CONFIG``), then ``SKYHUB_*`` environment variables
(nested with ``__``, e.g. ``SKYHUB_FEED__LEASE=5s``). The layers are read by ``hub.config``.

Files are merged key by key: a user's file that sets one key of a table keeps every other
key of that table from the defaults. The engine's own sections are declared here; each
product adds its section (``Product.settings``), so the settings model is composed from the
products the hub knows, like everything else.
"""

from __future__ import annotations

import functools
import json
import os
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, create_model
from pydantic.fields import FieldInfo

from ledger import Usage, parse_interval
from ledger.section import Interval, Section
from ledger.text import duration
from platforms.settings import FetchSettings, PlatformSettings

from .config import default_actor, layers, merge, merged
from .products import products

PREFIX = "SKYHUB_"
NESTED = "__"  # SKYHUB_FEED__LEASE is [feed] lease

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


class Settings(BaseModel):
    """The engine's and the hub's settings; product sections are added by ``settings_model``."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True, validate_default=True)

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


def load_settings(config: str | None = None, **overrides: Any) -> Settings:
    """Read the settings; ``config`` is a user's TOML file layered over the defaults.

    Where settings come from, the first that sets one winning: ``overrides`` (the CLI's options),
    ``SKYHUB_*`` environment variables, then the TOML files (``config/skyhub.toml`` under the user's
    file), merged table by table. No .env file, no secrets directory.

    Raises ``Usage`` with one sentence per problem (an unknown key, a moved key, a bad value).
    """
    model = settings_model()
    data = toml_input(model, layers(config))
    merge(data, env_input(model, os.environ))
    merge(data, {k: v for k, v in overrides.items() if v is not None})
    try:
        settings: Settings = model(**data)
    except ValidationError as exc:
        raise Usage("the settings are not valid: " + "; ".join(_problems(exc))) from None
    if not settings.actor:
        settings.actor = default_actor()
    return settings


def toml_input(model: type[BaseModel], files: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The TOML files merged key by key (a later file overrides only the keys it sets). The root ignores
    unknown ``SKYHUB_*`` variables (other tools share the prefix), but a file names only settings."""
    data = merged(files)
    unknown = sorted(set(data) - set(model.model_fields))
    if unknown:
        where = files[-1][0]
        moved = MOVED.get(unknown[0])
        raise Usage(f"the settings are not valid: {unknown[0]} is {'now ' + moved if moved else 'not a setting'} "
                    f"(in {where}; every setting is listed in docs/reference/settings.md)")
    return data


def env_input(model: type[BaseModel], environ: Mapping[str, str]) -> dict[str, Any]:
    """What ``SKYHUB_*`` variables set, as the model's input: names are not case-sensitive; ``__`` nests
    (``SKYHUB_FEED__LEASE`` is ``feed.lease``); a section, list or table is JSON (``SKYHUB_STORE__INDEXES=
    '{"mentions": ["status"]}'``), merged with the nested variables under it; variables that name no
    setting at the root are left alone (other tools share the prefix)."""
    env = {k.lower(): v for k, v in environ.items() if k.upper().startswith(PREFIX)}
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = PREFIX.lower() + name
        target = field.annotation
        if key in env:
            out[name] = _from_env(env[key], target, key, strict=True)
        if not _is_complex(target):
            continue
        nested = sorted((k[len(key) + len(NESTED):], v) for k, v in env.items() if k.startswith(key + NESTED))
        if not nested:
            continue
        into = out[name] if isinstance(out.get(name), dict) else {}
        for path, value in nested:
            _place(into, [p for p in path.split(NESTED) if p], target, value, key + NESTED + path)
        out[name] = into
    return out


def _place(into: dict[str, Any], path: list[str], target: Any, value: str, var: str) -> None:
    """Put one nested variable's value at ``path`` under ``into`` (the input of ``target``)."""
    if not path:
        return
    step, rest = path[0], path[1:]
    inner, strict = _step(target, step)
    if not rest:
        parsed = _from_env(value, inner, var, strict=strict)
        if isinstance(parsed, dict) and isinstance(into.get(step), dict):
            merge(into[step], parsed)
        else:
            into[step] = parsed
        return
    child = into.get(step)
    if not isinstance(child, dict):
        child = into[step] = {}
    _place(child, rest, inner, value, var)


def _step(target: Any, key: str) -> tuple[Any, bool]:
    """The type a key under ``target`` holds and whether it is a declared field (a model's: JSON is read
    strictly) rather than a table's value or something unknown (JSON if it reads as JSON, else the text)."""
    target = _unwrap(target)
    if isinstance(target, type) and issubclass(target, BaseModel):
        field = target.model_fields.get(key)
        return (field.annotation, True) if field is not None else (None, False)
    if typing.get_origin(target) is dict:
        args = typing.get_args(target)
        return (args[1] if len(args) == 2 else None), False
    return None, False


def _from_env(value: str, target: Any, var: str, *, strict: bool) -> Any:
    """A variable's text as the input for ``target``: JSON for a section, a list or a table, else the text."""
    if target is None and not strict:
        try:
            return json.loads(value)
        except ValueError:
            return value
    if not _is_complex(target):
        return value
    try:
        return json.loads(value)
    except ValueError:
        if not strict:
            return value
        raise Usage(f"the settings are not valid: {var.upper()} must be JSON (a list like [\"a\", \"b\"] or a "
                    f"table like {{\"key\": \"value\"}}), or set its keys one by one ({var.upper()}{NESTED}KEY)") from None


def _unwrap(target: Any) -> Any:
    """``X`` from ``Annotated[X, ...]`` and ``X | None``."""
    while typing.get_origin(target) is typing.Annotated:
        target = typing.get_args(target)[0]
    if typing.get_origin(target) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(target) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0])
    return target


def _is_complex(target: Any) -> bool:
    """Whether a variable for ``target`` is JSON: a section (a model), a list, a set, a tuple or a table."""
    target = _unwrap(target)
    if typing.get_origin(target) in (typing.Union, types.UnionType):
        return any(_is_complex(a) for a in typing.get_args(target))
    if isinstance(target, type) and issubclass(target, BaseModel):
        return True
    return (typing.get_origin(target) or target) in (list, dict, set, frozenset, tuple)


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
