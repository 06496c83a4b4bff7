"""Editing a person's message and resending it (the handlers; ``coordinator.versions``).

An edit is the coordinator's because of one rule: a message with a turn
still running on it (answering it, or further down the chain it started)
is not edited. The turn would go on answering a text the message no longer
says; the person stops it first. The check and the write happen in one
step of the shard that launches the group's turns, so no turn can start on
the message in between.
"""

from __future__ import annotations

import time

from coordinator.commands import EditMessage, Resend
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.shard import OPS, Shard
from coordinator.versions import EditResult, ResendResult, resend
from protocol import MAX_TEXT_LENGTH
from store.base import Group, GroupMessage
from store.retry import until_stored
from store.versions import VersionError, edited_frame


async def _own_message(shard: Shard, group: Group, message_id: str, by: str) -> GroupMessage:
    """``by``'s own, undeleted message ``message_id``, with no turn running on it."""
    message = await shard.store.get_message(group.id, message_id)
    if message is None or by not in group.members:
        raise GroupError(GroupErrorCode.NOT_FOUND, "no such message in this group")
    if message.role != "user":
        raise GroupError(GroupErrorCode.NOT_AUTHOR, "a VP's message cannot be edited or resent")
    if message.author != by:
        raise GroupError(GroupErrorCode.NOT_AUTHOR, "only its author can edit or resend a message")
    if message.meta.get("deleted"):
        raise GroupError(GroupErrorCode.DELETED, "a deleted message cannot be edited or resent")
    running = shard.turns.running_on(group.id, message.id)
    if running:
        names = ", ".join(f"@{vp}" for vp in running)
        raise GroupError(
            GroupErrorCode.TURN_RUNNING,
            f"{names} still answering this message: stop their turns first",
            detail={"vps": running},
        )
    return message


@OPS.on(EditMessage)
async def edit_message(shard: Shard, cmd: EditMessage) -> EditResult:
    """Store the new version, tell every member, and rerun its VPs when asked."""
    await shard.recover()
    group = await shard.groups.require(cmd.group_id)
    if not cmd.text.strip() or len(cmd.text) > MAX_TEXT_LENGTH:
        raise GroupError(
            GroupErrorCode.INVALID_TEXT,
            f"a message's text is 1 to {MAX_TEXT_LENGTH} characters, not only spaces",
        )
    await _own_message(shard, group, cmd.message_id, cmd.by)
    try:
        edited = await shard.store.edit_message(
            group.id, cmd.message_id, cmd.text, by=cmd.by, ts=time.time()
        )
    except VersionError as exc:
        raise GroupError(GroupErrorCode(exc.code.value), exc.message) from exc
    if edited is None:
        raise GroupError(GroupErrorCode.NOT_FOUND, "no such message in this group")
    # Retried while the store is away: a member who missed it would show the old text.
    frame = edited_frame(group.id, edited)
    await until_stored(lambda: shard.store.append_event(group.id, frame), f"edit of {edited.id}")
    resent = await resend(shard, group, edited, cmd.by) if cmd.resend else None
    return EditResult(edited, resent)


@OPS.on(Resend)
async def resend_message(shard: Shard, cmd: Resend) -> ResendResult:
    """Have the VPs that answered the message answer its current version again."""
    await shard.recover()
    group = await shard.groups.require(cmd.group_id)
    message = await _own_message(shard, group, cmd.message_id, cmd.by)
    return await resend(shard, group, message, cmd.by)
