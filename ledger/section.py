"""Settings sections: the pydantic models products declare their ``[section]`` with.

Kept apart from ``ledger.product`` so that declaring a product (and listing the CLI's
commands) does not load pydantic; the hub loads the sections when it reads the settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict

from .clock import parse_interval
from .errors import LedgerError


def _interval(value: Any) -> float:
    try:
        return parse_interval(value)
    except LedgerError as exc:  # pydantic reports ValueErrors as validation errors, with the field's name
        raise ValueError(exc.reason) from None


_interval.__wrapped__ = parse_interval  # type: ignore[attr-defined]  # so docs can tell a duration field
Interval = Annotated[float, BeforeValidator(_interval)]
"""A duration in settings: ``"30s"``, ``"1m"``, ``"250ms"`` or seconds; read as seconds."""


class Section(BaseModel):
    """A settings section (``[bot]``, ``[vault]``, ...). Each field's docstring is its
    documentation: the README's configuration table is generated from it. Unknown keys are
    refused, so a typo in a settings file is an error, not a silent default. ``refused`` names keys
    that must never be settings (a secret that belongs in the environment), each with the sentence
    that says where it goes instead: the refusal never repeats the value."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid")
    refused: ClassVar[Mapping[str, str]] = {}
