"""Files sent with messages: their bytes and metadata, in two backends.

``store.StoreConfig.open_attachments`` picks the backend from the
deployment's store URL, as for the group store: nothing (or
``"embedded"``) keeps each file under ``<data dir>/attachments``; a Redis
URL keeps each in its own keys (the message's ``meta`` references it by id):
``store.attachments.redis_backend``, imported only by a process that uses
Redis (importing redis costs every actor process time and memory).
"""

from __future__ import annotations

from store.attachments.files import FileAttachments
from store.attachments.model import (
    AttachmentRecord,
    AttachmentStore,
    new_attachment_id,
)

__all__ = [
    "AttachmentRecord",
    "AttachmentStore",
    "FileAttachments",
    "new_attachment_id",
]
