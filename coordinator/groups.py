"""The groups one coordinator owns: their records, kept consistent and validated.

Every change to a group goes through here (and so through the one
coordinator that owns it): names are checked, roster names resolved to
persona ids, and the default VP kept in the roster. Refusals raise
:class:`~coordinator.errors.GroupError` with a :class:`GroupErrorCode`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from actors.group_events import GroupEvents
from coordinator.errors import GroupError, GroupErrorCode
from personas.directory import PersonaDirectory
from protocol.settings import GroupSettings, GroupSettingsPatch
from store.base import Group, Store, StoreError
from store.conversation import ConversationInfo, GroupKind
from store.members import MemberChange

MAX_NAME = 120


class GroupBook:
    """A cache of this coordinator's group records over the store, and every change to them."""

    def __init__(self, store: Store, personas: PersonaDirectory) -> None:
        self.store = store
        self.personas = personas
        self._groups: dict[str, Group] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def locked(self, group_id: str) -> asyncio.Lock:
        """The group's lock: every change holds it from its read to its write.

        Without it two changes of one group (this actor runs calls
        concurrently) could both start from the same cached record, and the
        second write would undo the first.
        """
        lock = self._locks.get(group_id)
        if lock is None:
            lock = self._locks[group_id] = asyncio.Lock()
        return lock

    async def get(self, group_id: str) -> Group | None:
        group = self._groups.get(group_id)
        if group is None:
            group = await self.store.get_group(group_id)
            if group is not None:
                self._groups[group_id] = group
        return group

    async def require(self, group_id: str) -> Group:
        group = await self.get(group_id)
        if group is None:
            raise GroupError(GroupErrorCode.NOT_FOUND, f"group {group_id} not found")
        return group

    async def create(
        self,
        group_id: str,
        name: str,
        roster: list[str],
        default_vp: str | None,
        members: list[str],
        settings: GroupSettingsPatch | None,
    ) -> Group:
        ids = self.roster_ids(roster)
        if default_vp is not None:
            (default_vp,) = self.roster_ids([default_vp])
            if default_vp not in ids:
                raise GroupError(
                    GroupErrorCode.DEFAULT_NOT_IN_ROSTER, f"{default_vp} is not in the roster"
                )
        group = Group(
            id=group_id,
            name=valid_name(name),
            roster=ids,
            default_vp=default_vp or (ids[0] if ids else None),
            members=list(dict.fromkeys(members)),
            owner=members[0] if members else None,
            settings=GroupSettings().apply(settings),
        )
        return await self._store_new(group)

    async def create_conversation(self, group_id: str, name: str, info: ConversationInfo) -> Group:
        """Create a conversation: its VP alone in the roster, its owner alone a member.

        VPs' ``@mentions`` do not dispatch in it: nobody else is there to answer.
        """
        (vp,) = self.roster_ids([info.vp_id])
        group = Group(
            id=group_id,
            name=valid_name(name),
            roster=[vp],
            default_vp=vp,
            members=[info.owner],
            owner=info.owner,
            settings=GroupSettings(vp_mentions_dispatch=False),
            kind=GroupKind.CONVERSATION,
            conversation=info.model_copy(update={"vp_id": vp}),
        )
        return await self._store_new(group)

    async def _store_new(self, group: Group) -> Group:
        """Store a new record and keep it; a taken id is a CONFLICT."""
        try:
            created = await self.store.create_group(group)
        except StoreError as exc:
            raise GroupError(GroupErrorCode.CONFLICT, str(exc)) from exc
        self._groups[group.id] = created
        return created

    async def forget(self, group_id: str) -> bool:
        """Delete the group's record and everything under it; False if it did not exist."""
        self._groups.pop(group_id, None)
        self._locks.pop(group_id, None)
        return await self.store.delete_group(group_id)

    async def add_vp(self, group_id: str, vp_id: str) -> Group:
        async with self.locked(group_id):
            group = await self.require(group_id)
            (vp,) = self.roster_ids([vp_id])
            if vp in group.roster:
                return group
            update = {"roster": [*group.roster, vp], "default_vp": group.default_vp or vp}
            return await self._save(group.model_copy(update=update))

    async def remove_vp(self, group_id: str, vp: str) -> Group:
        async with self.locked(group_id):
            group = await self.require(group_id)
            roster = [v for v in group.roster if v != vp]
            default = (
                group.default_vp if group.default_vp != vp else (roster[0] if roster else None)
            )
            return await self._save(
                group.model_copy(update={"roster": roster, "default_vp": default})
            )

    async def member_vp(self, group_id: str, vp_id: str) -> tuple[Group, str]:
        """The group and the persona id ``vp_id`` names, which must be in its roster."""
        group = await self.require(group_id)
        (vp,) = self.roster_ids([vp_id])
        if vp not in group.roster:
            raise GroupError(GroupErrorCode.NOT_IN_ROSTER, f"{vp} is not in this group")
        return group, vp

    async def set_members(self, group_id: str, members: list[str]) -> Group:
        async with self.locked(group_id):
            group = await self.require(group_id)
            return await self._save(
                group.model_copy(update={"members": list(dict.fromkeys(members))})
            )

    async def change_members(self, group_id: str, change: MemberChange) -> Group:
        """Apply a member change in the store (atomically there too); the caller holds the lock."""
        changed = await self.store.change_members(group_id, change)
        self._groups[group_id] = changed
        return changed

    async def save(self, group: Group) -> Group:
        """Write a record changed by the caller, who holds the group's lock."""
        return await self._save(group)

    def roster_ids(self, names: list[str]) -> list[str]:
        """Persona ids for ``names`` (ids or aliases), without repeats; unknown names refused."""
        ids: list[str] = []
        unknown: list[str] = []
        for name in names:
            pid = self.personas.resolve(name)
            if pid is None:
                unknown.append(name)
            elif pid not in ids:
                ids.append(pid)
        if unknown:
            known = ", ".join(self.personas.library.ids())
            raise GroupError(
                GroupErrorCode.UNKNOWN_VP, f"unknown VP: {', '.join(unknown)}; known: {known}"
            )
        return ids

    async def _save(self, group: Group) -> Group:
        saved = await self.store.save_group(group)
        self._groups[group.id] = saved
        return saved


def valid_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > MAX_NAME:
        raise GroupError(GroupErrorCode.INVALID_NAME, "a group name needs 1 to 120 characters")
    return name


async def unknown_names(
    events: GroupEvents, group: Group, unknown: Sequence[str], root: str
) -> None:
    """Name the mentions that match nobody in the group, and who is in it."""
    plural = "s" if len(unknown) > 1 else ""
    roster = ", ".join(f"@{v}" for v in group.roster) or "(nobody)"
    await events.notice(
        f"Unknown name{plural}: "
        + ", ".join(f"@{n}" for n in unknown)
        + f". In this group: {roster}",
        root,
        "unknown_mentions",
        unknown=list(unknown),
        roster=list(group.roster),
    )
