"""How a message's stored file references appear on the wire.

A message keeps its files as references in ``meta["attachments"]`` (``id``,
``name``, ``mime``, ``size``); frames and the history carry them as
:class:`~protocol.server.MessageAttachment` with the ``url`` a member
downloads the file from, never the bytes.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from protocol.server import MessageAttachment


def attachment_url(group_id: str, attachment_id: str) -> str:
    """Where a member downloads an attachment (``GET``, with a session)."""
    return f"/api/groups/{quote(group_id)}/attachments/{quote(attachment_id)}"


def message_attachments(group_id: str, refs: object) -> list[MessageAttachment] | None:
    """A message's stored references as wire models; None when it has none."""
    if not isinstance(refs, list):
        return None
    out = [
        MessageAttachment(
            id=ref["id"],
            name=str(ref.get("name") or "file"),
            mime=str(ref.get("mime") or "application/octet-stream"),
            size=ref.get("size") if isinstance(ref.get("size"), int) else None,
            url=attachment_url(group_id, ref["id"]),
        )
        for ref in refs
        if isinstance(ref, dict) and isinstance(ref.get("id"), str)
    ]
    return out or None


def attachment_dicts(group_id: str, refs: object) -> list[dict[str, Any]] | None:
    """:func:`message_attachments` as JSON-ready dicts (for HTTP answers)."""
    models = message_attachments(group_id, refs)
    if models is None:
        return None
    return [m.model_dump(by_alias=True, exclude_none=True) for m in models]
