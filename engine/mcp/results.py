"""What an MCP tool result becomes for the model: one text tool result.

The engine's tool results are text (``engine.messages.Message.content``), so:

- text blocks are kept as they are;
- an image or audio block is described by its type and size (the engine has
  no image blocks in tool results; the model learns that an image came back
  and what kind, not its pixels);
- an embedded text resource is given with its URI, a binary one described;
- a resource link is named with its URI;
- structured content is given as JSON when the result carries no text.

``isError`` results become error results with the server's own words.
"""

from __future__ import annotations

import base64
import binascii
import json

import mcp_types

from engine.tools.registry import ToolOutcome


def _size(data: str) -> str:
    try:
        n = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        n = len(data) * 3 // 4
    return f"{n:,} bytes"


def _resource(resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents) -> str:
    if isinstance(resource, mcp_types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    mime = resource.mime_type or "application/octet-stream"
    return f"[resource {resource.uri}: {mime}, {_size(resource.blob)} of binary data]"


def _block(block: object) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        return (
            f"[image: {block.mime_type}, {_size(block.data)}; "
            "images from tools are not shown to the model]"
        )
    if isinstance(block, mcp_types.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, mcp_types.ResourceLink):
        mime = f" ({block.mime_type})" if block.mime_type else ""
        return f"[resource link: {block.name} <{block.uri}>{mime}]"
    if isinstance(block, mcp_types.EmbeddedResource):
        return _resource(block.resource)
    return f"[{getattr(block, 'type', 'unknown')} content]"


def map_result(result: mcp_types.CallToolResult) -> ToolOutcome:
    """The tool result the model sees for ``result``."""
    parts = [_block(b) for b in result.content]
    if result.structured_content is not None and not result.content:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(p for p in parts if p)
    if result.is_error:
        return ToolOutcome(text or "the tool reported an error without a message", is_error=True)
    return ToolOutcome(text or "(the tool returned no content)")
