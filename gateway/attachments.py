"""Files with messages at the gateway: limits, inline decoding, uploads, references.

A message names its files in its frame's ``attachments``: inline (name,
mime, base64) for small ones, or by the id an upload returned
(``POST /api/groups/{id}/attachments``) for larger ones, so the WebSocket
frame limit stays small. :meth:`AttachmentService.accept` turns that list
into the references stored with the message (``meta["attachments"]``:
``id``, ``name``, ``mime``, ``size``); the bytes live in the attachment
store (``store.attachments``).

Limits are settings: bytes per file, files per message and bytes per
message (inline and uploaded together). Going over any of them is an
``attachment_too_large`` error; nothing is stored for a refused message.
An uploaded file belongs to the group it was uploaded to: a message in
another group that names its id is refused (``forbidden``).
"""

from __future__ import annotations

import binascii
import hashlib
import time
from dataclasses import dataclass
from typing import Any

from gateway.errors import GatewayError
from protocol import Attachment, ErrorCode
from store.attachments import AttachmentRecord, AttachmentStore, new_attachment_id


@dataclass(frozen=True, slots=True)
class AttachmentLimits:
    """How much a message may carry; from ``YEAFT_ATTACHMENT_*`` settings."""

    max_file_bytes: int = 10 * 1024 * 1024
    max_count: int = 8
    max_message_bytes: int = 20 * 1024 * 1024


def too_large(message: str, field: str, limit: int) -> GatewayError:
    return GatewayError(
        ErrorCode.ATTACHMENT_TOO_LARGE, message, field=field, detail={"limit": limit}
    )


class AttachmentService:
    """Checks, stores and resolves the files of messages for one gateway process."""

    def __init__(self, store: AttachmentStore, limits: AttachmentLimits) -> None:
        self.store = store
        self.limits = limits

    async def upload(
        self, owner: str, group_id: str, name: str, mime: str, data: bytes
    ) -> AttachmentRecord:
        """Store one uploaded file in ``group_id`` (access already checked)."""
        if len(data) > self.limits.max_file_bytes:
            raise too_large(
                f"a file may have at most {self.limits.max_file_bytes} bytes",
                "body",
                self.limits.max_file_bytes,
            )
        record = _record(owner, group_id, name, mime, data)
        await self.store.put(record, data)
        return record

    async def accept(
        self, owner: str, group_id: str, items: list[Attachment] | None
    ) -> list[dict[str, Any]]:
        """The references to store with a message; refuses the whole list on any problem."""
        if not items:
            return []
        limits = self.limits
        if len(items) > limits.max_count:
            raise too_large(
                f"a message may have at most {limits.max_count} files",
                "attachments",
                limits.max_count,
            )
        inline: list[tuple[AttachmentRecord, bytes]] = []
        refs: list[AttachmentRecord] = []
        total = 0
        for i, item in enumerate(items):
            field = f"attachments.{i}"
            if item.id is not None:
                record = await self.store.get(item.id)
                if record is None:
                    raise GatewayError(
                        ErrorCode.NOT_FOUND, "no such attachment", field=f"{field}.id"
                    )
                if record.group_id != group_id:
                    raise GatewayError(
                        ErrorCode.FORBIDDEN,
                        "that attachment belongs to another conversation; upload it here",
                        field=f"{field}.id",
                    )
                refs.append(record)
                total += record.size
            else:
                data = _decode(item.base64 or "", f"{field}.base64")
                if len(data) > limits.max_file_bytes:
                    raise too_large(
                        f"a file may have at most {limits.max_file_bytes} bytes",
                        f"{field}.base64",
                        limits.max_file_bytes,
                    )
                record = _record(owner, group_id, item.name or "file", item.mime or "", data)
                inline.append((record, data))
                refs.append(record)
                total += len(data)
            if total > limits.max_message_bytes:
                raise too_large(
                    f"a message's files may have at most {limits.max_message_bytes} bytes",
                    "attachments",
                    limits.max_message_bytes,
                )
        for record, data in inline:
            await self.store.put(record, data)
        return [r.ref() for r in refs]

    async def open(self, group_id: str, attachment_id: str) -> tuple[AttachmentRecord, bytes]:
        """An attachment of ``group_id`` with its bytes (access already checked)."""
        record = await self.store.get(attachment_id)
        data = await self.store.data(attachment_id) if record is not None else None
        if record is None or data is None or record.group_id != group_id:
            raise GatewayError(ErrorCode.NOT_FOUND, "no such attachment")
        return record, data


def _record(owner: str, group_id: str, name: str, mime: str, data: bytes) -> AttachmentRecord:
    return AttachmentRecord(
        id=new_attachment_id(),
        group_id=group_id,
        owner=owner,
        name=name,
        mime=mime or "application/octet-stream",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        ts=time.time(),
    )


def _decode(text: str, field: str) -> bytes:
    try:
        return binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise GatewayError(
            ErrorCode.INVALID_FRAME, "the file is not valid base64", field=field
        ) from exc
