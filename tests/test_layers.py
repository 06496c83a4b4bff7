"""The layering rules of DESIGN.md, checked on the source itself.

Dependencies point down only; ``engine/`` is plain asyncio (no Ray); each
vendor SDK is imported only by its own provider module, and only when used.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Lowest first: a layer may import itself and anything before it.
LAYERS = [
    "telemetry",
    "protocol",
    "personas",
    "store",
    "engine",
    "team",
    "actors",
    "coordinator",
    "gateway",
]
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


def test_team_and_below_do_not_import_ray() -> None:
    for layer in LAYERS[: LAYERS.index("team") + 1]:
        for path in files(layer):
            assert "ray" not in imports(path), f"{path.relative_to(ROOT)} imports ray"


def test_each_sdk_only_in_its_provider_module() -> None:
    for layer in LAYERS:
        for path in files(layer):
            rel = str(path.relative_to(ROOT))
            for sdk, home in SDK_HOME.items():
                if sdk in imports(path):
                    assert rel == home, f"{rel} imports {sdk}; only {home} may"


def test_a_vp_actor_without_mcp_servers_never_loads_an_sdk() -> None:
    # Each costs every actor process start-up time and memory (the MCP SDK
    # most of a second and about 25 MB, redis 150 ms and 9 MB): they are
    # imported on first use, redis only by a deployment on Redis.
    code = (
        "import actors.vp_actor, coordinator.coordinator, gateway.server\n"
        "from engine.mcp import McpConfig, McpManager\n"
        "McpManager(McpConfig())\n"
    )
    loaded = _sdks_loaded_by(code)
    assert loaded == "[]", loaded


def test_preload_imports_the_sdks_of_the_configured_models_only() -> None:
    code = (
        "from engine.providers.registry import ProviderRegistry\n"
        "from engine.settings import EngineConfig\n"
        "config = EngineConfig(model='openai:gpt-4o', fast_model='nobody:x',\n"
        "                      fallback_models=('offline:default',))\n"
        "ProviderRegistry(config).preload()\n"
    )
    assert _sdks_loaded_by(code) == "['openai']"


def _sdks_loaded_by(code: str) -> str:
    """The SDKs (sorted, printed) a fresh interpreter has loaded after running ``code``."""
    probe = code + (
        "import sys\n"
        "sdks = ('mcp', 'mcp_types', 'openai', 'anthropic', 'redis')\n"
        "print(sorted(m for m in sdks if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_graph() -> dict[str, set[str]]:
    """Which project module imports which (type-checking-only imports count too)."""
    modules = {_module_name(p): p for layer in LAYERS for p in files(layer)}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for target in targets:
                found = owner(target)
                # A package importing its own modules (its public face) is no cycle.
                if found and found != name and found.rpartition(".")[0] != name:
                    graph[name].add(found)
    return graph


def test_no_import_cycles() -> None:
    graph = _module_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == []


def test_source_files_stay_under_600_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path in sorted(ROOT.rglob("*.py"))
        # Not the virtual environments (.venv, and .venv-phoenix for the trace backend).
        if not any(part.startswith(".venv") for part in path.parts)
        and (n := len(path.read_text().splitlines())) > 600
    ]
    assert long == []
