"""The models a person may pick, as the ``llm_config`` frame lists them.

The list comes from the engine configuration the deployment runs with, in
this order, each model once:

1. the models it is configured to use: the default, the fast model and the
   fallbacks (listed whatever their provider, since VPs answer with them);
2. for each provider that has a key (``openai``, ``anthropic``), the model
   used when none is named, then every model of the registry whose entry
   names one model: the user's models file first, then the built-in file.
   An entry ``provider:name*`` (a name and its dated versions) stands for
   ``provider:name``; one with a wildcard inside (``anthropic:claude-*opus*``)
   names no model and is left out;
3. the offline model, which needs no key.

Each model's window, output limit, capabilities and price are the
registry's (the configured ``YEAFT_CONTEXT_WINDOW`` wins for the window, and
``YEAFT_VISION_MODELS`` adds vision), as the engine itself will use them.
"""

from __future__ import annotations

from collections.abc import Iterator

from engine.models import UnknownModel
from engine.settings import EngineConfig
from protocol.config import LlmConfigFrame, LlmModel, LlmPrice

KEYED_PROVIDERS = ("openai", "anthropic")
OFFLINE_MODEL = "offline:default"
_GLOB = frozenset("*?[")


def llm_config(
    config: EngineConfig,
    group_id: str | None = None,
    group_model: str | None = None,
    request_id: str | None = None,
) -> LlmConfigFrame:
    """The ``llm_config`` answer for a deployment running ``config``."""
    registry = config.registry()
    models: dict[str, LlmModel] = {}
    for candidate in _candidates(config):
        try:
            model = registry.qualify(candidate)
        except UnknownModel:
            continue
        if model not in models:
            models[model] = _describe(config, model)
    return LlmConfigFrame(
        models=list(models.values()),
        default_model=config.default_model(),
        fast_model=registry.qualify(config.fast_model) if config.fast_model else None,
        fallback_models=[registry.qualify(m) for m in config.fallback_models],
        thinking_level=config.thinking,
        group_id=group_id,
        group_model=group_model,
        request_id=request_id,
    )


def _candidates(config: EngineConfig) -> Iterator[str]:
    yield config.default_model()
    if config.fast_model:
        yield config.fast_model
    yield from config.fallback_models
    keyed = [p for p in KEYED_PROVIDERS if config.credentials(p)]
    defaults = {"openai": config.openai_model, "anthropic": config.anthropic_model}
    for provider in keyed:
        yield f"{provider}:{defaults[provider]}"
    for pattern, _info in config.registry().entries:
        provider, _, name = pattern.partition(":")
        name = name.removesuffix("*")
        if provider in keyed and name and not _GLOB & set(name):
            yield f"{provider}:{name}"
    yield OFFLINE_MODEL


def _describe(config: EngineConfig, model: str) -> LlmModel:
    info = config.registry().info(model)
    provider, _, name = model.partition(":")
    price = info.price
    return LlmModel(
        id=model,
        provider=provider,
        name=name,
        context_window=config.window_for(model),
        max_output=info.max_output,
        tools=info.tools,
        vision=config.sees_images(model),
        thinking=info.thinking,
        price=LlmPrice(
            input=price.input,
            output=price.output,
            cache_read=price.cache_read,
            cache_write=price.cache_write,
        ),
    )
