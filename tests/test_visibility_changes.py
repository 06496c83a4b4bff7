"""What a VP sees after a message is deleted or its reply regenerated (``actors.visibility``).

The end-to-end paths (a deleted message out of a later turn's context, a
regenerated turn answering afresh) run in ``tests/test_gateway_messages.py``
and ``tests/test_browser_messages.py``; these pin the rules themselves.
"""

from __future__ import annotations

from actors.visibility import DELETED_TEXT, forget_deleted, group_view, rewind
from engine.messages import Message
from store.base import GroupMessage


def gm(mid: str, author: str, text: str, role: str = "user", **meta: object) -> GroupMessage:
    return GroupMessage(id=mid, author=author, role=role, text=text, meta=dict(meta))


def test_a_deleted_message_is_not_shown_to_a_vp_that_has_not_seen_it() -> None:
    log = [
        gm("m1", "ann", "", deleted=True),
        gm("m2", "bob", "still here"),
        gm("m3", "ann", "the question"),
    ]
    context, trigger = group_view(log, "linus", None, "m3")
    assert [m.content for m in context] == ["[bob] still here"]
    assert trigger is not None and trigger.content == "[ann] the question"


def test_a_deleted_message_already_seen_is_blanked_in_place() -> None:
    seen = [
        Message.user("[ann] secret", meta={"group_message_id": "m1"}),
        Message.assistant("noted"),
        Message.user("[ann] other", meta={"group_message_id": "m2"}),
    ]
    log = [gm("m1", "ann", "", deleted=True), gm("m2", "ann", "other")]
    assert forget_deleted(seen, log) == 1
    assert [m.content for m in seen] == [DELETED_TEXT, "noted", "[ann] other"]
    assert [m.role for m in seen] == ["user", "assistant", "user"]
    assert forget_deleted(seen, log) == 0  # once is enough


def test_rewind_cuts_the_transcript_back_to_before_the_trigger() -> None:
    messages = [
        Message.user("[ann] first", meta={"group_message_id": "m1"}),
        Message.assistant("answer one"),
        Message.user("[ann] second", meta={"group_message_id": "m2"}),
        Message.assistant("answer two"),
    ]
    trigger = rewind(messages, [], "linus", "m2")
    assert trigger is not None and trigger.content == "[ann] second"
    assert [m.content for m in messages] == ["[ann] first", "answer one"]


def test_rewind_falls_back_to_the_log_when_the_transcript_lost_the_trigger() -> None:
    messages = [Message.user("summary of earlier turns"), Message.assistant("ok")]
    log = [gm("m9", "ann", "compacted away")]
    trigger = rewind(messages, log, "linus", "m9")
    assert trigger is not None and trigger.content == "[ann] compacted away"
    assert len(messages) == 2
    assert rewind(messages, log, "linus", "m_unknown") is None
