"""Attachments through the whole deployment (groups and conversations), on both store backends.

A person uploads a file over HTTP and sends it with an inline text file and
an inline binary in a group chat; the group sees the message with the files'
metadata and download URLs (live and in the history); the VP actor's model
request, captured by the fake LLM server, has the image as an image block
(OpenAI and Anthropic wire formats), the text inlined and the binary
described. Limits and foreign ids are typed errors.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
from pydantic import SecretStr

from tests.fixtures.gateway import Gateway, StartGateway, WsClient
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.ray_cluster import MakeRuntime
from tests.test_attachments import PNG


def _is_result(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "yeaft_output" and frame["data"].get("type") == "result"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _engine(fake_llm: FakeLLM, model: str) -> dict[str, Any]:
    return {
        "model": model,
        "openai_api_key": SecretStr("sk-test-0123456789"),
        "openai_base_url": fake_llm.openai_base_url,
        "anthropic_api_key": SecretStr("sk-ant-test-0123456789"),
        "anthropic_base_url": fake_llm.anthropic_base_url,
        "vision_models": ("openai:gpt-vision*", "anthropic:claude-*"),
        "max_retries": 0,
    }


async def _group(gw: Gateway, owner: str, name: str = "t") -> str:
    created = await gw.http.post(
        "/api/groups", json={"name": name, "roster": ["linus"]}, headers=gw.auth(owner)
    )
    return str(created.json()["id"])


async def _upload(gw: Gateway, user: str, gid: str, name: str, mime: str, data: bytes) -> Any:
    return await gw.http.post(
        f"/api/groups/{gid}/attachments",
        params={"name": name},
        content=data,
        headers={**gw.auth(user), "Content-Type": mime},
    )


async def test_files_reach_the_group_the_history_and_an_openai_vision_model(
    start_gateway: StartGateway, make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    gw = await start_gateway(
        make_runtime(engine=_engine(fake_llm, "openai:gpt-vision-test")),
        attachment_max_bytes=4096,
        attachment_max_count=3,
        attachment_max_message_bytes=6000,
    )
    await gw.user("ann")
    await gw.user("bob")
    gid = await _group(gw, "ann")

    # Upload: a session is needed, the size limit is a typed 413, a member gets an id.
    async with httpx.AsyncClient(base_url=gw.base_url) as fresh:
        anonymous = await fresh.post(f"/api/groups/{gid}/attachments?name=a.png", content=PNG)
    assert anonymous.status_code == 401, anonymous.text
    big = await _upload(gw, "ann", gid, "big.bin", "application/octet-stream", b"x" * 5000)
    assert big.status_code == 413
    assert big.json()["error"]["code"] == "attachment_too_large"
    outsider = await _upload(gw, "bob", gid, "a.png", "image/png", PNG)
    assert outsider.status_code == 404
    uploaded = await _upload(gw, "ann", gid, "dot.png", "image/png", PNG)
    assert uploaded.status_code == 201
    image = uploaded.json()
    assert (image["name"], image["mime"], image["size"]) == ("dot.png", "image/png", len(PNG))

    # Download: members only.
    assert (await gw.http.get(image["url"], headers=gw.auth("bob"))).status_code == 404
    got = await gw.http.get(image["url"], headers=gw.auth("ann"))
    assert got.status_code == 200 and got.content == PNG
    assert got.headers["content-type"] == "image/png"

    fake_llm.text("A dot, a plan and some bytes.")
    client = await WsClient.open(gw, "ann")
    await client.request({"type": "subscribe", "groupId": gid})
    files = [
        {"id": image["id"]},
        {"name": "plan.md", "mime": "text/markdown", "base64": _b64(b"# Plan\nship it")},
        {"name": "core.bin", "mime": "application/octet-stream", "base64": _b64(b"\0\1\2\3")},
    ]
    ack = await client.request(
        {"type": "yeaft_session_chat", "groupId": gid, "text": "look", "attachments": files}
    )
    assert ack["type"] == "ack", ack
    # The ack comes back from the coordinator, the frame through the group's
    # tail: either may arrive first.
    shown = await client.seen(lambda f: "seq" in f and f["type"] == "group_message")
    assert [(a["name"], a["size"]) for a in shown["attachments"]] == [
        ("dot.png", len(PNG)),
        ("plan.md", 14),
        ("core.bin", 4),
    ]
    assert all(
        a["url"].startswith(f"/api/groups/{gid}/attachments/att_") for a in shown["attachments"]
    )
    assert "base64" not in str(shown)
    result = await client.recv_until(_is_result, within=60)
    assert result["data"]["is_error"] is False

    user = fake_llm.requests[0].body["messages"][-1]
    text, picture = user["content"]
    assert picture == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{_b64(PNG)}"},
    }
    assert "look" in text["text"] and "# Plan\nship it" in text["text"]
    assert "core.bin (application/octet-stream, 4 bytes)" in text["text"]

    page = await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("ann"))
    [stored] = [m for m in page.json()["messages"] if m["role"] == "user"]
    assert [a["url"] for a in stored["attachments"]] == [a["url"] for a in shown["attachments"]]
    inline_md = await gw.http.get(stored["attachments"][1]["url"], headers=gw.auth("ann"))
    assert inline_md.content == b"# Plan\nship it"
    assert inline_md.headers["content-disposition"].startswith("attachment;")

    # Refusals are typed error frames; nothing is stored for them.
    other = await _group(gw, "ann", "other")
    reused = await client.request(
        {
            "type": "yeaft_session_chat",
            "groupId": other,
            "text": "x",
            "attachments": [{"id": image["id"]}],
        }
    )
    assert (reused["type"], reused["code"], reused["field"]) == (
        "error",
        "forbidden",
        "attachments.0.id",
    )
    too_many = await client.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "x",
            "attachments": [{"id": image["id"]}] * 4,
        }
    )
    assert (too_many["code"], too_many["field"]) == ("attachment_too_large", "attachments")
    too_much = await client.request(
        {
            "type": "yeaft_session_chat",
            "groupId": gid,
            "text": "x",
            "attachments": [
                {"name": "a", "mime": "text/plain", "base64": _b64(b"a" * 3000)},
                {"name": "b", "mime": "text/plain", "base64": _b64(b"b" * 3500)},
            ],
        }
    )
    assert (too_much["code"], too_much["field"]) == ("attachment_too_large", "attachments")
    after = await gw.http.get(f"/api/groups/{gid}/messages", headers=gw.auth("ann"))
    assert len([m for m in after.json()["messages"] if m["role"] == "user"]) == 1
    await client.close()

    # Deleting the group deletes the files sent in it; another group's stay.
    kept = await _upload(gw, "ann", other, "keep.png", "image/png", PNG)
    sent = [a["url"].rsplit("/", 1)[1] for a in shown["attachments"]]
    deleted = await gw.http.delete(f"/api/groups/{gid}", headers=gw.auth("ann"))
    assert deleted.status_code == 204, deleted.text
    files = gw.runtime.config.store.open_attachments()
    try:
        for attachment_id in sent:
            assert await files.get(attachment_id) is None
            assert await files.data(attachment_id) is None
        assert await files.data(kept.json()["id"]) == PNG
    finally:
        await files.aclose()


async def test_an_anthropic_model_gets_an_image_block_and_a_text_model_a_description(
    start_gateway: StartGateway, make_runtime: MakeRuntime, fake_llm: FakeLLM
) -> None:
    engine = {**_engine(fake_llm, "anthropic:claude-test"), "fallback_models": ("openai:gpt-text",)}
    gw = await start_gateway(make_runtime(engine=engine))
    await gw.user("ann")
    gid = await _group(gw, "ann")
    # The first answer fails, so the turn falls back to a model without vision.
    fake_llm.text("It is a dot.")
    fake_llm.error(500, "server down")
    fake_llm.text("Described.")
    client = await WsClient.open(gw, "ann")
    await client.request({"type": "subscribe", "groupId": gid})
    dot = {"name": "dot.png", "mime": "image/png", "base64": _b64(PNG)}
    for _ in range(2):
        ack = await client.request(
            {"type": "yeaft_session_chat", "groupId": gid, "text": "what?", "attachments": [dot]}
        )
        assert ack["type"] == "ack", ack
        await client.recv_until(_is_result, within=60)

    first = fake_llm.requests[0]
    assert first.path == "/v1/messages"
    blocks = first.body["messages"][-1]["content"]
    assert {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": _b64(PNG)},
    } in blocks
    fallback = fake_llm.requests[-1]
    assert fallback.path.endswith("/chat/completions")
    last = fallback.body["messages"][-1]
    assert isinstance(last["content"], str)
    assert "dot.png (image/png" in last["content"] and "cannot see images" in last["content"]
    # The earlier image is a note in the transcript now, not base64.
    assert _b64(PNG) not in str(fallback.body["messages"][:-1])

    # A one-to-one conversation's send_message carries files the same way.
    fake_llm.text("Read it.")
    ready = await client.request(
        {"type": "create_conversation", "provider": "yeaft", "options": {"vpId": "linus"}}
    )
    assert ready["capabilities"]["attachments"] is True
    todo = {"name": "todo.txt", "mime": "text/plain", "base64": _b64(b"buy milk")}
    await client.send(
        {
            "type": "send_message",
            "conversationId": ready["conversationId"],
            "text": "read this",
            "attachments": [todo],
        }
    )
    await client.recv_until(
        lambda f: f.get("type") == "claude_output" and f["data"].get("type") == "result",
        within=60,
    )
    assert "buy milk" in str(fake_llm.requests[-1].body["messages"][-1])
    await client.close()
