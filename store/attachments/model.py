"""The attachment record and the interface both backends implement.

An attachment belongs to one group from the moment it is stored: an upload
names its group, and a message may only reference attachments of its own
group, so an id learnt in one group opens nothing in another.
"""

from __future__ import annotations

import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any

from store.base import StoreError


def new_attachment_id() -> str:
    """A fresh, unguessable attachment id (``att_...``)."""
    return f"att_{time.time_ns():x}{uuid.uuid4().hex}"


@dataclass(frozen=True, slots=True)
class AttachmentRecord:
    """What is known of a stored file besides its bytes."""

    id: str
    group_id: str
    owner: str
    name: str
    mime: str
    size: int
    sha256: str
    ts: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttachmentRecord:
        return cls(
            id=str(data["id"]),
            group_id=str(data["group_id"]),
            owner=str(data["owner"]),
            name=str(data["name"]),
            mime=str(data["mime"]),
            size=int(data["size"]),
            sha256=str(data["sha256"]),
            ts=float(data["ts"]),
        )

    def ref(self) -> dict[str, Any]:
        """The reference a message keeps in its ``meta["attachments"]``."""
        return {"id": self.id, "name": self.name, "mime": self.mime, "size": self.size}


class AttachmentStore(ABC):
    """Durable storage of attachment bytes by id."""

    @abstractmethod
    async def put(self, record: AttachmentRecord, data: bytes) -> None:
        """Store ``data`` under ``record.id``; the id must be new."""

    @abstractmethod
    async def get(self, attachment_id: str) -> AttachmentRecord | None:
        """The record of ``attachment_id``, or None."""

    @abstractmethod
    async def data(self, attachment_id: str) -> bytes | None:
        """The bytes of ``attachment_id``, or None."""

    @abstractmethod
    async def delete_group(self, group_id: str) -> int:
        """Delete every attachment of ``group_id`` (the group is being deleted); how many.

        Rare and not on a message's path: both backends look through every
        stored record rather than keep an index per group.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional for backends with nothing to close
        """Release connections."""


class AttachmentExists(StoreError):
    """An id was stored twice."""
