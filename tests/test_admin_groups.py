"""The administrators' group routes: list and search, hand over, delete with turns running.

On real Ray and both store backends. An administrator who is in none of the
groups sees them all, hands one over to a member (the group is told who did
it) and deletes one while a VP is answering: the turn is stopped first, the
group's watchers are told, and the deletion is in the audit log.
"""

from __future__ import annotations

from typing import Any

from store.audit import AuditAction, AuditQuery
from store.base import GroupMessage
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime


async def group(gw: Gateway, owner: str, name: str, *members: str) -> str:
    made = await gw.http.post(
        "/api/groups", json={"name": name, "roster": ["linus"]}, headers=gw.auth(owner)
    )
    assert made.status_code == 201, made.text
    gid = str(made.json()["id"])
    for member in members:
        added = await gw.http.post(
            f"/api/groups/{gid}/members", json={"username": member}, headers=gw.auth(owner)
        )
        assert added.status_code == 200, added.text
    return gid


def _is_result(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "yeaft_output" and frame["data"].get("type") == "result"


async def test_groups_are_listed_searched_and_handed_over(start_gateway: StartGateway) -> None:
    gw = await start_gateway(admins="root")
    for name in ("root", "ann", "bob", "cy"):
        await gw.user(name)
    quiet = await group(gw, "ann", "Quiet corner", "bob")
    busy = await group(gw, "cy", "Cache design")
    # The older group speaks last: it is the most recently active.
    store = await gw.store()
    await store.append_message(quiet, GroupMessage(author="bob", role="user", text="hello"))
    # A one-to-one conversation is its person's own: not listed.
    await gw.http.post("/api/conversations", json={"vpId": "linus"}, headers=gw.auth("ann"))

    listed = await gw.http.get("/api/admin/groups", headers=gw.auth("root"))
    assert listed.status_code == 200, listed.text
    groups = listed.json()["groups"]
    assert [g["id"] for g in groups] == [quiet, busy]
    first = groups[0]
    assert first["name"] == "Quiet corner" and first["owner"] == "ann"
    assert first["members"] == ["ann", "bob"] and first["size"] == 2
    assert first["roster"] == ["linus"] and first["lastActivity"] > groups[1]["createdAt"]
    assert groups[1]["lastActivity"] == groups[1]["createdAt"] and groups[1]["size"] == 1
    for q, wanted in (("cache", [busy]), ("BOB", [quiet]), (quiet, [quiet]), ("zzz", [])):
        found = await gw.http.get("/api/admin/groups", params={"q": q}, headers=gw.auth("root"))
        assert [g["id"] for g in found.json()["groups"]] == wanted, q

    watcher = await WsClient.open(gw, "bob")
    await watcher.request({"type": "subscribe", "groupId": quiet, "lastSeq": 0})
    moved = await gw.http.put(
        f"/api/admin/groups/{quiet}/owner", json={"username": "bob"}, headers=gw.auth("root")
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["owner"] == "bob" and moved.json()["size"] == 2
    update = await watcher.seen(
        lambda f: f.get("type") == "group_update" and f.get("action") == "owner"
    )
    assert update["by"] == "root"
    assert update["group"]["owner"] == "bob"
    notice = await watcher.seen(lambda f: "(administrator)" in str(f))
    assert "root (administrator) made bob the owner of the group" in str(notice)
    # bob owns it now: he may rename it, ann no longer may.
    renamed = await gw.http.patch(
        f"/api/groups/{quiet}", json={"name": "Bob's corner"}, headers=gw.auth("bob")
    )
    assert renamed.status_code == 200, renamed.text
    # Only to a member, and only a group that exists.
    stranger = await gw.http.put(
        f"/api/admin/groups/{quiet}/owner", json={"username": "cy"}, headers=gw.auth("root")
    )
    assert stranger.status_code == 404, stranger.text
    assert stranger.json()["error"]["detail"] == {"reason": "not_member"}
    nothing = await gw.http.put(
        "/api/admin/groups/grp_nothing/owner", json={"username": "cy"}, headers=gw.auth("root")
    )
    assert nothing.status_code == 404
    page = await (await gw.store()).read_audit(AuditQuery(action=AuditAction.ROLE_CHANGED))
    (entry,) = page.entries
    assert (entry.actor, entry.target) == ("root", quiet)
    assert entry.detail == {
        "username": "bob",
        "scope": "group",
        "role": "owner",
        "previousOwner": "ann",
        "byAdmin": True,
    }
    await watcher.close()


async def test_deleting_a_group_stops_its_running_turn_first(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    runtime = make_runtime(engine={"model": "offline:default?tps=20&tokens=2000"})
    gw = await start_gateway(runtime, admins="root")
    for name in ("root", "ann", "bob"):
        await gw.user(name)
    gid = await group(gw, "ann", "Long answers", "bob")
    ann = await WsClient.open(gw, "ann")
    await ann.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    await ann.send({"type": "yeaft_session_chat", "groupId": gid, "text": "@linus go on"})
    await ann.recv_until(lambda f: f.get("type") == "yeaft_output" and f.get("vpId") == "linus")

    deleted = await gw.http.delete(f"/api/admin/groups/{gid}", headers=gw.auth("root"))
    assert deleted.status_code == 200, deleted.text
    # linus's turn was running: it was stopped before the group went.
    assert deleted.json() == {"id": gid, "name": "Long answers", "stoppedTurns": 1}
    gone = await ann.recv_until(
        lambda f: f.get("type") == "group_update" and f.get("action") == "deleted"
    )
    assert gone["group"]["id"] == gid
    # No reply finished normally.
    assert all(f["data"]["stop_reason"] == "aborted" for f in ann.received if _is_result(f))
    store = await gw.store()
    assert await store.get_group(gid) is None
    again = await gw.http.delete(f"/api/admin/groups/{gid}", headers=gw.auth("root"))
    assert again.status_code == 404
    page = await store.read_audit(AuditQuery(action=AuditAction.GROUP_DELETED))
    (entry,) = page.entries
    assert (entry.actor, entry.target) == ("root", gid)
    assert entry.detail == {
        "name": "Long answers",
        "owner": "ann",
        "stoppedTurns": 1,
        "byAdmin": True,
    }
    listed = await gw.http.get("/api/admin/groups", headers=gw.auth("root"))
    assert listed.json()["groups"] == []
    await ann.close()
