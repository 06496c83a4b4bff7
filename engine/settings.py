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

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.attachments import supports_vision
from engine.credentials import Credential, parse_keys
from engine.models import Entries, ModelInfo, ModelRegistry, read_models
from engine.timeouts import StreamTimeouts
from engine.tools.files import FileLimits
from engine.tools.web import WebFetchConfig

Thinking = Literal["off", "low", "medium", "high"]
# Anthropic's thinking budget (tokens) for each thinking level.
THINKING_BUDGET = {"low": 2048, "medium": 8192, "high": 24576}

# Described once for the config and again where the settings add environment aliases.
_OPENAI_KEY = "The OpenAI API key."
_OPENAI_URL = "An OpenAI-compatible server to use instead of OpenAI's (vLLM, Ollama, LM Studio)."
_ANTHROPIC_KEY = "The Anthropic API key."
_ANTHROPIC_URL = "An Anthropic-compatible server to use instead of Anthropic's."


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
    openai_api_key: SecretStr | None = Field(default=None, description=_OPENAI_KEY)
    openai_base_url: str | None = Field(default=None, description=_OPENAI_URL)
    openai_model: str = Field(
        default="gpt-4o-mini", description="The OpenAI model used when no model is named."
    )
    anthropic_api_key: SecretStr | None = Field(default=None, description=_ANTHROPIC_KEY)
    anthropic_base_url: str | None = Field(default=None, description=_ANTHROPIC_URL)
    anthropic_model: str = Field(
        default="claude-sonnet-4-5", description="The Anthropic model used when no model is named."
    )
    vision_models: tuple[str, ...] = Field(
        default=(),
        description="Glob patterns of provider:model names sent images besides the models "
        "the registry marks as vision; other models get a description of each image.",
    )
    max_output_tokens: int = Field(default=4096, description="Most tokens one model call writes.")
    context_window: int | None = Field(
        default=None,
        gt=0,
        description="Context window in tokens for every model; unset: each model's own "
        "(from the model registry).",
    )
    thinking: Thinking = Field(
        default="off",
        description="Reasoning for models that support it: Anthropic's thinking budget "
        "(low 2048, medium 8192, high 24576 tokens), OpenAI's reasoning effort.",
    )
    provider_concurrency: dict[str, int] = Field(
        default_factory=dict,
        description="Cluster-wide cap on model calls in flight, by provider ('openai') or "
        "provider:model; calls over it wait (the VP shows queued).",
    )
    provider_lease_s: float = Field(
        default=900.0,
        gt=0,
        description="A provider-lane slot lapses after this many seconds if its holder died.",
    )
    max_continuations: int = Field(
        default=3, description="Automatic continuations of a reply cut off by max_tokens."
    )
    max_tool_iterations: int = Field(
        default=12, description="Tool rounds in a turn before one last call without tools."
    )
    max_retries: int = Field(
        default=3,
        description="Retries of a rate-limited, overloaded, timed-out or failed call, per model.",
    )
    retry_base_delay: float = Field(
        default=1.0, description="Seconds before the first retry; doubled at each retry."
    )
    retry_max_delay: float = Field(
        default=30.0, description="Longest wait between retries, in seconds (Retry-After wins)."
    )
    retry_jitter: float = Field(
        default=0.25, description="Each wait is varied by up to this fraction, up or down."
    )
    rate_limit_wait: float = Field(
        default=60.0,
        ge=0,
        description=(
            "Longest wait, in seconds, for a provider's rate limit (Retry-After, or every key "
            "cooling): a turn waits that long and goes on; past it the turn ends at once "
            "(or tries the next model) and says when to try again."
        ),
    )
    max_compactions: int = Field(
        default=3, description="Compactions of the context in one turn after an overflow."
    )
    keep_recent_turns: int = Field(
        default=3, description="Turns a compaction keeps word for word (one fewer each time)."
    )
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
    workspace_max_file_bytes: int = Field(
        default=1_000_000, gt=0, description="Largest file write_file writes (bytes)."
    )
    workspace_max_read_bytes: int = Field(
        default=100_000, gt=0, description="Most one read_file call returns (bytes)."
    )
    web_fetch_allow: tuple[str, ...] = Field(
        default=(),
        description="Hosts, addresses or CIDR networks web_fetch may reach although they "
        "are not public (loopback, private, link-local).",
    )
    web_fetch_max_bytes: int = Field(
        default=2_000_000, gt=0, description="Most of a response web_fetch reads (bytes)."
    )
    web_fetch_timeout: float = Field(
        default=20.0, gt=0, description="Seconds one web_fetch may take, redirects included."
    )
    offline_tps: float = Field(
        default=0.0,
        ge=0,
        description="Tokens per second of the offline model when its model string names "
        "no tps; 0 streams without pauses.",
    )

    embedding_model: str | None = Field(
        default=None,
        description="Embedding model for team mode's skill retrieval, as openai:name (any "
        "OpenAI-compatible /embeddings endpoint at the OpenAI base URL); unset: BM25.",
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

    models: tuple[tuple[str, ModelInfo], ...] = Field(
        default=(),
        description="(pattern, model info) entries overlaying the built-in model registry.",
    )
    openai_credentials: tuple[Credential, ...] = Field(
        default=(), description="Labelled OpenAI keys, rotated on rate limit/auth/billing."
    )
    anthropic_credentials: tuple[Credential, ...] = Field(
        default=(), description="Labelled Anthropic keys, rotated on rate limit/auth/billing."
    )

    def registry(self) -> ModelRegistry:
        """The model registry: built-in entries under this config's ``models``."""
        return ModelRegistry(self.models)

    def sees_images(self, model: str) -> bool:
        """Whether ``model`` is sent images (the registry's vision flag, or ``vision_models``)."""
        return self.registry().info(model).vision or supports_vision(model, self.vision_models)

    def window_for(self, model: str) -> int:
        """The context window used for ``model``: the override, else the registry's."""
        return self.context_window or self.registry().window_for(model)

    def credentials(self, provider: str) -> tuple[Credential, ...]:
        """The keys of ``provider`` in rotation order (the single key is ``default``)."""
        listed = {"openai": self.openai_credentials, "anthropic": self.anthropic_credentials}
        if listed.get(provider):
            return listed[provider]
        single = {"openai": self.openai_api_key, "anthropic": self.anthropic_api_key}
        key = single.get(provider)
        return (Credential(label="default", key=key),) if key is not None else ()

    def thinking_options(self, model: str) -> dict[str, Any]:
        """Request options for the thinking level, for a model that can think."""
        if self.thinking == "off" or not self.registry().info(model).thinking:
            return {}
        if model.startswith("anthropic:"):
            return {"thinking_budget": THINKING_BUDGET[self.thinking]}
        if model.startswith("openai:"):
            return {"reasoning_effort": self.thinking}
        return {}

    def default_model(self) -> str:
        """The model used when none is named: a keyed provider first, else offline.

        A bare configured name is qualified (``gpt-4o`` → ``openai:gpt-4o``);
        one whose provider cannot be inferred raises
        :class:`~engine.models.UnknownModel`.
        """
        if self.model:
            return self.registry().qualify(self.model)
        if self.anthropic_api_key is not None or self.anthropic_credentials:
            return f"anthropic:{self.anthropic_model}"
        if self.openai_api_key is not None or self.openai_credentials:
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

    def file_limits(self) -> FileLimits:
        """The size limits of the workspace file tools."""
        return FileLimits(
            max_file_bytes=self.workspace_max_file_bytes,
            max_read_bytes=self.workspace_max_read_bytes,
        )

    def web_fetch(self) -> WebFetchConfig:
        """What ``web_fetch`` may reach, and its limits."""
        return WebFetchConfig(
            allow=self.web_fetch_allow,
            max_bytes=self.web_fetch_max_bytes,
            timeout=self.web_fetch_timeout,
        )

    def replace(self, **changes: object) -> EngineConfig:
        """A copy with ``changes`` applied and validated (the original is unchanged)."""
        current = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self).model_validate({**current, **changes})


