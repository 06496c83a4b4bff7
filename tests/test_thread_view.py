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


ASKED = _m("msg_03", "bob", "@steve @linus which structure?", "msg_01")
STEVE_1 = _m("msg_04", "steve", "a list", "msg_01", supersededBy="t8")
LINUS_1 = _m("msg_05", "linus", "an array", "msg_01", supersededBy="t9")
MORE = _m("msg_07", "ann", "and for the index?", "msg_01")
STEVE_2 = _m("msg_08", "steve", "a dict", "msg_01", regenerates="msg_04")
LINUS_2 = _m("msg_09", "linus", "a ring buffer", "msg_01", regenerates="msg_05")
SO = _m("msg_10", "ann", "@linus so?", "msg_01")


def test_a_thread_turn_sees_one_version_of_each_reply_in_its_first_versions_place() -> None:
    replies = [ASKED, STEVE_1, LINUS_1, MORE, STEVE_2, LINUS_2, SO]
    context, trigger = thread_view(ROOT, replies, "linus", "msg_10")
    assert [(m.role, m.content) for m in context] == [
        ("user", "[ann] which cache?"),
        ("user", "[bob] @steve @linus which structure?"),
        ("user", "[@steve] a dict"),  # the version the group shows: the newest
        ("assistant", "a ring buffer"),  # its own: the one it ran last
        ("user", "[ann] and for the index?"),
    ]
    assert context[2].meta["group_message_id"] == "msg_08"
    assert trigger is not None and trigger.content == "[ann] @linus so?"


def test_a_picked_version_is_what_a_thread_turn_sees_of_another_vps_reply() -> None:
    picked_steve = _m(
        "msg_04", "steve", "a list", "msg_01", supersededBy="t8", chosenVersion="msg_04"
    )
    picked_linus = _m(
        "msg_05", "linus", "an array", "msg_01", supersededBy="t9", chosenVersion="msg_05"
    )
    replies = [ASKED, picked_steve, picked_linus, MORE, STEVE_2, LINUS_2, SO]
    context, _ = thread_view(ROOT, replies, "linus", "msg_10")
    # The group picked the first versions back: linus reads steve's first,
    # and keeps its own memory of the turn it ran last.
    assert [m.content for m in context][2:4] == ["[@steve] a list", "a ring buffer"]
    context, _ = thread_view(ROOT, replies, "steve", "msg_10")
    assert [m.content for m in context][2:4] == ["a dict", "[@linus] an array"]


def test_a_reply_whose_versions_are_all_deleted_is_not_seen_in_a_thread() -> None:
    gone_1 = _m("msg_04", "steve", "", "msg_01", supersededBy="t8", deleted=True)
    gone_2 = _m("msg_08", "steve", "", "msg_01", regenerates="msg_04", deleted=True)
    context, _ = thread_view(ROOT, [ASKED, gone_1, MORE, gone_2, SO], "linus", "msg_10")
    assert [m.content for m in context] == [
        "[ann] which cache?",
        "[bob] @steve @linus which structure?",
        "[ann] and for the index?",
    ]
