"""Team mode over HTTP (``gateway.tasks_http``): tasks, the person's verdict, skills and drafts.

A real gateway on real Ray and both stores, with ``team_model`` of
``test_team_mode`` as the scripted model: a ``/task`` message sent over the
WebSocket starts a task the coordinator plans and runs as a team; the tests
wait for the coordinator with ``team_idle`` (routing, the attempt, learning)
rather than polling, then read and change the task over HTTP.
"""

from __future__ import annotations

from typing import Any

import httpx

from coordinator.commands import TeamIdle
from engine.providers.scripted import ScriptedModel
from protocol.tasks import DraftAction, DraftStatus, SafetyReport, SkillDraft
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import ROSTER
from tests.test_team_mode import team_model

BUILTIN_SKILLS = [
    "launch-plan",
    "market-analysis",
    "messaging-copy",
    "risk-review",
    "synthesis",
    "technical-design",
]


async def _gateway(start_gateway: StartGateway, make_runtime: MakeRuntime) -> Gateway:
    """A gateway whose VPs answer with ``team_model``; ann and bob are signed in."""
    runtime = make_runtime(provider_overrides={"offline": ScriptedModel(team_model)})
    gw = await start_gateway(runtime)
    await gw.user("ann")
    await gw.user("bob")
    return gw


async def _group(gw: Gateway, user: str) -> str:
    reply = await gw.http.post(
        "/api/groups", json={"name": "launch", "roster": ROSTER}, headers=gw.auth(user)
    )
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


async def _task(gw: Gateway, ws: WsClient, gid: str, text: str, cmid: str) -> dict[str, Any]:
    """Send ``/task text`` and wait for the coordinator; the group's newest task."""
    ack = await ws.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": f"/task {text}",
            "clientMessageId": cmid,
        }
    )
    assert ack["type"] == "ack", ack
    await gw.runtime.send(TeamIdle(gid))
    reply = await gw.http.get(f"/api/groups/{gid}/tasks", headers=gw.auth("ann"))
    assert reply.status_code == 200, reply.text
    task: dict[str, Any] = reply.json()["tasks"][0]
    return task


def _error(reply: httpx.Response, status: int) -> dict[str, Any]:
    """The error body of ``reply``, after checking its status."""
    assert reply.status_code == status, reply.text
    error: dict[str, Any] = reply.json()["error"]
    return error


