"""HTTP operations of team mode: a group's tasks, the person's verdict, skills and drafts.

Reading goes to the store; every change of a task goes through the group's
coordinator (``coordinator.team``), which owns the group's tasks and
announces each change as a ``task_changed`` event. Every route needs a
session and, for a group's task, membership (a group the user is not in is
a 404). Published skills are the deployment's: any signed-in user reads
them. A draft quotes the conversation of the group it was learned in, so
only that group's members see it, and publish it once it passed the safety
check.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query
from pydantic import Field

from gateway.errors import GatewayError, from_group_error, not_found
from gateway.http import Body, Ctx, User
from protocol import MAX_TEXT_LENGTH, ErrorCode
from protocol.tasks import DraftStatus, Skill, SkillSource, Task
from team.skills import SkillLibrary

log = logging.getLogger(__name__)

router = APIRouter()
T = TypeVar("T")


class ReviseBody(Body):
    text: str = Field(min_length=1, max_length=MAX_TEXT_LENGTH)


def _task_view(task: Task) -> dict[str, Any]:
    return task.model_dump(mode="json", by_alias=True)


async def _coordinator_call(call: Callable[[], Awaitable[T]], what: str) -> T:
    try:
        return await call()
    except Exception as exc:
        translated = from_group_error(exc)
        if translated is None:
            log.error("%s failed: %s", what, exc, exc_info=exc)
            raise GatewayError(ErrorCode.INTERNAL, f"{what} failed; try again") from exc
        raise translated from exc


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
    group = await ctx.groups.member_group(user, group_id)
    client = ctx.runtime.group(group.id)
    task = await _coordinator_call(lambda: client.accept_task(task_id, user), "accepting the task")
    return {"task": _task_view(task)}


@router.post("/api/groups/{group_id}/tasks/{task_id}/revise", status_code=202)
async def revise_task(
    group_id: str, task_id: str, body: ReviseBody, user: User, ctx: Ctx
) -> dict[str, Any]:
    """Ask for another attempt with the changes ``text`` describes (it is posted to the group)."""
    group = await ctx.groups.member_group(user, group_id)
    client = ctx.runtime.group(group.id)
    task = await _coordinator_call(
        lambda: client.revise_task(task_id, user, body.text), "revising the task"
    )
    return {"task": _task_view(task)}


@router.post("/api/groups/{group_id}/tasks/{task_id}/abandon")
async def abandon_task(group_id: str, task_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Drop the task: it will not be worked on or accepted; a running attempt is stopped."""
    group = await ctx.groups.member_group(user, group_id)
    client = ctx.runtime.group(group.id)
    task = await _coordinator_call(
        lambda: client.abandon_task(task_id, user), "abandoning the task"
    )
    return {"task": _task_view(task)}


@router.get("/api/skills")
async def list_skills(user: User, ctx: Ctx) -> dict[str, Any]:
    """Every published skill: built in, from the data directory, and learned."""
    store = await ctx.runtime.store()
    library = SkillLibrary.load(ctx.settings.data_dir, await store.learned_skills())
    return {"skills": [s.model_dump(mode="json", by_alias=True) for s in library.all()]}


async def _member_of(ctx: Ctx, user: str) -> set[str]:
    return {g.id for g in await ctx.groups.list_for(user)}


@router.get("/api/skills/drafts")
async def list_drafts(
    user: User, ctx: Ctx, status: Annotated[DraftStatus | None, Query()] = None
) -> dict[str, Any]:
    """Skill drafts learned from the user's groups' accepted tasks, newest first.

    A draft quotes its group's conversation, so only that group's members see it.
    """
    store = await ctx.runtime.store()
    groups = await _member_of(ctx, user)
    drafts = [d for d in await store.list_skill_drafts(status) if d.group_id in groups]
    return {"drafts": [d.model_dump(mode="json", by_alias=True) for d in drafts]}


@router.post("/api/skills/drafts/{draft_id}/publish")
async def publish_draft(draft_id: str, user: User, ctx: Ctx) -> dict[str, Any]:
    """Publish a draft: from now on the planner's skill selection may pick it."""
    store = await ctx.runtime.store()
    draft = await store.get_skill_draft(draft_id)
    if draft is None or draft.group_id not in await _member_of(ctx, user):
        raise not_found("draft")
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
    )
    await store.save_learned_skill(skill)
    published = draft.model_copy(update={"status": DraftStatus.PUBLISHED, "published_by": user})
    await store.save_skill_draft(published)
    return {
        "draft": published.model_dump(mode="json", by_alias=True),
        "skill": skill.model_dump(mode="json", by_alias=True),
    }
