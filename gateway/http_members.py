"""The HTTP API for a group's people and settings, beside ``gateway.http``.

- ``PATCH /api/groups/{id}/settings`` ``{name?, defaultVpId?, settings?}``:
  the owner changes the name, the default VP and any bounded setting (a bad
  value is a 422 naming the field, e.g. ``settings.fanoutCap``);
- ``POST /api/groups/{id}/members`` ``{username}`` (in ``gateway.http``):
  the owner invites; ``DELETE /api/groups/{id}/members/{username}``: the
  owner removes a member, or a member removes themselves (leaves);
- ``PUT /api/groups/{id}/owner`` ``{username}``: the owner hands over;
- ``POST /api/groups/{id}/leave``: leave;
- ``GET /api/groups/{id}/presence``: ``{groupId, online}``.

A member who is not the owner gets 403 ``forbidden``; an unknown username a
404 ``not_found`` on ``username``; the owner leaving a 409 ``conflict``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import Field

from coordinator.membership import GroupEdit
from gateway.http import Body, Ctx, MemberBody, User
from gateway.views import group_view
from protocol import GroupSettingsPatch, Id

router = APIRouter()


class SettingsBody(Body):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    default_vp_id: Id | None = None
    settings: GroupSettingsPatch | None = None


@router.patch("/api/groups/{group_id}/settings")
async def update_settings(
    group_id: str, body: SettingsBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    edit = GroupEdit(name=body.name, default_vp=body.default_vp_id, settings=body.settings)
    return group_view(await ctx.groups.edit(user, group_id, edit))


@router.put("/api/groups/{group_id}/owner")
async def transfer_ownership(
    group_id: str, body: MemberBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    return group_view(await ctx.groups.transfer(user, group_id, body.username))


@router.post("/api/groups/{group_id}/leave", status_code=204)
async def leave(group_id: str, user: User, ctx: Ctx) -> None:
    await ctx.groups.leave(user, group_id)


@router.get("/api/groups/{group_id}/presence")
async def presence(group_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    group = await ctx.groups.member_group(user, group_id)
    online = await (await ctx.runtime.store()).online(group.members)
    return {"groupId": group_id, "online": sorted(online)}
