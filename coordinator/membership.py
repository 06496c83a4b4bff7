"""Members, the owner and settings of a group, changed by the coordinator that owns it.

Only the owner changes members and settings; any member may leave. Every
change is made under the group's lock (``GroupBook.locked``), so two changes
never read the same record and write over each other, and a member change
is applied by the store atomically too (``store.members``), against the
record as it is stored. Then it is announced, in this order:

1. a ``group_update`` in the group's event log (``action`` ``members``,
   ``owner`` or ``settings``, the new group and who did it), which every
   subscriber on every gateway process sees in order;
2. a notice (a ``system`` line live, and a message in the group log, so it is
   in the history after a reload);
3. for member changes and deletions, a ``directory`` event in the store's
   directory log: every gateway process tails it, ends the subscriptions of
   removed people, tells people who are not watching the group, and drops
   the watchers of a deleted group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.group_events import GroupEvents
from coordinator.errors import GroupError, GroupErrorCode
from coordinator.groups import GroupBook, valid_name
from protocol import GroupUpdate
from protocol.members import DirectoryEvent
from protocol.settings import GroupSettings, GroupSettingsPatch
from store.base import Group, Store
from store.conversation import GroupKind
from store.members import DIRECTORY_LOG, MemberChange, MemberError, MemberErrorCode
from store.membership import group_view, owner_of
from store.retry import until_stored

_MEMBER_ERRORS = {
    MemberErrorCode.NOT_MEMBER: GroupErrorCode.NOT_MEMBER,
    MemberErrorCode.OWNER_LEAVING: GroupErrorCode.OWNER_LEAVING,
    MemberErrorCode.LAST_MEMBER: GroupErrorCode.LAST_MEMBER,
}

# How settings are named in notices.
_LABELS = {
    "language": "language",
    "broadcast_when_unmentioned": "no mention means everyone",
    "vp_mentions_dispatch": "VP @mentions dispatch",
    "fanout_cap": "VPs per message",
    "max_chain_depth": "chain depth",
    "throttle_hits": "hand-offs per VP per window",
    "throttle_window_s": "throttle window (s)",
    "max_pair_exchanges": "exchanges per VP pair",
    "max_turns_per_message": "VP turns per message",
    "model": "model",
    "auto_approve": "run tools without asking",
    "tool_policies": "tool policies",
    "approval_timeout_s": "approval timeout (s)",
}


@dataclass(frozen=True, slots=True)
class GroupEdit:
    """What an owner changes at once: name, default VP and any settings (None: unchanged)."""

    name: str | None = None
    default_vp: str | None = None
    clear_default_vp: bool = False
    settings: GroupSettingsPatch | None = None


@dataclass(frozen=True, slots=True)
class MemberOp:
    """A member change as the gateway asks for it, with the words its notice uses."""

    action: str  # invited | joined | removed | left | owner
    user: str
    change: MemberChange = field(default_factory=MemberChange)

    @classmethod
    def invite(cls, user: str) -> MemberOp:
        return cls("invited", user, MemberChange(add=(user,)))

    @classmethod
    def join(cls, user: str) -> MemberOp:
        """``user`` joins by an invite link the gateway checked (``gateway.invites``)."""
        return cls("joined", user, MemberChange(add=(user,)))

    @classmethod
    def remove(cls, user: str) -> MemberOp:
        return cls("removed", user, MemberChange(remove=(user,)))

    @classmethod
    def leave(cls, user: str) -> MemberOp:
        return cls("left", user, MemberChange(remove=(user,)))

    @classmethod
    def transfer(cls, user: str) -> MemberOp:
        return cls("owner", user, MemberChange(owner=user))


def require_owner(group: Group, actor: str, what: str) -> None:
    if owner_of(group) != actor:
        raise GroupError(
            GroupErrorCode.NOT_OWNER,
            f"only the owner ({owner_of(group)}) can {what}",
        )


def check_member_op(group: Group, actor: str, op: MemberOp) -> None:
    """Who may do what: the owner everything, a member only leave (themselves).

    Joining is a person's own act, on an invite link the gateway checked
    and counted: it is the one change a person who is not a member makes.
    """
    if op.action == "joined":
        if op.user != actor:
            raise GroupError(GroupErrorCode.NOT_OWNER, "only you can join for yourself")
        return
    if op.action == "left":
        if op.user != actor:
            raise GroupError(GroupErrorCode.NOT_OWNER, "only you can leave for yourself")
        return
    verbs = {"invited": "invite people", "removed": "remove members", "owner": "hand it over"}
    require_owner(group, actor, verbs[op.action])
    if op.action == "removed" and op.user == actor:
        raise GroupError(
            GroupErrorCode.OWNER_LEAVING,
            "the owner cannot remove themselves: transfer ownership, then leave",
        )


def member_error(exc: MemberError) -> GroupError:
    return GroupError(_MEMBER_ERRORS[exc.code], exc.message)


def member_notice(op: MemberOp, actor: str, by_admin: bool = False) -> str:
    if by_admin:
        actor = f"{actor} (administrator)"
    if op.action == "invited":
        return f"{actor} added {op.user} to the group"
    if op.action == "joined":
        return f"{op.user} joined the group with an invite link"
    if op.action == "removed":
        return f"{actor} removed {op.user} from the group"
    if op.action == "left":
        return f"{op.user} left the group"
    return f"{actor} made {op.user} the owner of the group"


def _kind(group: Group) -> str:
    """How a notice names the record: a conversation is a group underneath."""
    return "conversation" if group.kind is GroupKind.CONVERSATION else "group"


def settings_changes(before: Group, after: Group) -> list[str]:
    """What changed between two records, as short phrases for the notice."""
    changes: list[str] = []
    if before.name != after.name:
        changes.append(f"name → {after.name}")
    if before.default_vp != after.default_vp:
        changes.append(f"default VP → {after.default_vp or 'none'}")
    old, new = before.settings.model_dump(), after.settings.model_dump()
    for name in GroupSettings.model_fields:
        if old[name] != new[name]:
            value = new[name]
            shown = "on" if value is True else "off" if value is False else value
            changes.append(f"{_LABELS.get(name, name)} → {shown if shown != '' else 'default'}")
    return changes


class Announcer:
    """Tells a group's subscribers, its history and every gateway process about a change."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def changed(
        self, group: Group, action: str, actor: str, notice: str, **detail: object
    ) -> None:
        update = GroupUpdate.model_validate(
            {"group": group_view(group), "action": action, "by": actor, **detail}
        )
        await until_stored(
            lambda: self.store.append_event(group.id, update), f"the {action} of {group.id}"
        )
        await GroupEvents(self.store, group.id).notice(
            notice, f"group:{action}", f"group_{action}", by=actor, **detail
        )

    async def directory(self, event: DirectoryEvent) -> None:
        await until_stored(
            lambda: self.store.append_event(DIRECTORY_LOG, event), f"a {event.action} event"
        )


