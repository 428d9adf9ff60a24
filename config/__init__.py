"""skyhub's shipped data, not code: the default settings (``skyhub.toml``) and the default
guardrails (``guardrails.toml``). Installed as the package ``skyhub_config`` so that a wheel
carries them; read them with ``importlib.resources.files("skyhub_config")``."""