async def test_members_read_tasks_and_accept_once(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    ann, bob = gw.auth("ann"), gw.auth("bob")
    gid = await _group(gw, "ann")
    ws = await WsClient.open(gw, "ann")
    task = await _task(gw, ws, gid, "plan the launch", "m1")
    assert task["status"] == "review" and task["goal"] == "plan the launch"
    assert task["title"] == "Launch plan" and len(task["attempts"]) == 1
    base = f"/api/groups/{gid}/tasks"

    one = (await gw.http.get(f"{base}/{task['id']}", headers=ann)).json()
    assert one["task"]["id"] == task["id"] and one["task"]["status"] == "review"
    [evidence] = one["evidence"]
    assert (evidence["taskId"], evidence["attempt"], evidence["mode"]) == (task["id"], 1, "team")
    assert {r["id"] for r in evidence["runs"]} == {"market", "tech", "message", "synthesis"}
    assert evidence["finalRun"] == "synthesis" and evidence["finalOutput"].startswith("SYNTH ")
    assert evidence["acceptedRun"] is None

    # Someone outside the group learns nothing about its tasks, nor can act on them.
    for path in (base, f"{base}/{task['id']}"):
        assert _error(await gw.http.get(path, headers=bob), 404)["code"] == "not_found"
    _error(await gw.http.post(f"{base}/{task['id']}/accept", headers=bob), 404)
    _error(await gw.http.post(f"{base}/{task['id']}/abandon", headers=bob), 404)
    # A task id the group does not have.
    for missing in ("task_missing", "no-such-task"):
        _error(await gw.http.get(f"{base}/{missing}", headers=ann), 404)
        _error(await gw.http.post(f"{base}/{missing}/accept", headers=ann), 404)
    async with httpx.AsyncClient(base_url=gw.base_url) as anonymous:
        assert (await anonymous.get(base)).status_code == 401

    accepted = await gw.http.post(f"{base}/{task['id']}/accept", headers=ann)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["task"]["status"] == "accepted"
    assert accepted.json()["task"]["acceptedBy"] == "ann"
    again = _error(await gw.http.post(f"{base}/{task['id']}/accept", headers=ann), 409)
    assert again["code"] == "conflict"
    assert again["message"] == "the task is accepted: only a task in review can be accepted"
    revise = await gw.http.post(
        f"{base}/{task['id']}/revise", json={"text": "shorter please"}, headers=ann
    )
    assert "the task is accepted" in _error(revise, 409)["message"]
    abandon = await gw.http.post(f"{base}/{task['id']}/abandon", headers=ann)
    assert _error(abandon, 409)["message"] == "the task is accepted already"

    # Learning ran after the acceptance: the evidence names the accepted run.
    await gw.runtime.send(TeamIdle(gid))
    one = (await gw.http.get(f"{base}/{task['id']}", headers=ann)).json()
    assert one["task"]["status"] == "accepted" and one["task"]["draftId"]
    assert [e["acceptedRun"] for e in one["evidence"]] == ["synthesis"]
    await ws.close()


async def test_revise_then_abandon(start_gateway: StartGateway, make_runtime: MakeRuntime) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    ann = gw.auth("ann")
    gid = await _group(gw, "ann")
    ws = await WsClient.open(gw, "ann")
    task = await _task(gw, ws, gid, "plan the launch", "m1")
    base = f"/api/groups/{gid}/tasks/{task['id']}"

    empty = await gw.http.post(f"{base}/revise", json={"text": ""}, headers=ann)
    assert empty.status_code == 422, empty.text
    revised = await gw.http.post(f"{base}/revise", json={"text": "add a budget"}, headers=ann)
    assert revised.status_code == 202, revised.text
    await gw.runtime.send(TeamIdle(gid))
    one = (await gw.http.get(base, headers=ann)).json()
    assert one["task"]["status"] == "review"
    assert [a["request"] for a in one["task"]["attempts"]] == ["plan the launch", "add a budget"]
    assert [e["attempt"] for e in one["evidence"]] == [1, 2]

    abandoned = await gw.http.post(f"{base}/abandon", headers=ann)
    assert abandoned.status_code == 200, abandoned.text
    assert abandoned.json()["task"]["status"] == "abandoned"
    listed = (await gw.http.get(f"/api/groups/{gid}/tasks", headers=ann)).json()["tasks"]
    assert [(t["id"], t["status"]) for t in listed] == [(task["id"], "abandoned")]
    refused = _error(await gw.http.post(f"{base}/accept", headers=ann), 409)
    assert refused["message"].startswith("the task is abandoned")
    await ws.close()


def _names(reply: httpx.Response) -> list[tuple[str, str, str | None]]:
    """Each listed skill's name, source and group, in the order listed."""
    assert reply.status_code == 200, reply.text
    return [(s["name"], s["source"], s["groupId"]) for s in reply.json()["skills"]]


BUILTIN = [(name, "builtin", None) for name in BUILTIN_SKILLS]


async def test_a_learned_draft_is_its_groups_published_by_its_owner_once(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    await gw.user("cat")
    ann, bob, cat = gw.auth("ann"), gw.auth("bob"), gw.auth("cat")
    assert _names(await gw.http.get("/api/skills", headers=bob)) == BUILTIN
    assert (await gw.http.get("/api/skills/drafts", headers=ann)).json() == {"drafts": []}

    # ann owns the group and bob is a member of it; cat has a group of her own.
    gid = await _group(gw, "ann")
    joined = await gw.http.post(f"/api/groups/{gid}/members", json={"username": "bob"}, headers=ann)
    assert joined.status_code == 200, joined.text
    cats = await _group(gw, "cat")
    ws = await WsClient.open(gw, "ann")
    task = await _task(gw, ws, gid, "plan the launch", "m1")
    reply = await gw.http.post(f"/api/groups/{gid}/tasks/{task['id']}/accept", headers=ann)
    assert reply.status_code == 200, reply.text
    await gw.runtime.send(TeamIdle(gid))

    # A draft quotes its group: only the group's members see it.
    assert (await gw.http.get("/api/skills/drafts", headers=cat)).json() == {"drafts": []}
    [draft] = (await gw.http.get("/api/skills/drafts", headers=ann)).json()["drafts"]
    assert (await gw.http.get("/api/skills/drafts", headers=bob)).json()["drafts"] == [draft]
    assert draft["taskId"] == task["id"] and draft["groupId"] == gid
    # The runs used the built-in launch-plan skill: the draft revises it.
    assert (draft["action"], draft["name"], draft["status"]) == ("revise", "launch-plan", "draft")
    assert draft["safety"] == {"ok": True, "problems": []}
    assert draft["content"].startswith("## Steps")
    only = await gw.http.get("/api/skills/drafts", params={"status": "draft"}, headers=ann)
    assert [d["id"] for d in only.json()["drafts"]] == [draft["id"]]
    none = await gw.http.get("/api/skills/drafts", params={"status": "published"}, headers=ann)
    assert none.json() == {"drafts": []}

    # Only the group's owner publishes; an outsider learns nothing of the draft.
    url = f"/api/skills/drafts/{draft['id']}/publish"
    assert _error(await gw.http.post(url, headers=cat), 404)["message"] == "draft not found"
    refused = _error(await gw.http.post(url, headers=bob), 403)
    assert refused["code"] == "forbidden"
    assert refused["message"] == "only the owner of the group (ann) can publish its skill drafts"
    assert await (await gw.store()).learned_skills() == []

    published = await gw.http.post(url, headers=ann)
    assert published.status_code == 200, published.text
    body = published.json()
    assert body["draft"]["status"] == "published" and body["draft"]["publishedBy"] == "ann"
    assert body["skill"]["name"] == "launch-plan" and body["skill"]["source"] == "learned"
    assert body["skill"]["groupId"] == gid

    # The group's library: the learned skill replaces the built-in of its name.
    for user in (ann, bob):
        library = await gw.http.get("/api/skills", params={"groupId": gid}, headers=user)
        assert _names(library) == [
            ("launch-plan", "learned", gid) if n == "launch-plan" else (n, s, g)
            for n, s, g in BUILTIN
        ]
    library = await gw.http.get("/api/skills", params={"groupId": gid}, headers=ann)
    learned = next(s for s in library.json()["skills"] if s["name"] == "launch-plan")
    assert learned["version"] == draft["id"] and learned["content"] == draft["content"]
    # Without a group: the shared skills, and beside them each group's learned ones.
    listed = _names(await gw.http.get("/api/skills", headers=bob))
    assert listed == [BUILTIN[0], ("launch-plan", "learned", gid), *BUILTIN[1:]]
    # Another group's library, and the list of someone outside, are untouched.
    assert _names(await gw.http.get("/api/skills", params={"groupId": cats}, headers=cat)) == (
        BUILTIN
    )
    assert _names(await gw.http.get("/api/skills", headers=cat)) == BUILTIN
    for group in (gid, "grp_missing", "not an id"):
        outside = await gw.http.get("/api/skills", params={"groupId": group}, headers=cat)
        assert _error(outside, 404)["message"] == "group not found"
    store = await gw.store()
    assert [s.name for s in await store.learned_skills(gid)] == ["launch-plan"]
    assert await store.learned_skills(cats) == []

    listed_drafts = (await gw.http.get("/api/skills/drafts", headers=ann)).json()["drafts"]
    assert [(d["id"], d["status"]) for d in listed_drafts] == [(draft["id"], "published")]
    twice = await gw.http.post(url, headers=ann)
    assert _error(twice, 409)["message"] == "this draft is published already"
    await ws.close()


async def test_a_blocked_or_unknown_draft_is_never_published(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    ann = gw.auth("ann")
    gid = await _group(gw, "ann")
    problem = "the content runs `rm -rf /`"
    blocked = SkillDraft(
        id="draft_blocked",
        task_id="task_1",
        group_id=gid,
        action=DraftAction.NEW,
        name="cleanup",
        description="Clean up a machine.",
        content="## Steps\n1. Run `rm -rf /`.",
        safety=SafetyReport(ok=False, problems=[problem]),
        status=DraftStatus.BLOCKED,
        created_at=1.0,
    )
    await (await gw.store()).save_skill_draft(blocked)
    listed = await gw.http.get("/api/skills/drafts", params={"status": "blocked"}, headers=ann)
    assert [d["id"] for d in listed.json()["drafts"]] == ["draft_blocked"]

    refused = await gw.http.post("/api/skills/drafts/draft_blocked/publish", headers=ann)
    error = _error(refused, 409)
    assert error["code"] == "conflict" and problem in error["message"]
    stored = await (await gw.store()).get_skill_draft("draft_blocked")
    assert stored is not None and stored.status is DraftStatus.BLOCKED
    assert await (await gw.store()).learned_skills() == []
    # A failed report is enough, whatever the status says.
    mislabelled = blocked.model_copy(update={"id": "draft_odd", "status": DraftStatus.DRAFT})
    await (await gw.store()).save_skill_draft(mislabelled)
    refused = await gw.http.post("/api/skills/drafts/draft_odd/publish", headers=ann)
    assert problem in _error(refused, 409)["message"]
    assert await (await gw.store()).learned_skills() == []
    skills = (await gw.http.get("/api/skills", headers=ann)).json()["skills"]
    assert "cleanup" not in {s["name"] for s in skills}

    unknown = await gw.http.post("/api/skills/drafts/draft_nope/publish", headers=ann)
    assert _error(unknown, 404)["message"] == "draft not found"
    bad_status = await gw.http.get("/api/skills/drafts", params={"status": "lost"}, headers=ann)
    assert bad_status.status_code == 422, bad_status.text
    async with httpx.AsyncClient(base_url=gw.base_url) as anonymous:
        assert (await anonymous.get("/api/skills")).status_code == 401
        assert (await anonymous.post("/api/skills/drafts/draft_blocked/publish")).status_code == 401
