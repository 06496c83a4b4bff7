"""The model registry: what each known model can do and costs, from one data file.

``engine/models.json`` lists models by ``provider:name`` pattern (fnmatch,
first match wins, specific entries before broad ones) with their context
window, output limit, capabilities (tools, vision, thinking) and prices in
USD per million tokens. A user file of the same shape (``models.json`` in
the data directory, or ``YEAFT_MODELS_FILE``) is read by the driver and
overlays it: its entries come first, and a field an entry leaves out is
taken from the built-in entry its pattern falls under.

A bare model name (no ``provider:``) is inferred to its provider:
``gpt-*``, ``chatgpt-*``, ``o1*``, ``o3*``, ``o4*`` are OpenAI's,
``claude-*`` Anthropic's, and a name a user entry spells out exactly is that
entry's provider. Any other bare name is an :class:`UnknownModel` error,
never the offline model.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

PROVIDERS = ("openai", "anthropic", "offline")
# Bare-name prefixes and the provider they belong to.
_INFERRED = (
    (re.compile(r"^(gpt-|chatgpt-|o[134](-|$))"), "openai"),
    (re.compile(r"^claude-"), "anthropic"),
)
DEFAULT_WINDOW = 128_000


class UnknownModel(ValueError):
    """A model string that names no provider and whose provider cannot be inferred."""


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One registry entry: limits, capabilities and price of the models a pattern matches."""

    context_window: int = DEFAULT_WINDOW
    max_output: int = 8192
    tools: bool = True
    vision: bool = False
    thinking: bool = False
    price: Price = field(default_factory=lambda: Price(0.0, 0.0))

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], base: ModelInfo | None = None) -> ModelInfo:
        """An entry from its JSON object; fields it leaves out come from ``base``."""
        base = base or cls()
        price_keys = {f.name for f in fields(Price)}
        info_keys = {f.name for f in fields(cls)} - {"price"}
        unknown = set(raw) - price_keys - info_keys
        if unknown:
            raise ValueError(f"unknown model fields: {', '.join(sorted(unknown))}")
        price = replace(base.price, **{k: float(v) for k, v in raw.items() if k in price_keys})
        return replace(base, price=price, **{k: v for k, v in raw.items() if k in info_keys})

    def as_json(self) -> dict[str, Any]:
        flat = {k: v for k, v in asdict(self).items() if k != "price"}
        return {**flat, **asdict(self.price)}


Entries = tuple[tuple[str, ModelInfo], ...]


@cache
def builtin_entries() -> Entries:
    """The entries of ``engine/models.json``, in the file's order."""
    text = resources.files("engine").joinpath("models.json").read_text()
    return _parse(json.loads(text), ())


def _parse(raw: Mapping[str, Any], under: Entries) -> Entries:
    models = raw.get("models", raw)
    if not isinstance(models, Mapping):
        raise ValueError("a models file is an object of 'provider:pattern' entries")
    out: list[tuple[str, ModelInfo]] = []
    for pattern, entry in models.items():
        if pattern.startswith("_"):
            continue
        if not isinstance(entry, Mapping):
            raise ValueError(f"model entry {pattern!r} is not an object")
        if ":" not in pattern:
            pattern = f"{infer_provider(pattern, ())}:{pattern}"
        base = _lookup(under, pattern)
        out.append((pattern, ModelInfo.from_json(entry, base)))
    return tuple(out)


def read_models(path: str | Path) -> Entries:
    """The entries of a user models file, each completed from the built-in entries.

    Shape: ``{"models": {"openai:my-model*": {"context_window": 32000, "input": 1.0}}}``
    (the ``models`` wrapper may be left out). A price-only file of the older
    ``YEAFT_PRICES_FILE`` shape is one too. Raises ``ValueError`` (or
    ``OSError``) for a file that is not one.
    """
    raw = json.loads(Path(path).expanduser().read_text())
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path}: a models file is a JSON object")
    return _parse(raw, builtin_entries())


def _lookup(entries: Iterable[tuple[str, ModelInfo]], model: str) -> ModelInfo | None:
    for pattern, info in entries:
        if fnmatch.fnmatchcase(model, pattern):
            return info
    return None


def infer_provider(name: str, extra: Iterable[tuple[str, ModelInfo]] = ()) -> str:
    """The provider of a bare model name; :class:`UnknownModel` when there is none."""
    for pattern, _ in extra:
        provider, _, exact = pattern.partition(":")
        if exact == name:
            return provider
    for rule, provider in _INFERRED:
        if rule.match(name):
            return provider
    raise UnknownModel(
        f"unknown model {name!r}: name it as provider:name ({', '.join(PROVIDERS)}), "
        "e.g. openai:gpt-4o, or add it to models.json"
    )


class ModelRegistry:
    """The built-in entries overlaid by user ones; answers by ``provider:name``."""

    def __init__(self, extra: Entries = ()) -> None:
        self.extra = tuple(extra)
        self.entries: Entries = (*self.extra, *builtin_entries())

    def qualify(self, model: str, *, strict: bool = False) -> str:
        """``model`` as ``provider:name``; a bare name is inferred (or UnknownModel).

        A named provider is kept as it is (code may register providers of
        its own under any name); ``strict`` accepts only the known ones.
        """
        provider, sep, name = model.partition(":")
        if sep:
            provider, name = provider.strip().lower(), name.strip()
            if strict and provider not in PROVIDERS:
                raise UnknownModel(
                    f"unknown provider {provider!r} in {model!r}; use one of {', '.join(PROVIDERS)}"
                )
            return f"{provider}:{name}"
        name = model.strip()
        return f"{infer_provider(name, self.extra)}:{name}"

    def info(self, model: str) -> ModelInfo:
        """The entry for ``model`` (qualified first); the defaults when none matches."""
        try:
            return _lookup(self.entries, self.qualify(model)) or ModelInfo()
        except UnknownModel:
            return ModelInfo()

    def window_for(self, model: str) -> int:
        return self.info(model).context_window

    def price(self, model: str) -> Price | None:
        found = _lookup(self.entries, self.qualify(model))
        return found.price if found is not None else None


def window_for(model: str, extra: Entries = ()) -> int:
    """The context window of ``model`` in tokens (for budgets sized to the window)."""
    try:
        return ModelRegistry(extra).window_for(model)
    except UnknownModel:
        return DEFAULT_WINDOW
