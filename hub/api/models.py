"""The bodies more than one router answers with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ChangeOut(BaseModel):  # noqa: D101 - a docstring would become its description in the OpenAPI document
    seq: int
    db: str
    id: str
    rev: str
    deleted: bool
    actor: str
    at: int
    doc: dict[str, Any]
