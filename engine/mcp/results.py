"""What an MCP tool result becomes for the model: a text tool result, with its images.

- text blocks are kept as they are;
- an image block is named in the text by its type and size and kept as an
  image (:class:`ImagePart`), which a vision model is sent with the result
  (``engine.attachments.for_model`` describes it to any other); one over
  ``MAX_IMAGE_BYTES`` is only described;
- an audio block is described by its type and size;
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

from engine.attachments import MAX_IMAGE_BYTES
from engine.messages import ImagePart
from engine.tools.registry import ToolOutcome


def _bytes(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def _size(data: str) -> str:
    return f"{_bytes(data):,} bytes"


def _resource(resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents) -> str:
    if isinstance(resource, mcp_types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    mime = resource.mime_type or "application/octet-stream"
    return f"[resource {resource.uri}: {mime}, {_size(resource.blob)} of binary data]"


def _block(block: object) -> str:
    if isinstance(block, mcp_types.TextContent):
        return block.text
    if isinstance(block, mcp_types.ImageContent):
        if _bytes(block.data) > MAX_IMAGE_BYTES:
            return f"[image: {block.mime_type}, {_size(block.data)}; too large to be shown]"
        return f"[image: {block.mime_type}, {_size(block.data)}]"
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
    shown = [
        b
        for b in result.content
        if isinstance(b, mcp_types.ImageContent) and _bytes(b.data) <= MAX_IMAGE_BYTES
    ]
    images = tuple(
        ImagePart(name=f"image {n}", mime=b.mime_type, data=b.data, size=_bytes(b.data))
        for n, b in enumerate(shown, start=1)
    )
    return ToolOutcome(text or "(the tool returned no content)", images=images)
