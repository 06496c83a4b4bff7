"""A message's files as a VP's model receives them.

The group log keeps only references to a person's files
(``meta["attachments"]``); :func:`actors.visibility.group_view` copies them
onto the messages a VP may see, so files follow exactly the visibility of
their message. Before a turn, :func:`open_files` reads them from the
attachment store: images become :class:`~engine.messages.ImagePart` (a model
that cannot see images gets a description instead, ``engine.attachments``),
text files are inlined (cut at :data:`MAX_TEXT_CHARS`), and anything else
is described by name, type and size.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from engine.attachments import MAX_IMAGE_BYTES, describe, kind_of
from engine.messages import ImagePart, Message
from store.attachments import AttachmentStore

log = logging.getLogger(__name__)

MAX_TEXT_CHARS = 50_000
"""The most of one text file inlined into a message; the rest is cut with a note."""

FILES_KEY = "attachments"
OPENED_KEY = "attachments_opened"


async def open_files(messages: list[Message], store: AttachmentStore) -> list[Message]:
    """``messages`` with their files read in; messages without files are returned as they are."""
    out: list[Message] = []
    for msg in messages:
        refs = msg.meta.get(FILES_KEY)
        if not isinstance(refs, list) or not refs or msg.meta.get(OPENED_KEY):
            out.append(msg)
            continue
        notes: list[str] = []
        images: list[ImagePart] = []
        for ref in refs:
            if isinstance(ref, dict):
                await _open_one(ref, store, notes, images)
        text = "\n\n".join([msg.content, *notes]) if msg.content else "\n\n".join(notes)
        meta = {**msg.meta, OPENED_KEY: True}
        out.append(msg.model_copy(update={"content": text, "images": images, "meta": meta}))
    return out


async def _open_one(
    ref: dict[str, Any], store: AttachmentStore, notes: list[str], images: list[ImagePart]
) -> None:
    name = str(ref.get("name") or "file")
    mime = str(ref.get("mime") or "application/octet-stream")
    size = ref.get("size") if isinstance(ref.get("size"), int) else None
    kind = kind_of(name, mime)
    if kind == "other" or (kind == "image" and (size or 0) > MAX_IMAGE_BYTES):
        notes.append(describe(name, mime, size))
        return
    try:
        data = await store.data(str(ref.get("id")))
    except Exception as exc:  # a store outage must not fail the turn
        log.warning("attachment %s could not be read: %s", ref.get("id"), exc)
        data = None
    if data is None:
        notes.append(f"[attached file: {name} ({mime}); it could not be read]")
    elif kind == "image":
        encoded = base64.b64encode(data).decode("ascii")
        images.append(ImagePart(name=name, mime=mime, data=encoded, size=len(data)))
    else:
        notes.append(_inline(name, mime, data))


def _inline(name: str, mime: str, data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    cut = ""
    if len(text) > MAX_TEXT_CHARS:
        cut = f"\n[… {len(text) - MAX_TEXT_CHARS} more characters not shown]"
        text = text[:MAX_TEXT_CHARS]
    return f'<file name="{name}" type="{mime}">\n{text}{cut}\n</file>'
