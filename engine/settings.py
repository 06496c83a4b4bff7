"""Engine configuration: one frozen value that travels, one reader of the environment.

:class:`EngineConfig` holds every engine setting, provider credentials
included. It is frozen, picklable and never looks at the process
environment, so an engine built from it behaves the same on whichever
machine it runs: the process that starts a deployment (the driver) builds
one and hands it to every engine explicitly.

:class:`EngineSettings` is that driver's view of the environment: the same
settings as ``YEAFT_*`` variables, with provider keys also read from the
vendors' usual variables (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
``*_BASE_URL``) so an existing shell setup works unchanged.
``EngineSettings().to_config()`` is the only way from the one to the other.

API keys are :class:`~pydantic.SecretStr` in both, so ``repr``, ``str`` and
``model_dump`` (JSON mode included) show them masked; the one place a key is
unwrapped is where an SDK client is constructed
(:mod:`engine.providers.registry`).
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.pricing import Price, read_prices
from engine.timeouts import StreamTimeouts


class _EngineFields(BaseModel):
    """The settings :class:`EngineConfig` and :class:`EngineSettings` share, with defaults."""

    model: str | None = Field(
        default=None,
        description="Primary model as provider:name. Unset: the first provider with a key, "
        "else the offline model.",
    )
    fast_model: str | None = Field(
        default=None, description="Model for personas whose modelHint is 'fast'."
    )
    fallback_models: tuple[str, ...] = Field(
        default=(), description="Models tried in order when the primary fails."
    )
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    openai_model: str = "gpt-4o-mini"
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    anthropic_model: str = "claude-sonnet-4-5"
    vision_models: tuple[str, ...] = Field(
        default=(
            "openai:gpt-4o*",
            "openai:gpt-4.1*",
            "openai:gpt-5*",
            "openai:o3*",
            "openai:o4*",
            "anthropic:claude-*",
        ),
        description="Glob patterns of provider:model names that are sent images; "
        "other models get a description of each image.",
    )
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
    model_connect_timeout: float = Field(
        default=10.0, gt=0, description="Seconds to open a connection to a provider."
    )
    model_first_token_timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds from sending a request to the model's first output.",
    )
    model_stall_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Longest silence, in seconds, between two pieces of a streamed reply.",
    )
    model_total_timeout: float = Field(
        default=600.0,
        gt=0,
        description="Longest a single model call may take, however steadily it streams.",
    )
    offline_tps: float = Field(
        default=0.0,
        ge=0,
        description="Tokens per second of the offline model when its model string names "
        "no tps; 0 streams without pauses.",
    )

    @field_validator(
        "openai_api_key",
        "openai_base_url",
        "anthropic_api_key",
        "anthropic_base_url",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # ``OPENAI_API_KEY=`` in a shell means "no key", as it always has.
        if isinstance(value, SecretStr):
            return value if value.get_secret_value() else None
        return value if value != "" else None


class EngineConfig(_EngineFields):
    """Every engine setting, frozen; built once by the driver, passed to engines explicitly.

    Invariants: it never reads the environment or a file (``prices`` are the
    entries of the prices file, read by the driver); an empty key or base URL
    is ``None``; keys stay :class:`~pydantic.SecretStr` until an SDK client is
    made. ``EngineConfig()`` is the defaults: the offline model, no keys.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    prices: tuple[tuple[str, Price], ...] = Field(
        default=(),
        description="(pattern, price) entries overlaying the built-in price table, in order.",
    )

    def default_model(self) -> str:
        """The model used when none is named: a keyed provider first, else offline."""
        if self.model:
            return self.model
        if self.anthropic_api_key is not None:
            return f"anthropic:{self.anthropic_model}"
        if self.openai_api_key is not None:
            return f"openai:{self.openai_model}"
        return "offline:default"

    def stream_timeouts(self) -> StreamTimeouts:
        """The connect, first-token and stall limits of every model call."""
        return StreamTimeouts(
            connect=self.model_connect_timeout,
            first_token=self.model_first_token_timeout,
            stall=self.model_stall_timeout,
            total=self.model_total_timeout,
        )

    def replace(self, **changes: object) -> EngineConfig:
        """A copy with ``changes`` applied and validated (the original is unchanged)."""
        current = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self).model_validate({**current, **changes})


class EngineSettings(BaseSettings, _EngineFields):
    """The engine settings from the environment; only drivers use it, through :meth:`to_config`."""

    model_config = SettingsConfigDict(env_prefix="YEAFT_", extra="ignore")

    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("YEAFT_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("YEAFT_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"),
    )
    prices_file: str | None = Field(
        default=None, description="JSON file of per-model prices (USD per million tokens)."
    )
    # A person trying the offline model should see replies stream side by
    # side, so a driver (``yeaft serve``, ``yeaft ask``) paces it like a
    # real model unless told otherwise; engines built in code default to no
    # pauses, and the tests and benchmarks say so explicitly.
    offline_tps: float = Field(
        default=40.0,
        ge=0,
        description="Tokens per second of the offline model (YEAFT_OFFLINE_TPS); 0: no pauses.",
    )

    def to_config(self) -> EngineConfig:
        """The :class:`EngineConfig` these settings describe; reads the prices file, if any.

        A missing or malformed prices file fails here, in the driver, rather
        than in every engine that would have read it.
        """
        shared = {name: getattr(self, name) for name in _EngineFields.model_fields}
        prices = read_prices(self.prices_file) if self.prices_file else {}
        return EngineConfig(**shared, prices=tuple(prices.items()))