class Membership:
    """The coordinator's member and settings operations over its ``GroupBook``."""

    def __init__(self, book: GroupBook, store: Store) -> None:
        self.book = book
        self.announce = Announcer(store)

    async def change(
        self, group_id: str, actor: str, op: MemberOp, *, by_admin: bool = False
    ) -> Group:
        """Invite, remove, leave or transfer, checked against who ``actor`` is; announced.

        ``by_admin``: an instance administrator hands the group over; the
        owner's rule is waived for that one change, the store's are not (the
        new owner must be a member).
        """
        async with self.book.locked(group_id):
            group = await self.book.require(group_id)
            joining = op.action == "joined" and group.kind is GroupKind.GROUP
            if by_admin:
                if op.action != "owner":
                    raise GroupError(
                        GroupErrorCode.NOT_OWNER, "an administrator may only hand a group over"
                    )
            else:
                if actor not in group.members and not joining:
                    raise GroupError(GroupErrorCode.NOT_FOUND, f"group {group_id} not found")
                check_member_op(group, actor, op)
            if op.action in ("invited", "joined") and op.user in group.members:
                return group  # already in: nothing to announce
            if op.action == "owner" and owner_of(group) == op.user:
                return group
            try:
                changed = await self.book.change_members(group_id, op.change)
            except MemberError as exc:
                raise member_error(exc) from exc
        action = "owner" if op.action == "owner" else "members"
        await self.announce.changed(
            changed,
            action,
            actor,
            member_notice(op, actor, by_admin),
            change=op.action,
            user=op.user,
        )
        added = [u for u in changed.members if u not in group.members]
        removed = [u for u in group.members if u not in changed.members]
        if added or removed:
            await self.announce.directory(
                DirectoryEvent(
                    action="members",
                    group_id=group_id,
                    group=group_view(changed),
                    members=list(changed.members),
                    added=added,
                    removed=removed,
                    user=op.user,
                    by=actor,
                )
            )
        return changed

    async def edit(self, group_id: str, actor: str | None, edit: GroupEdit) -> Group:
        """Change the name, default VP and settings at once.

        A person (``actor``) must own the group, and the change is announced;
        the deployment's own change (no actor) is stored without a notice.
        """
        async with self.book.locked(group_id):
            group = await self.book.require(group_id)
            if actor is not None:
                if actor not in group.members:
                    raise GroupError(GroupErrorCode.NOT_FOUND, f"group {group_id} not found")
                require_owner(group, actor, "change the group's settings")
            update: dict[str, object] = {"settings": group.settings.apply(edit.settings)}
            if edit.name is not None:
                update["name"] = valid_name(edit.name)
            if edit.clear_default_vp:
                update["default_vp"] = None
            elif edit.default_vp is not None:
                (vp,) = self.book.roster_ids([edit.default_vp])
                if vp not in group.roster:
                    raise GroupError(
                        GroupErrorCode.DEFAULT_NOT_IN_ROSTER, f"{vp} is not in the roster"
                    )
                update["default_vp"] = vp
            candidate = group.model_copy(update=update)
            changes = settings_changes(group, candidate)
            if not changes:
                return group
            changed = await self.book.save(candidate)
        if actor is None:
            return changed
        await self.announce.changed(
            changed,
            "settings",
            actor,
            f"{actor} changed the {_kind(changed)} settings: " + "; ".join(changes),
            changes=changes,
        )
        return changed

    async def allow_tool(self, group_id: str, tool: str, vp_id: str) -> Group | None:
        """Set ``tool``'s policy to auto in the group, as a person chose when asked; announced.

        Any person of the group may answer an approval question, so this is
        not an owner's edit: it changes one policy and nothing else. None when
        the group is gone or already allows the tool.
        """
        async with self.book.locked(group_id):
            group = await self.book.get(group_id)
            if group is None or group.settings.tool_policies.get(tool) == "auto":
                return None
            policies = {**group.settings.tool_policies, tool: "auto"}
            try:
                settings = GroupSettings.model_validate(
                    {**group.settings.model_dump(), "tool_policies": policies}
                )
            except ValueError:
                # The group's list of policies is full: it keeps asking.
                return None
            changed = await self.book.save(group.model_copy(update={"settings": settings}))
        notice = f"{tool} is now allowed in this group without asking (answered to @{vp_id})"
        await self.announce.changed(changed, "settings", vp_id, notice, changes=[f"{tool} → auto"])
        return changed

    async def deleted(self, group: Group, actor: str | None) -> None:
        """Tell every gateway process that ``group`` is gone."""
        await self.announce.directory(
            DirectoryEvent(
                action="deleted",
                group_id=group.id,
                group={"id": group.id, "name": group.name, "by": actor},
                members=list(group.members),
            )
        )
