"""Files in a transcript: images as image parts, everything else as words.

A person's message may carry files. By the time a message reaches the
engine, text files have been inlined into its text and other files
described there (``actors.attachments``); images travel as
:class:`ImagePart` in :attr:`Message.images`, which each provider renders
in its own wire shape. A model that cannot see images gets a description
instead (:func:`for_model`), decided per model by the registry's vision
flag or the ``vision_models`` setting, so a fallback to a text-only model still works.

Images are kept only for the turn that reads them: :func:`drop_images`
turns them into a short note before a transcript is stored, so neither the
stored transcript nor compaction ever carries megabytes of base64.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from engine.messages import ImagePart, Message

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types both providers accept; other ``image/*`` files are described."""

TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-sh",
        "application/sql",
    }
)
TEXT_SUFFIXES = frozenset(
    ".txt .md .markdown .json .yaml .yml .toml .csv .tsv .xml .html .css .js .ts .tsx .jsx "
    ".py .rs .go .java .kt .c .h .cpp .hpp .cs .rb .php .sh .sql .ini .cfg .log .swift".split()
)


MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""The largest image sent as an image (providers refuse bigger ones); larger ones are described."""


def kind_of(name: str, mime: str) -> str:
    """``image``, ``text`` or ``other``: how a file of this name and type reaches a model."""
    mime = mime.lower()
    if mime in IMAGE_TYPES:
        return "image"
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if mime.startswith("text/") or mime in TEXT_TYPES or suffix in TEXT_SUFFIXES:
        return "text"
    return "other"


def describe(name: str, mime: str, size: int | None) -> str:
    """One line naming a file the model is not shown."""
    sized = f", {size} bytes" if size is not None else ""
    return f"[attached file: {name} ({mime}{sized}); its contents are not shown to you]"


def image_note(image: ImagePart) -> str:
    return f"[attached image: {image.name} ({image.mime}, {image.size} bytes)]"


def supports_vision(model: str, patterns: Sequence[str]) -> bool:
    """Whether ``provider:name`` matches one of the ``vision_models`` glob patterns."""
    return any(fnmatchcase(model, pattern) for pattern in patterns)


def for_model(messages: list[Message], vision: bool) -> list[Message]:
    """``messages`` as a model sees them: images kept for a vision model, else described."""
    if vision or not any(m.images for m in messages):
        return messages
    return [
        _without_images(m, "(this model cannot see images)") if m.images else m for m in messages
    ]


def drop_images(messages: list[Message]) -> list[Message]:
    """``messages`` with every image replaced by a note (for storing a transcript)."""
    if not any(m.images for m in messages):
        return messages
    return [_without_images(m, "(shown earlier)") if m.images else m for m in messages]


def _without_images(message: Message, note: str) -> Message:
    lines = [f"{image_note(i)} {note}" for i in message.images]
    text = "\n".join([message.content, *lines]) if message.content else "\n".join(lines)
    return message.model_copy(update={"content": text, "images": []})
