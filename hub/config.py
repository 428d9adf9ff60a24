"""Where settings come from, and the few the CLI needs before anything else.

The layers, lowest first: ``config/skyhub.toml`` (shipped inside the package), a user's file
(``--config`` / ``SKYHUB_CONFIG``, else ``skyhub.toml`` in the current folder when there is one),
``SKYHUB_*`` environment variables (nested with ``__``), the command line. TOML files merge key
by key.

``hub.settings`` reads every setting through pydantic (with product sections, validation and
the messages). A command that only reads the ledger needs a handful of them (the database,
the hub to talk to and its credential, who writes), and pydantic with every product's settings
model is the largest import of a start: ``core()`` reads those from the same layers with the standard library, so
``skyhub db get`` starts in a fraction of that. A test checks that both readers agree.
"""

from __future__ import annotations

import getpass
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger import LedgerError, Usage

DEFAULTS_NAME = "skyhub.toml"
DEFAULTS_LABEL = "config/skyhub.toml (the defaults)"


def defaults_text() -> str:
    """The shipped defaults (works from a wheel too)."""
    import skyhub_config  # a package on disk, from a wheel too (importlib.resources costs a start ~9 ms)

    with open(os.path.join(os.path.dirname(skyhub_config.__file__ or ""), DEFAULTS_NAME), encoding="utf-8") as f:
        return f.read()


LOCAL_NAME = "skyhub.toml"  # read from the current folder when no file is named


def user_file(config: str | None = None) -> str | None:
    """The user's settings file: ``--config``, else ``SKYHUB_CONFIG``, else ``./skyhub.toml`` when
    there is one; None when there is none."""
    path = config or os.environ.get("SKYHUB_CONFIG")
    if path:
        return path
    return LOCAL_NAME if os.path.isfile(LOCAL_NAME) else None


def layers(config: str | None = None) -> tuple[tuple[str, str], ...]:
    """The TOML layers as (name, text): the defaults, then the user's file if any."""
    path = user_file(config)
    found = [(DEFAULTS_LABEL, defaults_text())]
    if path:
        try:
            found.append((path, Path(path).read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise Usage(f"config file {path!r} does not exist") from None
        except IsADirectoryError:
            raise Usage(f"config file {path!r} is a folder: give the path of a TOML file") from None
        except UnicodeDecodeError as exc:
            raise Usage(f"settings file {path} is not UTF-8 text (byte {exc.start} cannot be read): save it as UTF-8") from None
        except OSError as exc:
            raise Usage(f"cannot read config file {path!r}: {exc.strerror}") from None
    return tuple(found)


def merged(files: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The TOML files merged key by key (a later file overrides only the keys it sets)."""
    data: dict[str, Any] = {}
    for name, text in files:
        try:
            layer = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise Usage(f"settings file {name} is not valid TOML: {exc}") from None
        merge(data, layer)
    return data


def merge(into: dict[str, Any], layer: Mapping[str, Any]) -> None:
    """Merge ``layer`` into ``into``, table by table."""
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value


def default_actor() -> str:
    """``user:$USER``: who the local CLI writes as unless told otherwise."""
    try:
        name = getpass.getuser()
    except Exception:  # no user database entry (containers)
        name = "operator"
    return f"user:{name}"


@dataclass(frozen=True)
class Core:
    """The settings a ledger command needs (the same names and meaning as in ``Settings``)."""

    database_url: str = "sqlite:///skyhub.db"
    hub_url: str = ""
    token: str = field(default="", repr=False)
    device: str = ""
    device_key: str = field(default="", repr=False)
    device_key_file: str = ""
    actor: str = ""
    log_level: str = "INFO"
    pool_size: int = 0  # [store]
    statement_timeout: float = 5.0
    connect_timeout: float = 5.0


_TOP = ("database_url", "hub_url", "token", "device", "device_key", "device_key_file", "actor", "log_level")
_STORE = ("pool_size", "statement_timeout", "connect_timeout")


def core(config: str | None = None, **overrides: str | None) -> Core:
    """The core settings from the layers (flags in ``overrides`` win), without pydantic."""
    data = merged(layers(config))
    env = {k.lower(): v for k, v in os.environ.items() if k.lower().startswith("skyhub_")}
    values: dict[str, Any] = {}
    for name in _TOP:
        value = overrides.get(name)
        if value is None:
            value = env.get(f"skyhub_{name}")
        if value is None:
            value = data.get(name)
        if value is not None:
            values[name] = str(value)
    section = data.get("store")
    store: dict[str, Any] = section if isinstance(section, dict) else {}
    for name in _STORE:
        raw = env.get(f"skyhub_store__{name}", store.get(name))
        if raw is None:
            continue
        from ledger.clock import parse_interval

        try:
            values[name] = int(raw) if name == "pool_size" else parse_interval(raw)
        except (ValueError, TypeError, LedgerError):
            raise Usage(f"the settings are not valid: store.{name}: {raw!r} is not a {'number' if name == 'pool_size' else 'duration'}") from None
    return Core(**values)
