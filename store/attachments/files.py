"""The embedded backend: each attachment a pair of files under the data directory.

``<dir>/<id>.bin`` holds the bytes and ``<dir>/<id>.json`` the record. Both
are written to a temporary name and renamed, the record last, so a record
on disk always has its bytes and a crash leaves no half file behind.
Attachment ids are checked before they become paths.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from protocol.common import is_id
from store.attachments.model import AttachmentExists, AttachmentRecord, AttachmentStore

DIR_NAME = "attachments"


class FileAttachments(AttachmentStore):
    def __init__(self, data_dir: Path) -> None:
        self.dir = Path(data_dir).expanduser() / DIR_NAME

    def _paths(self, attachment_id: str) -> tuple[Path, Path] | None:
        if not is_id(attachment_id):
            return None
        return self.dir / f"{attachment_id}.bin", self.dir / f"{attachment_id}.json"

    async def put(self, record: AttachmentRecord, data: bytes) -> None:
        await asyncio.to_thread(self._put, record, data)

    def _put(self, record: AttachmentRecord, data: bytes) -> None:
        paths = self._paths(record.id)
        if paths is None:
            raise ValueError(f"bad attachment id {record.id!r}")
        blob, meta = paths
        self.dir.mkdir(parents=True, exist_ok=True)
        if meta.exists():
            raise AttachmentExists(f"attachment {record.id} exists")
        _write(blob, data)
        _write(meta, json.dumps(record.to_json()).encode())

    async def get(self, attachment_id: str) -> AttachmentRecord | None:
        paths = self._paths(attachment_id)
        if paths is None:
            return None
        try:
            raw = await asyncio.to_thread(paths[1].read_bytes)
        except FileNotFoundError:
            return None
        return AttachmentRecord.from_json(json.loads(raw))

    async def data(self, attachment_id: str) -> bytes | None:
        paths = self._paths(attachment_id)
        if paths is None or not paths[1].exists():
            return None
        try:
            return await asyncio.to_thread(paths[0].read_bytes)
        except FileNotFoundError:
            return None

    async def delete_group(self, group_id: str) -> int:
        return await asyncio.to_thread(self._delete_group, group_id)

    def _delete_group(self, group_id: str) -> int:
        deleted = 0
        for meta in self.dir.glob("*.json"):
            try:
                record = AttachmentRecord.from_json(json.loads(meta.read_bytes()))
            except (OSError, ValueError, KeyError):
                continue  # gone meanwhile, or not a record of ours
            if record.group_id != group_id:
                continue
            # The record first: from then on the file is unknown, even if
            # the bytes were to outlive a crash here.
            meta.unlink(missing_ok=True)
            meta.with_suffix(".bin").unlink(missing_ok=True)
            deleted += 1
        return deleted


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
