"""A2A client: remote agents from the ``a2aAgents`` configuration as engine tools.

``config`` reads the configuration, ``remote`` keeps one agent (its card,
read lazily, and its calls; the only module that imports the SDK: a process
without agents never loads it), ``tools`` holds every agent of a process
and builds a turn's tools.
"""

from engine.a2a.config import (
    TOOL_PREFIX,
    A2aConfig,
    A2aConfigError,
    AgentSpec,
    load_a2a_config,
    parse_a2a_config,
)
from engine.a2a.tools import A2aManager, A2aToolset, AgentStatus, tool_name

__all__ = [
    "TOOL_PREFIX",
    "A2aConfig",
    "A2aConfigError",
    "A2aManager",
    "A2aToolset",
    "AgentSpec",
    "AgentStatus",
    "load_a2a_config",
    "parse_a2a_config",
    "tool_name",
]
