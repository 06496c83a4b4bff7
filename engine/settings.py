"""Typed engine configuration; every field has an environment variable.

Provider keys are read from the vendors' usual variables (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, ``*_BASE_URL``) as well as ``YEAFT_``-prefixed ones, so
an existing shell setup works unchanged.
"""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class EngineSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="YEAFT_", extra="ignore")

    model: str | None = Field(
        default=None,
        description="Primary model as provider:name. Unset: the first provider with a key, "
        "else the offline model.",
    )
    fast_model: str | None = Field(
        default=None, description="Model for personas whose modelHint is 'fast'."
    )
    fallback_models: list[str] = Field(
        default_factory=list, description="Models tried in order when the primary fails."
    )
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("YEAFT_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("YEAFT_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    openai_model: str = "gpt-4o-mini"
    anthropic_api_key: str | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"),
    )
    anthropic_model: str = "claude-sonnet-4-5"
    max_output_tokens: int = 4096
    context_window: int = 128_000
    max_continuations: int = 3
    max_tool_iterations: int = 12
    max_retries: int = 3
    retry_base_delay: float = 1.0
    retry_max_delay: float = 30.0
    retry_jitter: float = 0.25
    max_compactions: int = 3
    keep_recent_turns: int = 3
    prices_file: str | None = Field(
        default=None, description="JSON file of per-model prices (USD per million tokens)."
    )

    def default_model(self) -> str:
        """The model used when none is named: a keyed provider first, else offline."""
        if self.model:
            return self.model
        if self.anthropic_api_key:
            return f"anthropic:{self.anthropic_model}"
        if self.openai_api_key:
            return f"openai:{self.openai_model}"
        return "offline:default"
