"""What a VP sees when it answers in a thread, and on the main timeline (``actors.threads``)."""

from __future__ import annotations

from actors.threads import main_timeline, thread_view
from store.base import GroupMessage
from store.threads import THREAD_KEY


def _m(mid: str, author: str, text: str, thread: str | None = None, **meta: object) -> GroupMessage:
    role = "assistant" if author in ("linus", "steve") else "user"
    full: dict[str, object] = {**meta, **({THREAD_KEY: thread} if thread else {})}
    return GroupMessage(id=mid, author=author, role=role, text=text, meta=full)


ROOT = _m("msg_01", "ann", "which cache?")
REPLIES = [
    _m("msg_03", "bob", "@linus LRU?", "msg_01"),
    _m("msg_04", "linus", "yes, LRU", "msg_01"),
    _m("msg_05", "steve", "or ARC", "msg_01"),
    _m("msg_06", "gone", "", "msg_01", deleted=True),
    _m("msg_07", "ann", "@linus and ARC?", "msg_01"),
    _m("msg_09", "bob", "later in the thread", "msg_01"),
]


def test_a_thread_turn_sees_the_root_and_the_thread_up_to_its_trigger() -> None:
    context, trigger = thread_view(ROOT, REPLIES, "linus", "msg_07")
    assert [(m.role, m.content) for m in context] == [
        ("user", "[ann] which cache?"),
        ("user", "[bob] @linus LRU?"),
        ("assistant", "yes, LRU"),  # its own earlier answer, as its own
        ("user", "[@steve] or ARC"),
    ]
    assert trigger is not None and trigger.content == "[ann] @linus and ARC?"


def test_a_deleted_root_leaves_the_thread_and_an_own_deleted_reply_is_gone() -> None:
    gone = [*REPLIES[:1], _m("msg_04", "linus", "", "msg_01", deleted=True), REPLIES[4]]
    context, trigger = thread_view(None, gone, "linus", "msg_07")
    assert [m.content for m in context] == ["[bob] @linus LRU?"]
    assert trigger is not None


def test_the_main_timeline_leaves_every_thread_out() -> None:
    later = _m("msg_08", "ann", "main again")
    assert main_timeline([ROOT, *REPLIES, later]) == [ROOT, later]
