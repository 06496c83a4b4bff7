"""Text embeddings from the configured embedding model, for team mode's skill retrieval.

:class:`ModelEmbedder` embeds texts with ``EngineConfig.embedding_model``
(``openai:<name>``: the OpenAI API, or any OpenAI-compatible server at
``openai_base_url`` that serves ``/embeddings``), with the config's OpenAI
key. The config reaches the process that embeds (a coordinator) as part of
its :class:`~actors.config.RuntimeConfig`, never from that process's
environment. :func:`open_embedder` gives None when no embedding model is
configured: skill retrieval is then BM25 (``team.skills.retrieve``).

A provider that cannot embed (the offline model, Anthropic) is a
MODEL_NOT_FOUND error at the first call, which the retriever logs and
answers with BM25.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.errors import ErrorKind, ModelError
from engine.providers.registry import ProviderRegistry
from engine.settings import EngineConfig

__all__ = ["ModelEmbedder", "open_embedder"]


class ModelEmbedder:
    """Embeds texts with one model (see the module doc); the SDK client is made on first use."""

    def __init__(self, config: EngineConfig, model: str) -> None:
        self.model = model
        self._providers = ProviderRegistry(config)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; ModelError on any failure."""
        provider, name = self._providers.resolve(self.model)
        embed = getattr(provider, "embed", None)
        if embed is None:
            raise ModelError(
                ErrorKind.MODEL_NOT_FOUND,
                f"{self.model} cannot embed: use an OpenAI-compatible model (openai:<name>)",
            )
        vectors: list[list[float]] = await embed(name, texts)
        if len(vectors) != len(texts):
            raise ModelError(
                ErrorKind.UNKNOWN,
                f"{self.model} gave {len(vectors)} vectors for {len(texts)} texts",
            )
        return vectors

    async def aclose(self) -> None:
        await self._providers.aclose()


def open_embedder(config: EngineConfig) -> ModelEmbedder | None:
    """The embedder of ``config.embedding_model``, or None when none is configured."""
    model = (config.embedding_model or "").strip()
    return ModelEmbedder(config, model) if model else None
