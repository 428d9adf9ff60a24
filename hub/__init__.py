"""The composition root: settings, wiring, the CLI (and, later, the HTTP API and console)."""
