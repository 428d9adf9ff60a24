"""``[jobs]``: the reference jobs product's settings section (loaded when the settings are read)."""

from __future__ import annotations

from .section import Interval, Section


class JobsSettings(Section):
    """``[jobs]``: the reference jobs machine."""

    enabled: bool = True
    """run the reference jobs handler (pending -> running -> done) in `skyhub run`"""
    lease: Interval = 30.0
    """how long a claimed job is held before the sweep takes it back"""
