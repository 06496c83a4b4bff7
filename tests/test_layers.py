"""The layering rules of DESIGN.md, checked on the source itself.

Dependencies point down only; ``engine/`` is plain asyncio (no Ray); each
vendor SDK is imported only by its own provider module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Lowest first: a layer may import itself and anything before it.
LAYERS = ["protocol", "personas", "store", "engine", "actors", "coordinator", "gateway"]
SDK_HOME = {
    "openai": "engine/providers/openai.py",
    "anthropic": "engine/providers/anthropic.py",
}


def imports(path: Path) -> set[str]:
    """Top-level names of every module a file imports (at any depth of the file)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def files(layer: str) -> list[Path]:
    return sorted((ROOT / layer).rglob("*.py"))


def test_dependencies_point_down_only() -> None:
    problems = []
    for rank, layer in enumerate(LAYERS):
        above = set(LAYERS[rank + 1 :])
        for path in files(layer):
            for name in imports(path) & above:
                problems.append(f"{path.relative_to(ROOT)} imports {name} (a higher layer)")
    assert problems == []


def test_engine_and_below_do_not_import_ray() -> None:
    for layer in LAYERS[: LAYERS.index("engine") + 1]:
        for path in files(layer):
            assert "ray" not in imports(path), f"{path.relative_to(ROOT)} imports ray"


def test_each_sdk_only_in_its_provider_module() -> None:
    for layer in LAYERS:
        for path in files(layer):
            rel = str(path.relative_to(ROOT))
            for sdk, home in SDK_HOME.items():
                if sdk in imports(path):
                    assert rel == home, f"{rel} imports {sdk}; only {home} may"
