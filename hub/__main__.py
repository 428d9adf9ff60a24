"""``python -m hub``: the ``skyhub`` command."""

from .cli import entry

entry()
