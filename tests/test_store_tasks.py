"""Team-mode records on both backends: tasks, evidence, skill drafts and learned skills."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from protocol.tasks import (
    ActivatedSkill,
    Attempt,
    DraftAction,
    DraftStatus,
    Evidence,
    Plan,
    PlanMode,
    PlanNode,
    Run,
    RunRole,
    RunStatus,
    SafetyReport,
    Skill,
    SkillDraft,
    SkillSource,
    Task,
    TaskAction,
    TaskStatus,
    ToolUse,
)
from store import Store, StoreError, embedded_budgets, embedded_chat, embedded_schema, new_id
from store.embedded import DB_FILENAME, EmbeddedStore
from tests.fixtures.store_samples import sample_group
from tests.fixtures.stores import StoreFactory


def a_task(
    task_id: str,
    group_id: str = "g1",
    *,
    created_at: float = 100.0,
    status: TaskStatus = TaskStatus.PLANNING,
    **kw: object,
) -> Task:
    fields: dict[str, object] = {
        "id": task_id,
        "group_id": group_id,
        "title": f"title of {task_id}",
        "goal": f"goal of {task_id}",
        "status": status,
        "created_by": "alice",
        "created_at": created_at,
        "updated_at": created_at,
    }
    fields.update(kw)
    return Task.model_validate(fields)


def an_attempt(index: int = 1) -> Attempt:
    """An attempt with a team plan and a finished run, so nested records round-trip."""
    run = Run(
        id="n1",
        role=RunRole.NODE,
        vp="jobs",
        task="sketch the page",
        status=RunStatus.DONE,
        output="a sketch",
        skills=[ActivatedSkill(name="design", version="2", source="learned")],
        tools=[ToolUse(tool="web_fetch", ok=False, summary="timed out")],
        started_at=10.5,
        finished_at=12.25,
    )
    plan = Plan(
        mode=PlanMode.TEAM,
        reason="two parts",
        nodes=[PlanNode(id="n1", vp="jobs", task="sketch the page", depends_on=[])],
        synthesizer="rams",
    )
    return Attempt(
        index=index,
        request="make a landing page",
        message_id="msg_1",
        action=TaskAction.NEW_TASK,
        plan=plan,
        runs=[run],
        final_run="n1",
        started_at=10.0,
    )


def evidence(task_id: str, attempt: int, group_id: str = "g1", **kw: object) -> Evidence:
    fields: dict[str, object] = {
        "task_id": task_id,
        "group_id": group_id,
        "attempt": attempt,
        "goal": "goal",
        "request": f"request {attempt}",
        "mode": PlanMode.SINGLE,
        "recorded_at": 50.0 + attempt,
    }
    fields.update(kw)
    return Evidence.model_validate(fields)


def draft(
    draft_id: str,
    created_at: float,
    status: DraftStatus = DraftStatus.DRAFT,
    group_id: str = "g1",
) -> SkillDraft:
    return SkillDraft(
        id=draft_id,
        task_id="task_1",
        group_id=group_id,
        action=DraftAction.NEW,
        name=f"skill-{draft_id}",
        description="how to do it",
        tools=["web_fetch"],
        content="# Steps\n1. do it",
        safety=SafetyReport(ok=status is not DraftStatus.BLOCKED, problems=[]),
        status=status,
        created_at=created_at,
    )


def skill(name: str, version: str = "1", content: str = "body", group_id: str = "g1") -> Skill:
    return Skill(
        name=name,
        description=f"about {name}",
        content=content,
        source=SkillSource.LEARNED,
        version=version,
        group_id=group_id,
    )


def ids(tasks: list[Task]) -> list[str]:
    return [t.id for t in tasks]


# -- tasks -------------------------------------------------------------------
async def test_a_task_round_trips_and_a_save_replaces_it(store: Store) -> None:
    task = a_task("task_1", attempts=[an_attempt()], draft_id=None)
    await store.save_task(task)
    assert await store.get_task("g1", "task_1") == task
    assert await store.get_task("g1", "task_2") is None
    assert await store.get_task("g2", "task_1") is None, "a task is found under its own group"

    task.advance(TaskStatus.RUNNING, 101.0)
    task.attempts.append(an_attempt(2))
    await store.save_task(task)
    stored = await store.get_task("g1", "task_1")
    assert stored == task
    assert stored is not None and stored.status is TaskStatus.RUNNING
    assert [a.index for a in stored.attempts] == [1, 2]
    assert stored.attempts[0].runs[0].tools[0].summary == "timed out"
    assert ids(await store.list_tasks("g1")) == ["task_1"], "replaced, not added"


async def test_tasks_are_listed_newest_first_within_the_limit(store: Store) -> None:
    for task in [
        a_task("task_b", created_at=200.0),
        a_task("task_a", created_at=100.0),
        a_task("task_d", created_at=300.0, status=TaskStatus.ACCEPTED),
        a_task("task_c", created_at=200.0),  # same time as task_b: the id decides
        a_task("task_x", "g2", created_at=400.0),
    ]:
        await store.save_task(task)
    assert ids(await store.list_tasks("g1")) == ["task_d", "task_c", "task_b", "task_a"]
    assert ids(await store.list_tasks("g1", limit=2)) == ["task_d", "task_c"]
    assert await store.list_tasks("g1", limit=0) == []
    assert ids(await store.list_tasks("g2")) == ["task_x"]
    assert await store.list_tasks("nobody") == []


async def test_the_active_task_is_the_newest_open_one(store: Store) -> None:
    assert await store.active_task("g1") is None
    old = a_task("task_1", created_at=100.0)
    review = a_task("task_2", created_at=200.0, status=TaskStatus.REVIEW)
    accepted = a_task("task_3", created_at=300.0, status=TaskStatus.ACCEPTED)
    abandoned = a_task("task_4", created_at=400.0, status=TaskStatus.ABANDONED)
    elsewhere = a_task("task_5", "g2", created_at=500.0, status=TaskStatus.RUNNING)
    for task in (old, review, accepted, abandoned, elsewhere):
        await store.save_task(task)

    assert await store.active_task("g1") == review, "accepted and abandoned tasks are closed"
    review.advance(TaskStatus.ACCEPTED, 201.0)
    await store.save_task(review)
    assert await store.active_task("g1") == old
    old.advance(TaskStatus.ABANDONED, 102.0)
    await store.save_task(old)
    assert await store.active_task("g1") is None
    active = await store.active_task("g2")
    assert active is not None and active.id == "task_5"

    # A task in review that gets another attempt is open again.
    again = a_task("task_6", created_at=50.0, status=TaskStatus.REVIEW)
    await store.save_task(again)
    again.advance(TaskStatus.PLANNING, 60.0)
    await store.save_task(again)
    assert await store.active_task("g1") == again


async def test_open_tasks_covers_every_group(store: Store) -> None:
    assert await store.open_tasks() == []
    g1_open = a_task("task_1", "g1", created_at=300.0, status=TaskStatus.RUNNING)
    g2_open = a_task("task_2", "g2", created_at=100.0)
    g2_review = a_task("task_3", "g2", created_at=200.0, status=TaskStatus.REVIEW)
    g3_done = a_task("task_4", "g3", created_at=50.0, status=TaskStatus.ACCEPTED)
    for task in (g1_open, g2_open, g2_review, g3_done):
        await store.save_task(task)
    assert await store.open_tasks() == [g2_open, g2_review, g1_open], "oldest first"

    g1_open.advance(TaskStatus.ABANDONED, 301.0)
    await store.save_task(g1_open)
    assert ids(await store.open_tasks()) == ["task_2", "task_3"]


# -- evidence ----------------------------------------------------------------
async def test_evidence_is_kept_per_attempt_in_attempt_order(store: Store) -> None:
    assert await store.evidence_of("g1", "task_1") == []
    for attempt in (2, 10, 1):
        await store.save_evidence(evidence("task_1", attempt))
    # Other tasks, one whose id starts like this one's, and another group.
    await store.save_evidence(evidence("task_10", 1))
    await store.save_evidence(evidence("task_", 3))
    await store.save_evidence(evidence("task_1", 4, group_id="g2"))

    found = await store.evidence_of("g1", "task_1")
    assert [e.attempt for e in found] == [1, 2, 10]
    assert found[0] == evidence("task_1", 1)

    run = Run(id="single", role=RunRole.SINGLE, vp="jobs", output="done", status=RunStatus.DONE)
    accepted = evidence(
        "task_1", 2, runs=[run], tool_names=["web_fetch"], final_run="single", accepted_run="single"
    )
    await store.save_evidence(accepted)
    found = await store.evidence_of("g1", "task_1")
    assert [e.attempt for e in found] == [1, 2, 10]
    assert found[1] == accepted, "saving an attempt's evidence again replaces it"
    assert [e.attempt for e in await store.evidence_of("g1", "task_10")] == [1]
    assert [e.attempt for e in await store.evidence_of("g2", "task_1")] == [4]


# -- skills ------------------------------------------------------------------
async def test_skill_drafts_are_listed_newest_first_and_by_status(store: Store) -> None:
    assert await store.get_skill_draft("d1") is None
    assert await store.list_skill_drafts() == []
    first = draft("d1", 100.0)
    blocked = draft("d2", 200.0, DraftStatus.BLOCKED)
    third = draft("d3", 300.0)
    tied = draft("d4", 300.0)
    for d in (first, blocked, third, tied):
        await store.save_skill_draft(d)

    assert await store.get_skill_draft("d2") == blocked
    assert [d.id for d in await store.list_skill_drafts()] == ["d4", "d3", "d2", "d1"]
    assert [d.id for d in await store.list_skill_drafts(limit=2)] == ["d4", "d3"]
    assert await store.list_skill_drafts(limit=0) == []
    drafts = await store.list_skill_drafts(DraftStatus.DRAFT)
    assert [d.id for d in drafts] == ["d4", "d3", "d1"]
    assert await store.list_skill_drafts(DraftStatus.BLOCKED) == [blocked]
    assert await store.list_skill_drafts(DraftStatus.PUBLISHED) == []

    published = third.model_copy(update={"status": DraftStatus.PUBLISHED, "published_by": "bob"})
    await store.save_skill_draft(published)
    assert await store.get_skill_draft("d3") == published
    assert [d.id for d in await store.list_skill_drafts(DraftStatus.DRAFT)] == ["d4", "d1"]
    assert await store.list_skill_drafts(DraftStatus.PUBLISHED) == [published]
    assert [d.id for d in await store.list_skill_drafts()] == ["d4", "d3", "d2", "d1"]


async def test_drafts_are_listed_by_group_in_the_query(store: Store) -> None:
    # g2's drafts are all newer than g1's: a page of g1's drafts still holds them.
    for n in range(3):
        await store.save_skill_draft(draft(f"d1{n}", 100.0 + n))
        await store.save_skill_draft(draft(f"d2{n}", 200.0 + n, group_id="g2"))
    await store.save_skill_draft(draft("d30", 300.0, DraftStatus.BLOCKED, group_id="g3"))

    def listed(drafts: list[SkillDraft]) -> list[str]:
        return [d.id for d in drafts]

    assert listed(await store.list_skill_drafts(limit=2, group_ids=["g1"])) == ["d12", "d11"]
    assert listed(await store.list_skill_drafts(limit=2)) == ["d30", "d22"]
    both = await store.list_skill_drafts(limit=4, group_ids={"g1", "g2"})
    assert listed(both) == ["d22", "d21", "d20", "d12"]
    assert listed(await store.list_skill_drafts(group_ids=["g1", "nobody"])) == [
        "d12",
        "d11",
        "d10",
    ]
    assert await store.list_skill_drafts(group_ids=[]) == []
    assert await store.list_skill_drafts(DraftStatus.BLOCKED, group_ids=["g1", "g2"]) == []
    blocked = await store.list_skill_drafts(DraftStatus.BLOCKED, group_ids=["g2", "g3"])
    assert listed(blocked) == ["d30"]
    drafts = await store.list_skill_drafts(DraftStatus.DRAFT, limit=1, group_ids=["g1", "g3"])
    assert listed(drafts) == ["d12"]

    # A draft is found by id only among the groups asked for.
    assert await store.get_skill_draft("d21") == draft("d21", 201.0, group_id="g2")
    assert await store.get_skill_draft("d21", group_ids=["g2", "g3"]) is not None
    assert await store.get_skill_draft("d21", group_ids=["g1"]) is None
    assert await store.get_skill_draft("d21", group_ids=[]) is None
    assert await store.get_skill_draft("nope", group_ids=["g2"]) is None


async def test_learned_skills_are_kept_by_group_and_name(store: Store) -> None:
    assert await store.learned_skills() == []
    assert await store.learned_skills("g1") == []
    await store.save_learned_skill(skill("writing"))
    await store.save_learned_skill(skill("analysis"))
    elsewhere = skill("writing", version="7", content="g2's way", group_id="g2")
    await store.save_learned_skill(elsewhere)
    newer = skill("writing", version="2", content="better body")
    await store.save_learned_skill(newer)
    assert await store.learned_skills("g1") == [skill("analysis"), newer]
    assert await store.learned_skills("g2") == [elsewhere], "g1's save replaced g1's only"
    assert await store.learned_skills("g3") == []
    assert await store.learned_skills() == [skill("analysis"), newer, elsewhere]

    # A learned skill is a group's own: one that names no group is refused.
    for group_id in (None, ""):
        shared = skill("writing").model_copy(update={"group_id": group_id})
        with pytest.raises(ValueError, match="names no group"):
            await store.save_learned_skill(shared)
    assert await store.learned_skills("g1") == [skill("analysis"), newer]


# -- group deletion, other instances, a closed store -------------------------
async def test_deleting_a_group_removes_its_tasks_evidence_drafts_and_skills(
    store: Store,
) -> None:
    gone = await store.create_group(sample_group())
    kept = await store.create_group(sample_group())
    for n, group in enumerate((gone, kept)):
        await store.save_task(a_task("task_1", group.id, status=TaskStatus.RUNNING))
        await store.save_task(a_task("task_2", group.id, status=TaskStatus.ACCEPTED))
        await store.save_evidence(evidence("task_1", 1, group_id=group.id))
        await store.save_skill_draft(draft(f"d{n}", 100.0, group_id=group.id))
        published = draft(f"p{n}", 50.0, DraftStatus.PUBLISHED, group_id=group.id)
        await store.save_skill_draft(published)
        await store.save_learned_skill(skill("writing", group_id=group.id))

    assert await store.delete_group(gone.id) is True
    assert await store.get_task(gone.id, "task_1") is None
    assert await store.list_tasks(gone.id) == []
    assert await store.active_task(gone.id) is None
    assert await store.evidence_of(gone.id, "task_1") == []
    assert [(t.group_id, t.id) for t in await store.open_tasks()] == [(kept.id, "task_1")]
    assert ids(await store.list_tasks(kept.id)) == ["task_2", "task_1"]
    assert len(await store.evidence_of(kept.id, "task_1")) == 1
    # Drafts and learned skills quote the group's conversation: they go with it.
    for draft_id in ("d0", "p0"):
        assert await store.get_skill_draft(draft_id) is None
    assert await store.list_skill_drafts(group_ids=[gone.id]) == []
    assert await store.list_skill_drafts(DraftStatus.PUBLISHED, group_ids=[gone.id]) == []
    assert await store.learned_skills(gone.id) == []
    assert [d.id for d in await store.list_skill_drafts()] == ["d1", "p1"]
    assert await store.get_skill_draft("d1") == draft("d1", 100.0, group_id=kept.id)
    assert await store.learned_skills() == [skill("writing", group_id=kept.id)]

    # The id is free again: a new task under it starts from nothing.
    await store.save_task(a_task("task_9", gone.id, created_at=200.0))
    assert ids(await store.open_tasks()) == ["task_1", "task_9"]


async def test_another_instance_reads_what_one_saved(store_factory: StoreFactory) -> None:
    writer, reader = store_factory(), store_factory()
    task = a_task("task_1", attempts=[an_attempt()])
    await writer.save_task(task)
    await writer.save_evidence(evidence("task_1", 1))
    await writer.save_skill_draft(draft("d1", 1.0))
    await writer.save_learned_skill(skill("writing"))
    assert await reader.active_task("g1") == task
    assert await reader.open_tasks() == [task]
    assert await reader.evidence_of("g1", "task_1") == [evidence("task_1", 1)]
    assert await reader.list_skill_drafts() == [draft("d1", 1.0)]
    assert await reader.list_skill_drafts(group_ids=["g1"]) == [draft("d1", 1.0)]
    assert await reader.get_skill_draft("d1", group_ids=["g1"]) == draft("d1", 1.0)
    assert await reader.learned_skills() == [skill("writing")]
    assert await reader.learned_skills("g1") == [skill("writing")]


async def test_a_closed_store_refuses_task_calls(store_factory: StoreFactory) -> None:
    store = store_factory()
    await store.close()
    with pytest.raises(StoreError):
        await store.save_task(a_task("task_1"))
    with pytest.raises(StoreError):
        await store.open_tasks()
    with pytest.raises(StoreError):
        await store.learned_skills()


# -- an embedded database made before team mode ------------------------------
def _make_pre_team_database(path: Path, group_id: str) -> None:
    """Every table the embedded store had before team mode, and one group in it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.executescript(f"BEGIN IMMEDIATE;{embedded_schema.SCHEMA}COMMIT;")
        embedded_chat.setup(conn)
        embedded_budgets.setup(conn)
        group = sample_group(id=group_id)
        conn.execute(
            "INSERT INTO groups (id, created_at, data) VALUES (?, ?, ?)",
            (group.id, group.created_at, group.model_dump_json()),
        )
    finally:
        conn.close()


