"""HTTP operations of team mode: a group's tasks, the person's verdict, skills and drafts.

Reading goes to the store; every change of a task goes through the group's
coordinator (``coordinator.team.desk``), which owns the group's tasks and
announces each change as a ``task_changed`` event. Every route needs a
session and, for a group's task, membership (a group the user is not in is
a 404).

Skills: built-in and data-directory skills are the deployment's, read by
any signed-in user. A draft, and the skill it becomes once published, quote
the conversation of the group it was learned in, so both are that group's:
only its members see them, only its owner publishes a draft (once it passed
the safety check), and a learned skill joins that group's library alone,
replacing a built-in of its name for that group only.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query
from pydantic import Field

from coordinator.commands import AbandonTask, AcceptTask, ReviseTask
from gateway.errors import GatewayError, not_found
from gateway.http import Body, Ctx, User
from protocol import MAX_TEXT_LENGTH, ErrorCode
from protocol.tasks import DraftStatus, Skill, SkillSource, Task
from store.base import Group
from store.membership import owner_of
from team.skills import SkillLibrary

log = logging.getLogger(__name__)

router = APIRouter()
T = TypeVar("T")


class ReviseBody(Body):
    text: str = Field(min_length=1, max_length=MAX_TEXT_LENGTH)


def _task_view(task: Task) -> dict[str, Any]:
    return task.model_dump(mode="json", by_alias=True)


@router.get("/api/groups/{group_id}/tasks")
async def list_tasks(
    group_id: str,
    user: User,
    ctx: Ctx,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    """The group's tasks, newest first."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    return {"tasks": [_task_view(t) for t in await store.list_tasks(group.id, limit=limit)]}


@router.get("/api/groups/{group_id}/tasks/{task_id}")
async def get_task(group_id: str, task_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """One task with the evidence of each of its attempts."""
    group = await ctx.groups.member_group(user, group_id)
    store = await ctx.runtime.store()
    task = await store.get_task(group.id, task_id)
    if task is None:
        raise not_found("task")
    evidence = await store.evidence_of(group.id, task.id)
    return {
        "task": _task_view(task),
        "evidence": [e.model_dump(mode="json", by_alias=True) for e in evidence],
    }


@router.post("/api/groups/{group_id}/tasks/{task_id}/accept")
async def accept_task(group_id: str, task_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Accept the task's newest answer: the only way a task is done."""
    task = await ctx.groups.task_verdict(user, AcceptTask(group_id, task_id, user))
    return {"task": _task_view(task)}


@router.post("/api/groups/{group_id}/tasks/{task_id}/revise", status_code=202)
async def revise_task(
    group_id: str, task_id: str, body: ReviseBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    """Ask for another attempt with the changes ``text`` describes (it is posted to the group)."""
    task = await ctx.groups.task_verdict(user, ReviseTask(group_id, task_id, user, body.text))
    return {"task": _task_view(task)}


@router.post("/api/groups/{group_id}/tasks/{task_id}/abandon")
async def abandon_task(group_id: str, task_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Drop the task: it will not be worked on or accepted; a running attempt is stopped."""
    task = await ctx.groups.task_verdict(user, AbandonTask(group_id, task_id, user))
    return {"task": _task_view(task)}


def _skill_view(skill: Skill) -> dict[str, Any]:
    return skill.model_dump(mode="json", by_alias=True)


@router.get("/api/skills")
async def list_skills(
    user: User,
    ctx: Ctx,
    group_id: Annotated[str | None, Query(alias="groupId")] = None,
) -> dict[str, Any]:
    """The published skills the user may read.

    With ``groupId`` (a group the user is in): the library that group's runs
    use, where a skill learned in the group replaces the built-in or data
    skill of its name. Without it: the built-in and data-directory skills,
    and beside them the skills learned in each of the user's groups (each
    naming its ``groupId``), all by name.
    """
    store = await ctx.runtime.store()
    if group_id is not None:
        group = await ctx.groups.member_group(user, group_id)
        library = SkillLibrary.load(ctx.settings.data_dir, await store.learned_skills(group.id))
        return {"skills": [_skill_view(s) for s in library.all()]}
    shared = SkillLibrary.load(ctx.settings.data_dir).all()
    groups = await ctx.groups.list_for(user)
    per_group = await asyncio.gather(*(store.learned_skills(g.id) for g in groups))
    learned = [s for skills in per_group for s in skills]
    # A learned skill comes right after the shared one of its name, if any.
    skills = sorted([*shared, *learned], key=lambda s: (s.name, s.group_id or ""))
    return {"skills": [_skill_view(s) for s in skills]}


async def _groups_of(ctx: Ctx, user: str) -> dict[str, Group]:
    return {g.id: g for g in await ctx.groups.list_for(user)}


@router.get("/api/skills/drafts")
async def list_drafts(
    user: User, ctx: Ctx, status: Annotated[DraftStatus | None, Query()] = None
) -> dict[str, Any]:
    """Skill drafts learned from the user's groups' accepted tasks, newest first.

    A draft quotes its group's conversation, so only that group's members see it.
    """
    store = await ctx.runtime.store()
    groups = await _groups_of(ctx, user)
    drafts = await store.list_skill_drafts(status, group_ids=groups.keys())
    return {"drafts": [d.model_dump(mode="json", by_alias=True) for d in drafts]}


@router.post("/api/skills/drafts/{draft_id}/publish")
async def publish_draft(draft_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Publish a draft (its group's owner only): its group's runs may be given it from now on."""
    store = await ctx.runtime.store()
    groups = await _groups_of(ctx, user)
    draft = await store.get_skill_draft(draft_id, group_ids=groups.keys())
    if draft is None or draft.group_id not in groups:
        raise not_found("draft")
    # Publishing changes what every run of the group is told to do, so it is
    # the owner's call, like the group's settings (coordinator.membership).
    owner = owner_of(groups[draft.group_id])
    if owner != user:
        message = f"only the owner of the group ({owner}) can publish its skill drafts"
        raise GatewayError(ErrorCode.FORBIDDEN, message)
    # The report is checked too, not only the status: a draft whose check failed
    # must never become a skill, whatever status a bug or an old record gave it.
    if draft.status is DraftStatus.BLOCKED or not draft.safety.ok:
        problems = "; ".join(draft.safety.problems) or "it failed the safety check"
        raise GatewayError(ErrorCode.CONFLICT, f"this draft cannot be published: {problems}")
    if draft.status is DraftStatus.PUBLISHED:
        raise GatewayError(ErrorCode.CONFLICT, "this draft is published already")
    skill = Skill(
        name=draft.name,
        description=draft.description,
        tools=list(draft.tools),
        content=draft.content,
        source=SkillSource.LEARNED,
        version=draft.id,
        group_id=draft.group_id,
    )
    await store.save_learned_skill(skill)
    published = draft.model_copy(update={"status": DraftStatus.PUBLISHED, "published_by": user})
    await store.save_skill_draft(published)
    return {
        "draft": published.model_dump(mode="json", by_alias=True),
        "skill": _skill_view(skill),
    }