class EngineSettings(BaseSettings, _EngineFields):
    """The engine settings from the environment; only drivers use it, through :meth:`to_config`."""

    model_config = SettingsConfigDict(env_prefix="YEAFT_", extra="ignore")

    openai_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_OPENAI_API_KEY", "OPENAI_API_KEY"),
        description=_OPENAI_KEY,
    )
    openai_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_OPENAI_BASE_URL", "OPENAI_BASE_URL"),
        description=_OPENAI_URL,
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
        description=_ANTHROPIC_KEY,
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"),
        description=_ANTHROPIC_URL,
    )
    openai_api_keys: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_OPENAI_API_KEYS", "OPENAI_API_KEYS"),
        description="Several OpenAI keys: 'label=key,label=key' (or bare keys).",
    )
    anthropic_api_keys: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("YEAFT_ANTHROPIC_API_KEYS", "ANTHROPIC_API_KEYS"),
        description="Several Anthropic keys: 'label=key,label=key' (or bare keys).",
    )
    credentials_file: str | None = Field(
        default=None,
        description='JSON profiles file: {"openai": [{"label": "team-a", "key": "sk-..."}]}.',
    )
    models_file: str | None = Field(
        default=None,
        description="JSON file of model entries overlaying the registry; unset: "
        "$YEAFT_DATA_DIR/models.json when it exists.",
    )
    prices_file: str | None = Field(
        default=None, description="Older name of a models file holding only prices."
    )
    data_dir: Path = Field(
        default=Path("~/.yeaft"), description="Where the default models file is looked for."
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
        """The :class:`EngineConfig` these settings describe; reads the models and keys files.

        A missing or malformed file, or a model name whose provider cannot be
        inferred, fails here (``OSError``/``ValueError``), in the driver,
        rather than in every engine that would have read it.
        """
        shared = {name: getattr(self, name) for name in _EngineFields.model_fields}
        models: Entries = ()
        for path in (self.prices_file, self._models_path()):
            if path:
                models = (*models, *read_models(path))
        config = EngineConfig(
            **shared,
            models=models,
            openai_credentials=self._credentials("openai", self.openai_api_keys),
            anthropic_credentials=self._credentials("anthropic", self.anthropic_api_keys),
        )
        registry = config.registry()
        for name in (config.model, config.fast_model, *config.fallback_models):
            if name:
                registry.qualify(name, strict=True)
        return config

    def _models_path(self) -> str | None:
        if self.models_file:
            return self.models_file
        default = self.data_dir.expanduser() / "models.json"
        return str(default) if default.is_file() else None

    def _credentials(self, provider: str, listed: SecretStr | None) -> tuple[Credential, ...]:
        if listed is not None and listed.get_secret_value().strip():
            return parse_keys(listed.get_secret_value(), provider)
        if not self.credentials_file:
            return ()
        raw = json.loads(Path(self.credentials_file).expanduser().read_text())
        return tuple(Credential.model_validate(entry) for entry in raw.get(provider, []))
