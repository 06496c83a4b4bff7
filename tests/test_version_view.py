"""What a VP reads of edited messages and of replies with versions (``actors.version_view``).

Plain functions over a VP's transcript and the group's log: the rule of
docs/architecture.md, "Versions in a VP's context".
"""

from __future__ import annotations

from actors.version_view import refresh_versions
from actors.visibility import group_view, rewind
from engine.messages import Message
from store.base import GroupMessage
from store.versions import as_chosen, as_edited


def person(text: str, **meta: object) -> GroupMessage:
    return GroupMessage(author="ann", role="user", text=text, meta=dict(meta))


def reply(vp: str, text: str, trigger: str, **meta: object) -> GroupMessage:
    return GroupMessage(
        author=vp, role="assistant", text=text, meta={"causedBy": [trigger], **meta}
    )


def seen(gm: GroupMessage, text: str) -> Message:
    return Message.user(text, speaker=gm.author, meta={"group_message_id": gm.id})


def test_an_edited_message_is_read_as_it_reads_now() -> None:
    asked = person("LRU?")
    transcript = [seen(asked, "[ann] LRU?"), Message.assistant("use a list")]
    log = [as_edited(asked, "LFU?", "ann", 5.0)]
    assert refresh_versions(transcript, log, "linus") == set()
    assert transcript[0].content == "[ann] LFU?"
    assert transcript[1].content == "use a list"  # the VP's own words stay


def test_another_vps_reply_is_read_in_the_version_the_group_shows() -> None:
    asked = person("LRU?")
    first = reply("kent", "a list", asked.id, supersededBy="t2")
    second = reply("kent", "a dict", asked.id, regenerates=first.id)
    later = person("and now?")
    # linus read the first version before it was answered again.
    transcript = [seen(asked, "[ann] LRU?"), seen(first, "[@kent] a list")]
    log = [asked, first, second, later]
    hidden = refresh_versions(transcript, log, "linus")
    assert [m.content for m in transcript] == ["[ann] LRU?", "[@kent] a dict"]
    assert transcript[1].meta["group_message_id"] == second.id
    # The second version is not read again as a new message after the cursor.
    context, trigger = group_view(log, "linus", first.id, later.id, hidden)
    assert context == [] and trigger is not None and trigger.content == "[ann] and now?"

    # The group picks the first version back: that is what linus reads.
    log = [asked, as_chosen(first, first.id, "bob", 9.0), second, later]
    hidden = refresh_versions(transcript, log, "linus")
    assert transcript[1].content == "[@kent] a list"
    # A VP that never read the reply reads the chosen version once, in its place.
    context, _ = group_view(log, "steve", None, later.id, refresh_versions([], log, "steve"))
    assert [m.content for m in context] == ["[ann] LRU?", "[@kent] a list"]


def test_a_resent_turn_answers_the_edited_text() -> None:
    asked = person("LRU?")
    transcript = [
        Message.user("earlier"),
        seen(asked, "[ann] LRU?"),
        Message.assistant("use a list"),
    ]
    log = [as_edited(asked, "LFU?", "ann", 5.0)]
    trigger = rewind(transcript, log, "linus", asked.id)
    assert trigger is not None and trigger.content == "[ann] LFU?"
    assert [m.content for m in transcript] == ["earlier"]
