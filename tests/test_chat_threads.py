"""Threads in the terminal client (``yeaft chat``, ``gateway.chat_threads``), on real Ray.

ann's terminal lists the recent messages, opens the thread under one, asks
linus there and sees his answer stream in the thread; bob's reply in the
thread arrives live; back on the main timeline a thread's reply is one
line, and a main-timeline message seen from inside a thread is one line.
"""

from __future__ import annotations

import asyncio
import io
import queue

from coordinator.commands import WaitIdle
from gateway.chat_client import ChatClient
from tests.fixtures.gateway import StartGateway, WsClient
from tests.test_cli_server import eventually


async def test_the_terminal_opens_a_thread_and_writes_in_it(start_gateway: StartGateway) -> None:
    gw = await start_gateway()
    token = await gw.user("ann")
    await gw.user("bob")
    made = await gw.http.post(
        "/api/groups",
        json={"name": "team", "roster": ["linus"]},
        headers=gw.auth("ann"),
    )
    gid = made.json()["id"]
    await gw.http.post(
        f"/api/groups/{gid}/members", json={"username": "bob"}, headers=gw.auth("ann")
    )
    bob = await WsClient.open(gw, "bob")
    await bob.request({"type": "subscribe", "groupId": gid, "lastSeq": 0})
    root = await bob.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "which cache?",
            "clientMessageId": "b1",
        }
    )
    assert await gw.runtime.send(WaitIdle(gid))  # linus, the default VP, answered it

    lines: queue.Queue[str] = queue.Queue()
    out = io.StringIO()
    client = ChatClient(gw.base_url, token, "team", out=out, prompt=True)
    task = asyncio.create_task(client.run(read_line=lines.get))
    await eventually(lambda: "team> " in out.getvalue())
    lines.put("/thread\n")
    await eventually(lambda: "1. bob: which cache?" in out.getvalue())
    lines.put("/thread 9\n")
    await eventually(lambda: "no message '9'" in out.getvalue())
    lines.put("/thread 1\n")
    await eventually(lambda: "── thread on bob: which cache?" in out.getvalue())
    lines.put("@linus LRU or ARC?\n")
    # linus answers in the thread, on screen under its header.
    await eventually(lambda: "linus›" in out.getvalue().split("── thread on")[-1], timeout_s=60)
    assert await gw.runtime.send(WaitIdle(gid))
    path = f"/api/groups/{gid}/threads/{root['messageId']}"
    replies = (await gw.http.get(path, headers=gw.auth("ann"))).json()["messages"]
    assert [m["author"] for m in replies] == ["ann", "linus"]
    assert (
        replies[0]["text"] == "@linus LRU or ARC?" and replies[0]["meta"]["channel"] == "terminal"
    )

    # bob answers in the thread: ann's open thread shows it.
    await bob.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "ARC, I think",
            "threadId": root["messageId"],
            "clientMessageId": "b2",
        }
    )
    await eventually(lambda: "bob: ARC, I think" in out.getvalue())
    # Something said on the main timeline is one line here.
    await bob.request(
        {"type": "yeaft_session_chat", "groupId": gid, "text": "lunch?", "clientMessageId": "b3"}
    )
    await eventually(lambda: "a new message on the main timeline from bob" in out.getvalue())
    assert "bob: lunch?" not in out.getvalue()
    lines.put("/main\n")
    await eventually(lambda: "── main timeline ──" in out.getvalue())
    # Back on the main timeline, a reply in the thread is a line naming the thread.
    await bob.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "settled then",
            "threadId": root["messageId"],
            "clientMessageId": "b4",
        }
    )
    await eventually(lambda: "↳ bob replied in the thread on bob: which cache?" in out.getvalue())
    assert "bob: settled then" not in out.getvalue()
    lines.put("/quit\n")
    assert await asyncio.wait_for(task, 20) == 0
    await bob.close()
