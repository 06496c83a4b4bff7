"""Administrators' HTTP routes over every group of the instance.

- ``GET /api/admin/groups?q=``: every group (one-to-one conversations are
  their person's own and not listed), with its owner, members, size (the
  number of members), VPs and last activity (the time of its newest
  message, else of its making), most recently active first; ``q`` keeps
  those whose name, id, owner or a member's name holds it;
- ``PUT /api/admin/groups/{group_id}/owner {username}``: hand the group over
  to one of its members (404 ``not_found``, ``detail.reason`` ``not_member``,
  for someone who is not one),
  whoever owns it now; the group is told, as when an owner hands it over;
- ``DELETE /api/admin/groups/{group_id}``: delete the group
  (``{id, name, stoppedTurns}``). Its running and queued turns are stopped
  first, by the same cancel as ``POST /api/groups/{id}/cancel``, then its
  record, logs and files go and its members' clients are told, on every
  gateway.

Administrators only (``gateway.admin_http.admin``); each change is recorded in
the audit log with ``detail.byAdmin``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from gateway.admin_http import Admin, View
from gateway.errors import not_found
from gateway.http import Ctx
from protocol.common import is_id
from store.base import Group, Store
from store.conversation import GroupKind
from store.membership import owner_of

router = APIRouter()


class AdminGroup(View):
    id: str
    name: str
    owner: str | None
    members: list[str]
    # How many people are in it.
    size: int
    roster: list[str]
    # Epoch seconds.
    created_at: float
    # The newest message's time, else created_at.
    last_activity: float


class AdminGroupList(View):
    groups: list[AdminGroup]


class OwnerBody(View):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )
    username: str = Field(min_length=1, max_length=200)


class GroupDeleted(View):
    id: str
    name: str
    # How many running or queued turns were stopped before it went.
    stopped_turns: int


async def _last_activity(store: Store, group: Group) -> float:
    newest = await store.read_messages(group.id, limit=1)
    return max([group.created_at, *(m.ts for m in newest)])


async def _view(store: Store, group: Group) -> AdminGroup:
    return AdminGroup(
        id=group.id,
        name=group.name,
        owner=owner_of(group),
        members=list(group.members),
        size=len(group.members),
        roster=list(group.roster),
        created_at=group.created_at,
        last_activity=await _last_activity(store, group),
    )


def _matches(group: Group, q: str) -> bool:
    words = " ".join([group.name, group.id, owner_of(group) or "", *group.members])
    return q.casefold() in words.casefold()


async def _group(ctx: Ctx, group_id: str) -> Group:
    """Any group of the instance (a conversation, or nothing, is 404)."""
    group = await (await ctx.runtime.store()).get_group(group_id) if is_id(group_id) else None
    if group is None or group.kind is not GroupKind.GROUP:
        raise not_found("group")
    return group


@router.get("/api/admin/groups")
async def list_groups(
    user: Admin, ctx: Ctx, q: Annotated[str, Query(max_length=200)] = ""
) -> AdminGroupList:
    """Every group with owner, size and last activity, most recently active first."""
    store = await ctx.runtime.store()
    groups = [
        g for g in await store.list_groups() if g.kind is GroupKind.GROUP and _matches(g, q.strip())
    ]
    views = await asyncio.gather(*(_view(store, g) for g in groups))
    return AdminGroupList(groups=sorted(views, key=lambda v: (-v.last_activity, v.name)))


@router.put("/api/admin/groups/{group_id}/owner")
async def transfer_owner(group_id: str, body: OwnerBody, user: Admin, ctx: Ctx) -> AdminGroup:
    """Hand a group over to one of its members, whoever owns it now."""
    group = await _group(ctx, group_id)
    changed = await ctx.groups.admin_transfer(user, group, body.username)
    return await _view(await ctx.runtime.store(), changed)


@router.delete("/api/admin/groups/{group_id}")
async def delete_group(group_id: str, user: Admin, ctx: Ctx) -> GroupDeleted:
    """Delete any group: its running turns are stopped first, then it goes."""
    group = await _group(ctx, group_id)
    stopped = await ctx.groups.admin_delete(user, group)
    return GroupDeleted(id=group.id, name=group.name, stopped_turns=stopped)