async def test_an_embedded_database_made_before_team_mode_opens_and_gains_the_tables(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    group_id = new_id("grp")
    _make_pre_team_database(data_dir / DB_FILENAME, group_id)
    with sqlite3.connect(data_dir / DB_FILENAME) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "tasks" not in tables and "groups" in tables

    store = EmbeddedStore(data_dir)
    try:
        group = await store.get_group(group_id)
        assert group is not None and group.id == group_id
        task = a_task("task_1", group_id, status=TaskStatus.REVIEW)
        await store.save_task(task)
        await store.save_evidence(evidence("task_1", 1, group_id=group_id))
        await store.save_skill_draft(draft("d1", 1.0, group_id=group_id))
        await store.save_learned_skill(skill("writing", group_id=group_id))
        assert await store.active_task(group_id) == task
    finally:
        await store.close()

    # Opened again, the migrated database keeps what was saved.
    again = EmbeddedStore(data_dir)
    try:
        assert await again.open_tasks() == [task]
        assert [e.attempt for e in await again.evidence_of(group_id, "task_1")] == [1]
        assert await again.get_skill_draft("d1") == draft("d1", 1.0, group_id=group_id)
        assert await again.learned_skills(group_id) == [skill("writing", group_id=group_id)]
        assert await again.delete_group(group_id) is True
        assert await again.list_tasks(group_id) == []
        assert await again.get_skill_draft("d1") is None
        assert await again.learned_skills() == []
    finally:
        await again.close()
