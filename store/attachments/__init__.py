"""Files sent with messages: their bytes and metadata, in two backends.

``store.StoreConfig.open_attachments`` picks the backend from the
deployment's store URL, as for the group store: nothing (or
``"embedded"``) keeps each file under ``<data dir>/attachments``; a Redis
URL keeps each in its own keys (the message's ``meta`` references it by id).
"""

from __future__ import annotations

from store.attachments.files import FileAttachments
from store.attachments.model import (
    AttachmentRecord,
    AttachmentStore,
    new_attachment_id,
)
from store.attachments.redis_backend import RedisAttachments

__all__ = [
    "AttachmentRecord",
    "AttachmentStore",
    "FileAttachments",
    "RedisAttachments",
    "new_attachment_id",
]
