"""Workspace files over HTTP: a file a VP wrote is listed and downloaded by members only.

Real Ray, the real gateway and both stores; the offline model is scripted
to call ``write_file`` once, then answer.
"""

from __future__ import annotations

from typing import Any

import httpx

from engine.providers.base import ModelRequest
from engine.providers.scripted import Reply, ScriptedModel
from store.workspaces import conversation_files, group_files
from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.ray_cluster import MakeRuntime
from tests.group_helpers import last_is_tool_result

REPORT = "# Report\n<script>alert(1)</script>\ncache the sessions\n"


def writes_a_report(request: ModelRequest) -> Reply:
    """Writes ``out/report.html`` with the tool, then says so."""
    if last_is_tool_result(request):
        return Reply(f"Wrote it: {request.messages[-1].content}")
    return Reply(tool_calls=[("write_file", {"path": "out/report.html", "content": REPORT})])


async def _gateway(start_gateway: StartGateway, make_runtime: MakeRuntime) -> Gateway:
    provider = ScriptedModel(writes_a_report)
    gw = await start_gateway(make_runtime(provider_overrides={"offline": provider}))
    for name in ("ann", "bob"):
        await gw.user(name)
    return gw


def _done(frame: dict[str, Any]) -> bool:
    return frame.get("data", {}).get("type") == "result"


async def test_group_files_are_listed_and_downloaded_by_members_only(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    ann, bob = gw.auth("ann"), gw.auth("bob")
    made = await gw.http.post("/api/groups", json={"name": "t", "roster": ["linus"]}, headers=ann)
    gid = made.json()["id"]
    ws = await WsClient.open(gw, "ann")
    await ws.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    chat = {
        "type": "yeaft_session_chat",
        "groupId": gid,
        "text": "write it !approve write_file",  # write_file asks first by default
        "clientMessageId": "m",
    }
    await ws.send(chat)
    result = await ws.recv_until(_done)
    assert result["data"]["subtype"] == "success", result
    await ws.close()

    folder = group_files(gw.runtime.config.store.data_dir, gid)
    assert (folder / "out" / "report.html").read_text() == REPORT
    listed = (await gw.http.get(f"/api/groups/{gid}/files", headers=ann)).json()
    assert [(f["path"], f["size"]) for f in listed["files"]] == [
        ("out/report.html", len(REPORT.encode()))
    ]
    assert listed["truncated"] is False
    got = await gw.http.get(f"/api/groups/{gid}/files/out/report.html", headers=ann)
    assert got.status_code == 200 and got.text == REPORT
    # Downloaded, never rendered on this origin.
    assert got.headers["content-type"] == "application/octet-stream"
    assert got.headers["content-disposition"].startswith("attachment;")
    assert got.headers["x-content-type-options"] == "nosniff"

    # Not a member: the group does not exist for bob; nobody: 401.
    for path in (f"/api/groups/{gid}/files", f"/api/groups/{gid}/files/out/report.html"):
        assert (await gw.http.get(path, headers=bob)).status_code == 404
        async with httpx.AsyncClient(base_url=gw.base_url) as anonymous:
            assert (await anonymous.get(path)).status_code == 401
    # Paths that leave the workspace, or name nothing, are 404.
    (folder / "link").symlink_to(gw.runtime.config.store.data_dir)
    for bad in (
        "%2e%2e/%2e%2e/jwt_secret",
        "link/jwt_secret",
        "out",
        "nope.txt",
        "%2Fetc%2Fpasswd",
    ):
        missing = await gw.http.get(f"/api/groups/{gid}/files/{bad}", headers=ann)
        assert missing.status_code == 404, (bad, missing.text)

    # The workspace goes with its group; what a link in it pointed to stays.
    assert (await gw.http.delete(f"/api/groups/{gid}", headers=ann)).status_code == 204
    assert not folder.exists() and gw.runtime.config.store.data_dir.is_dir()


async def test_conversation_files_are_their_owners(
    start_gateway: StartGateway, make_runtime: MakeRuntime
) -> None:
    gw = await _gateway(start_gateway, make_runtime)
    ws = await WsClient.open(gw, "ann")
    ready = await ws.request(
        {"type": "create_conversation", "workDir": "proj", "options": {"vpId": "linus"}}
    )
    cid = ready["conversationId"]
    await ws.send(
        {"type": "send_message", "conversationId": cid, "text": "write it !approve write_file"}
    )
    await ws.recv_until(lambda f: f.get("type") == "claude_output" and _done(f))
    await ws.close()

    data_dir = gw.runtime.config.store.data_dir
    assert (conversation_files(data_dir, "proj", "ann") / "out" / "report.html").is_file()
    listed = await gw.http.get(f"/api/conversations/{cid}/files", headers=gw.auth("ann"))
    assert [f["path"] for f in listed.json()["files"]] == ["out/report.html"]
    path = f"/api/conversations/{cid}/files/out/report.html"
    assert (await gw.http.get(path, headers=gw.auth("ann"))).text == REPORT
    assert (await gw.http.get(path, headers=gw.auth("bob"))).status_code == 404
    # The conversation is not a group, even to its owner.
    assert (
        await gw.http.get(f"/api/groups/{cid}/files", headers=gw.auth("ann"))
    ).status_code == 404
