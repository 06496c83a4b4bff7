"""From a model string (``openai:gpt-4o``) to a provider instance.

Providers are created lazily and cached, so a process that only ever uses
the offline model never constructs an SDK client. Credentials and base URLs
come from the :class:`~engine.settings.EngineConfig` alone, never from the
environment of the process the registry runs in; a key is unwrapped only
here, as the SDK client is made.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from engine.credentials import Credential
from engine.errors import ErrorKind, ModelError
from engine.models import ModelRegistry, UnknownModel
from engine.providers.base import Provider
from engine.providers.offline import OfflineProvider
from engine.providers.wire import tls_context
from engine.settings import EngineConfig

KNOWN = ("openai", "anthropic", "offline")
# The vendors whose SDK a provider module imports (about half a second each).
SDK_VENDORS = ("openai", "anthropic")
# Passed when no base URL is configured, so the SDK never falls back to
# ANTHROPIC_BASE_URL from the environment of the process it runs in.
ANTHROPIC_URL = "https://api.anthropic.com"


def split_model(model: str, models: ModelRegistry | None = None) -> tuple[str, str]:
    """``"openai:gpt-4o"`` (or ``"gpt-4o"``) → ``("openai", "gpt-4o")``.

    A bare name is inferred to its provider; one that cannot be is a
    MODEL_NOT_FOUND error, never the offline model.
    """
    try:
        qualified = (models or ModelRegistry()).qualify(model)
    except UnknownModel as exc:
        raise ModelError(ErrorKind.MODEL_NOT_FOUND, str(exc)) from None
    provider, _, name = qualified.partition(":")
    return provider, name


class ProviderRegistry:
    """Creates and caches one provider per vendor.

    ``overrides`` replaces a vendor's provider (tests hand in a
    :class:`~engine.providers.scripted.ScriptedModel` this way, usually in
    place of ``offline``, the default model's vendor). Without a ``settings``
    config the defaults apply: no keys, so only the offline model resolves.
    """

    def __init__(
        self,
        settings: EngineConfig | None = None,
        overrides: Mapping[str, Provider] | None = None,
    ) -> None:
        self.settings = settings or EngineConfig()
        self._overrides: dict[str, Provider] = dict(overrides or {})
        self._providers: dict[str, Provider] = {}

    def resolve(self, model: str, credential: Credential | None = None) -> tuple[Provider, str]:
        """The provider for ``model`` (with ``credential``'s key, when given) and the bare name."""
        vendor, name = split_model(model, self.settings.registry())
        if not name:
            raise ModelError(ErrorKind.MODEL_NOT_FOUND, f"model string {model!r} names no model")
        if vendor in self._overrides:
            return self._overrides[vendor], name
        slot = vendor if credential is None else f"{vendor}#{credential.label}"
        provider = self._providers.get(slot)
        if provider is None:
            provider = self._create(vendor, credential)
            self._providers[slot] = provider
        return provider, name

    def _create(self, vendor: str, credential: Credential | None = None) -> Provider:
        s = self.settings
        if credential is not None:
            s = s.replace(**{f"{vendor}_api_key": credential.key})
        # The engine enforces the first-token and stall deadlines on every
        # stream; the SDK clients get the connect timeout, which only they can
        # enforce, and a read timeout behind those deadlines as a backstop.
        timeouts = s.stream_timeouts()
        if vendor == "offline":
            return OfflineProvider(default_tps=s.offline_tps)
        if vendor == "openai":
            if s.openai_api_key is None and s.openai_base_url is None:
                raise ModelError(
                    ErrorKind.AUTH,
                    "OPENAI_API_KEY is not set (set it, or OPENAI_BASE_URL for a local "
                    "OpenAI-compatible server)",
                    provider="openai",
                )
            from engine.providers.openai import OpenAIProvider

            # Local OpenAI-compatible servers (vLLM, Ollama, LM Studio) accept any key.
            key = s.openai_api_key.get_secret_value() if s.openai_api_key is not None else "local"
            return OpenAIProvider(
                api_key=key,
                base_url=s.openai_base_url,
                timeout=timeouts.sdk_read,
                connect_timeout=timeouts.connect,
            )
        if vendor == "anthropic":
            if s.anthropic_api_key is None:
                raise ModelError(
                    ErrorKind.AUTH, "ANTHROPIC_API_KEY is not set", provider="anthropic"
                )
            from engine.providers.anthropic import AnthropicProvider

            return AnthropicProvider(
                api_key=s.anthropic_api_key.get_secret_value(),
                base_url=s.anthropic_base_url or ANTHROPIC_URL,
                timeout=timeouts.sdk_read,
                connect_timeout=timeouts.connect,
            )
        raise ModelError(
            ErrorKind.MODEL_NOT_FOUND,
            f"unknown provider {vendor!r}; use one of {', '.join(KNOWN)} (e.g. openai:gpt-4o)",
        )

    def preload(self) -> None:
        """Import the SDKs of the configured models' vendors, and make the TLS
        context their clients share (:func:`~engine.providers.wire.tls_context`),
        now, not at their first call.

        A process that starts idle pays for both before anyone waits on
        it; a model string that does not resolve is left to its first call.
        """
        s = self.settings
        try:
            default: str | None = s.default_model()
        except UnknownModel:
            default = None
        for model in (default, s.fast_model, *s.fallback_models):
            if not model:
                continue
            try:
                vendor, _ = split_model(model, self.settings.registry())
            except ModelError:
                continue
            if vendor in SDK_VENDORS and vendor not in self._overrides:
                importlib.import_module(f"engine.providers.{vendor}")
                tls_context()

    def has_override(self, vendor: str) -> bool:
        return vendor in self._overrides

    async def aclose(self) -> None:
        for p in (*self._overrides.values(), *self._providers.values()):
            await p.aclose()
