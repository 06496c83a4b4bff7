"""What a group's event log stores and hands back: the frame's text plus a small header.

A frame is serialised once, when it is appended: ``encode_event`` dumps it
without ``seq`` (wire names, ``None`` left out) and the backend splices the
seq it assigns in after the opening brace (``with_seq``), inside the same
transaction or Lua script. What a read returns is exactly that text, so the
gateway forwards it to every client as is. Beside the text each event keeps
the few fields a subscriber filter looks at (``type``, ``vpId`` and the
``data.type`` of ``yeaft_output``), so nothing on the read path parses JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from protocol import (
    ErrorCode,
    EventFrame,
    GroupEventFrame,
    ProtocolError,
    YeaftOutput,
    dumps,
    parse_server_frame,
)


@dataclass(frozen=True, slots=True)
class EventHeader:
    """The fields of a stored event that filters read without decoding its text.

    ``vp_id`` is the frame's ``vpId`` (None when it has none); ``data_type``
    is ``data.type`` of a ``yeaft_output`` frame and None for other frames.
    A ``group_message`` has no ``vpId`` (its author may be a person): it is
    the group's, like a notice, and no VP filter hides it.
    """

    type: str
    vp_id: str | None = None
    data_type: str | None = None

    @classmethod
    def of(cls, frame: EventFrame) -> EventHeader:
        # A frame's own fields say it: a VP's frames have ``vp_id``; the
        # group's (a message, an update, a change) have none.
        vp_id: str | None = getattr(frame, "vp_id", None)
        data_type = frame.data.type if isinstance(frame, YeaftOutput) else None
        return cls(type=frame.type, vp_id=vp_id, data_type=data_type)

    @classmethod
    def of_envelope(cls, envelope: dict[str, Any]) -> EventHeader:
        """The header of an already decoded envelope (events stored before headers were)."""
        vp = envelope.get("vpId")
        data = envelope.get("data")
        data_type = data.get("type") if isinstance(data, dict) else None
        kind = envelope.get("type")
        return cls(
            type=kind if isinstance(kind, str) else "",
            vp_id=vp if isinstance(vp, str) else None,
            data_type=data_type if kind == "yeaft_output" and isinstance(data_type, str) else None,
        )


@dataclass(frozen=True, slots=True)
class EncodedEvent:
    """A frame ready to append: its JSON text without ``seq``, and its header."""

    body: str
    header: EventHeader


def encode_event(frame: EventFrame) -> EncodedEvent:
    """Serialise ``frame`` once, leaving ``seq`` out for the log to fill in.

    A ``seq`` the caller set is ignored (the caller's frame is not changed):
    only the log knows the next one.
    """
    if frame.seq is not None:
        frame = frame.model_copy(update={"seq": None})
    return EncodedEvent(body=dumps(frame), header=EventHeader.of(frame))


def with_seq(body: str, seq: int) -> str:
    """``body`` (a JSON object without ``seq``) with ``"seq":N`` as its first member.

    Every event frame has a ``type``, so the object is never empty and the
    splice always needs the comma. The Redis backend does the same in Lua.
    """
    return f'{{"seq":{seq},{body[1:]}'


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event as the log holds it.

    ``text`` is exactly the stored JSON, ``seq`` included, ready to send to
    a client. ``type``, ``vp_id`` and ``data_type`` repeat the header fields
    of that JSON (see ``EventHeader``) so a filter need not decode it.
    """

    seq: int
    text: str
    type: str
    vp_id: str | None = None
    data_type: str | None = None

    @classmethod
    def from_header(cls, seq: int, text: str, header: EventHeader) -> StoredEvent:
        return cls(seq, text, header.type, header.vp_id, header.data_type)

    def envelope(self) -> dict[str, Any]:
        """The stored JSON decoded (for tests and tools; the hot path forwards ``text``)."""
        decoded: dict[str, Any] = json.loads(self.text)
        return decoded

    def frame(self) -> GroupEventFrame:
        """The stored JSON parsed into its protocol model; ProtocolError when it is not one."""
        frame = parse_server_frame(self.text)
        if not isinstance(frame, GroupEventFrame):
            raise ProtocolError(
                ErrorCode.INVALID_FRAME, f"a {frame.type} frame does not belong in an event log"
            )
        return frame


@dataclass(frozen=True, slots=True)
class EventBatch:
    """What a read of a group's event log returns.

    ``events`` are in seq order. ``gap`` is True when the reader asked for
    sequence numbers older than retention: the events it missed are gone and
    ``first_seq`` is the oldest still held. ``last_seq`` is the newest
    sequence number the log has assigned.
    """

    events: list[StoredEvent] = field(default_factory=list)
    gap: bool = False
    first_seq: int = 0
    last_seq: int = 0

    def head_reached(self, after_seq: int) -> int | None:
        """The newest seq, when this read (made after ``after_seq``) got everything up to it."""
        end = self.events[-1].seq if self.events else after_seq
        return end if end == self.last_seq else None


def make_batch(
    after_seq: int, events: list[StoredEvent], first_seq: int, last_seq: int
) -> EventBatch:
    """Build the answer of a read, deciding the gap signal in one place.

    A gap means the reader's next wanted seq (``after_seq + 1``) is older than
    the oldest seq still held, so some events it never saw were trimmed.
    """
    gap = first_seq > 0 and after_seq + 1 < first_seq
    return EventBatch(events=events, gap=gap, first_seq=first_seq, last_seq=last_seq)
