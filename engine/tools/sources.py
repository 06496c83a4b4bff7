"""Several sources of a turn's own tools as one (a group's MCP tools and its A2A agents)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.tools.registry import Tool, ToolSource


class ToolSources:
    """The tools of every source, in order; the first source that knows a name answers for it."""

    def __init__(self, *sources: ToolSource) -> None:
        self.sources = sources

    def tools(self) -> Sequence[Tool]:
        return [tool for source in self.sources for tool in source.tools()]

    async def resolve(self, name: str) -> Tool | None:
        for source in self.sources:
            tool = await source.resolve(name)
            if tool is not None:
                return tool
        return None

    def missing(self, name: str) -> str | None:
        return next((w for s in self.sources if (w := s.missing(name)) is not None), None)


def joined(current: ToolSource | None, more: ToolSource) -> ToolSource:
    """``more`` added after ``current`` (which may be none yet)."""
    if current is None:
        return more
    if isinstance(current, ToolSources):
        return ToolSources(*current.sources, more)
    return ToolSources(current, more)
