"""``[codegen]``: the built-in generator's settings (loaded when the settings are read).

``skyhub build run`` reads them with every other setting (the defaults, your file, then
``SKYHUB_CODEGEN__*`` variables) and hands them to the codegen command as those variables, so
the command, run by the builder or by hand, reads them from its environment alone. The API key
is not a setting: it comes only from ``SKYHUB_CODEGEN_API_KEY``, and a settings file or
variable that tries to set one is refused with a sentence saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError

from ledger import Usage
from ledger.section import Section

KEY_ENV = "SKYHUB_CODEGEN_API_KEY"
PREFIX = "SKYHUB_CODEGEN__"
KEY_ELSEWHERE = (f"the API key is never a setting: put it in the environment variable {KEY_ENV} "
                 "(in the workflow, the repository secret of that name), not in a settings file")


class CodegenSettings(Section):
    """``[codegen]``: the built-in generator behind `bot.codegen`."""

    refused: ClassVar[Mapping[str, str]] = {"api_key": KEY_ELSEWHERE, "key": KEY_ELSEWHERE, "apikey": KEY_ELSEWHERE}

    provider: Literal["templates", "openai", "anthropic"] = "templates"
    """`templates` (offline: a few app kinds, sends nothing anywhere), `openai` (any OpenAI-compatible Chat Completions endpoint, llama.cpp, vLLM and Ollama included) or `anthropic` (the Messages API); the key comes only from the environment variable `SKYHUB_CODEGEN_API_KEY`"""
    base_url: str = ""
    """the endpoint (`POST {base_url}/chat/completions` or `POST {base_url}/v1/messages`); empty: the provider's own, `https://api.openai.com/v1` or `https://api.anthropic.com`; a local server e.g. `http://127.0.0.1:8080/v1`"""
    model: str = ""
    """the model to ask (needed by `openai` and `anthropic`), e.g. `gpt-4o-mini` or `claude-sonnet-4-5`"""
    max_tokens: int = Field(8000, ge=256, le=200_000)
    """the most the model may write for one page (the plan gets at most 1000 of them)"""
    daily_token_budget: int = Field(1_000_000, ge=0)
    """tokens (sent and received) the builder may spend per UTC day, kept in the ledger; once spent, builds wait for the next day; 0: no limit"""
    stream: bool = True
    """read the model's answers as server-sent events as they come (off: one answer at the end)"""
    max_page_bytes: int = Field(300_000, ge=10_000, le=5_000_000)
    """a page larger than this is refused"""
    browser: str = ""
    """chromium or chrome for the load check; empty: the first of `chromium`, `chromium-browser`, `google-chrome`, `google-chrome-stable` on the PATH; `off`: no load check"""

    def key_problem(self, environ: Mapping[str, str]) -> str | None:
        """Why the builder cannot run with these settings and this environment (a key or a model missing), or None."""
        if self.provider == "templates":
            return None
        if not environ.get(KEY_ENV):
            return (f"codegen.provider is {self.provider}, which needs an API key, and {KEY_ENV} is not set: put the key in that "
                    f"environment variable (in the workflow, the repository secret {KEY_ENV}); a local server that takes none accepts any value")
        if not self.model:
            return f"codegen.provider is {self.provider}, but codegen.model is not set: name the model (SKYHUB_CODEGEN__MODEL)"
        return None

    def as_env(self) -> dict[str, str]:
        """These settings as the ``SKYHUB_CODEGEN__*`` variables the codegen command reads."""
        out: dict[str, str] = {}
        for name in type(self).model_fields:
            value: Any = getattr(self, name)
            out[PREFIX + name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> CodegenSettings:
        """The settings from ``SKYHUB_CODEGEN__*`` variables (an empty one counts as unset); ``Usage`` with one
        sentence when one is not a setting or not valid."""
        given: dict[str, str] = {}
        for name, value in environ.items():
            if name.startswith(PREFIX) and value != "":
                key = name[len(PREFIX):].lower()
                if key in cls.refused:
                    raise Usage(f"{name}: {cls.refused[key]}")
                if key not in cls.model_fields:
                    raise Usage(f"{name} is not a setting: the [codegen] settings are {', '.join(cls.model_fields)}")
                given[key] = value
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = PREFIX + ".".join(str(p) for p in first.get("loc", ())).upper()
            raise Usage(f"{where}: {first.get('msg', 'is not valid')} (got {first.get('input')!r})") from None


__all__ = ["KEY_ENV", "CodegenSettings"]
