"""Wire models: every frame round-trips, and the JSON schema names and accepts every one.

Bad frames and the errors they become are in ``tests/test_protocol_errors.py``.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from protocol import (
    Ack,
    AddVp,
    AgentStatus,
    AskUserAnswer,
    AskUserQuestion,
    AssistantData,
    AssistantMessage,
    Attachment,
    CancelExecution,
    ClaudeOutput,
    ClientFrame,
    CreateConversation,
    CreateGroup,
    DataPayload,
    DeleteConversation,
    DeleteGroup,
    ErrorCode,
    ErrorFrame,
    GroupMessageFrame,
    GroupSettingsPatch,
    GroupUpdate,
    Handoff,
    ListFolders,
    ListGroups,
    ListHistorySessions,
    MessageAttachment,
    Ping,
    Pong,
    RemoveVp,
    RenameGroup,
    ResultData,
    ResultUsage,
    ResumeConversation,
    SendMessage,
    ServerFrame,
    SessionReady,
    SetDefaultVp,
    Subscribe,
    SystemData,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Unsubscribe,
    UserData,
    UserMessage,
    YeaftOutput,
    YeaftSessionChat,
    dump,
    dumps,
    json_schema,
    parse_client_frame,
    parse_data,
    parse_server_frame,
)
from tests.fixtures.frame_samples import MEMBER_CLIENT_SAMPLES, MEMBER_SERVER_SAMPLES
from tests.protocol_helpers import client_json, member_types

ATTACHMENT = Attachment(name="notes.txt", mime="text/plain", base64="aGVsbG8=")

CLIENT_SAMPLES: list[BaseModel] = [
    SendMessage(conversation_id="c1", text="hello", attachments=[ATTACHMENT]),
    SendMessage(conversation_id="c1", text="plain"),
    YeaftSessionChat(
        group_id="g1",
        text="@alice look at this",
        mentions=["alice"],
        attachments=[ATTACHMENT],
        client_message_id="m-1",
        conversation_id="yeaft-virtual-1",
    ),
    YeaftSessionChat(group_id="g1", text="to everyone"),
    CancelExecution(group_id="g1", vp_id="alice"),
    CancelExecution(conversation_id="c1"),
    AskUserAnswer(request_id="q-1", answer="yes", group_id="g1"),
    AskUserAnswer(request_id="q-2", answer=["A", "B"], conversation_id="c1"),
    CreateConversation(provider="openai", work_dir="/tmp/w", options={"model": "x", "n": 1}),
    CreateConversation(),
    ResumeConversation(conversation_id="c1", session_id="s1"),
    DeleteConversation(conversation_id="c1"),
    ListHistorySessions(provider="openai", work_dir="/w", request_id="r1"),
    ListFolders(provider="anthropic"),
    CreateGroup(
        name="Design review",
        roster=["steve", "dieter"],
        default_vp_id="steve",
        settings=GroupSettingsPatch(fanout_cap=4, language="zh"),
        request_id="r2",
    ),
    RenameGroup(group_id="g1", name="New name"),
    DeleteGroup(group_id="g1"),
    AddVp(group_id="g1", vp_id="linus"),
    RemoveVp(group_id="g1", vp_id="linus"),
    SetDefaultVp(group_id="g1", vp_id="linus"),
    SetDefaultVp(group_id="g1", vp_id=None),
    ListGroups(),
    Subscribe(group_id="g1", last_seq=41, vp_ids=["alice", "bob"]),
    Subscribe(group_id="g1", last_seq=0),
    Unsubscribe(group_id="g1"),
    Ping(),
    *MEMBER_CLIENT_SAMPLES,
]

DATA_SAMPLES: list[BaseModel] = [
    AssistantData(message=AssistantMessage(content=[TextBlock(text="hi")])),
    AssistantData(
        message=AssistantMessage(content=[ThinkingBlock(thinking="hmm", signature="sig")])
    ),
    AssistantData(
        message=AssistantMessage(
            content=[ToolUseBlock(id="t1", name="bash", input={"cmd": "ls", "opt": None})]
        )
    ),
    UserData(
        message=UserMessage(
            content=[ToolResultBlock(tool_use_id="t1", content="out", is_error=True)]
        )
    ),
    ResultData(
        subtype="success",
        session_id="c1",
        is_error=False,
        duration_ms=1234,
        total_cost_usd=0.012,
        usage=ResultUsage(
            input_tokens=10,
            output_tokens=5,
            cache_read_input_tokens=2,
            cache_creation_input_tokens=1,
        ),
        stop_reason="end_turn",
        result="done",
        attempts=[{"model": "m", "ok": True}],
        message_id="msg_2",
    ),
    ResultData(
        subtype="error_during_execution",
        session_id="c1",
        is_error=True,
        duration_ms=0,
        total_cost_usd=0.0,
        usage=ResultUsage(),
        error="boom",
    ),
    SystemData(subtype="notice", message="retrying", detail={"kind": "retry", "attempt": 2}),
    SystemData(subtype="init"),
]

SERVER_SAMPLES: list[BaseModel] = [
    *(ClaudeOutput(conversation_id="c1", data=d) for d in DATA_SAMPLES),  # type: ignore[arg-type]
    YeaftOutput(
        conversation_id="c1",
        group_id="g1",
        vp_id="alice",
        turn_id="1a2b3c4d:alice",
        seq=7,
        data=DATA_SAMPLES[0],  # type: ignore[arg-type]
    ),
    SessionReady(conversation_id="c1", session_id="s1", model="m", capabilities={"tools": True}),
    AgentStatus(group_id="g1", vp_id="alice", state="streaming", turn_id="t1"),
    AgentStatus(group_id="g1", vp_id="alice", state="thinking", turn_id="t2", trigger_id="msg_1"),
    AgentStatus(state="idle"),
    GroupMessageFrame(
        group_id="g1",
        message_id="msg_3",
        author="alice",
        role="assistant",
        text="please take it",
        ts=1_700_000_001.0,
        caused_by=["msg_1", "msg_2"],
        chain_id="msg_1",
        handoff=Handoff.model_validate({"from": "alice", "to": "bob", "reason": "tests"}),
        attachments=[MessageAttachment(name="plan.md", mime="text/markdown", size=12)],
    ),
    AskUserQuestion(
        request_id="q-1",
        prompt="Run it?",
        choices=["yes", "no"],
        multi_select=True,
        group_id="g1",
        vp_id="alice",
        turn_id="t1",
        expires_at=1_700_000_000.5,
    ),
    ErrorFrame(
        code=ErrorCode.INVALID_FRAME,
        message="bad",
        field="mentions.3",
        request_id="r1",
        detail={"x": 1},
    ),
    Ack(client_message_id="m-1", message_id="msg_1", group_id="g1"),
    Ack(message_id="msg_2", group_id="g1"),
    GroupUpdate(group={"id": "g1", "roster": ["alice"]}),
    Pong(),
    *MEMBER_SERVER_SAMPLES,
]


def _sample_types(samples: list[BaseModel]) -> set[str]:
    return {getattr(s, "type") for s in samples}  # noqa: B009 - models share no base type


# Round trips ---------------------------------------------------------------


def test_samples_cover_every_type() -> None:
    assert _sample_types(CLIENT_SAMPLES) == member_types(ClientFrame) - {"unify_group_chat"}
    assert _sample_types(SERVER_SAMPLES) == member_types(ServerFrame)
    assert _sample_types(DATA_SAMPLES) == member_types(DataPayload)


@pytest.mark.parametrize("frame", CLIENT_SAMPLES, ids=lambda f: f.type)
def test_client_frame_round_trip(frame: BaseModel) -> None:
    wire = json.dumps(dump(frame))
    parsed = parse_client_frame(wire)
    assert parsed == frame
    assert type(parsed) is type(frame)
    assert parse_client_frame(json.loads(wire)) == frame
    assert parse_client_frame(wire.encode()) == frame
    assert json.loads(dumps(frame)) == dump(frame)


@pytest.mark.parametrize("frame", SERVER_SAMPLES, ids=lambda f: f.type)
def test_server_frame_round_trip(frame: BaseModel) -> None:
    wire = json.dumps(dump(frame))
    parsed = parse_server_frame(wire)
    assert parsed == frame
    assert dump(parsed) == dump(frame)


@pytest.mark.parametrize("payload", DATA_SAMPLES, ids=lambda d: d.type)
def test_data_payload_round_trip(payload: BaseModel) -> None:
    assert parse_data(json.dumps(dump(payload))) == payload


def test_dump_uses_camel_case_and_omits_none() -> None:
    wire = dump(YeaftSessionChat(group_id="g1", text="hi", client_message_id="m1"))
    assert wire == {
        "type": "yeaft_session_chat",
        "groupId": "g1",
        "text": "hi",
        "clientMessageId": "m1",
    }
    assert dump(SetDefaultVp(group_id="g1", vp_id=None)) == {
        "type": "set_default_vp",
        "groupId": "g1",
        "vpId": None,
    }


def test_data_payload_keeps_stream_json_spelling() -> None:
    wire = dump(DATA_SAMPLES[3])
    assert wire["message"]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "out",
        "is_error": True,
    }
    # None inside a tool's free-form input is data, not an absent field.
    assert dump(DATA_SAMPLES[2])["message"]["content"][0]["input"] == {"cmd": "ls", "opt": None}


@pytest.mark.parametrize("name", ["yeaft_session_chat", "unify_group_chat"])
def test_both_group_chat_names_parse_to_the_canonical_frame(name: str) -> None:
    frame = parse_client_frame(client_json(type=name, groupId="g1", text="hi", mentions=["alice"]))
    assert isinstance(frame, YeaftSessionChat)
    assert frame.type == "yeaft_session_chat"
    assert dump(frame)["type"] == "yeaft_session_chat"
    assert frame.mentions == ["alice"]


def test_python_code_may_use_snake_case_names() -> None:
    assert Subscribe(group_id="g", last_seq=3).last_seq == 3
    assert Subscribe.model_validate({"groupId": "g", "lastSeq": 3}).last_seq == 3


def test_server_frames_keep_unknown_fields() -> None:
    raw = {"type": "pong", "serverTime": 12.5}
    frame = parse_server_frame(raw)
    assert dump(frame) == raw
    data = {"type": "system", "subtype": "init", "tools": ["bash"]}
    out = parse_server_frame({"type": "claude_output", "conversationId": "c", "data": data})
    assert dump(out)["data"] == data


# Schema --------------------------------------------------------------------


def _string_constants(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        if isinstance(schema.get("const"), str):
            found.add(schema["const"])
        found.update(v for v in schema.get("enum", []) if isinstance(v, str))
        for value in schema.values():
            found |= _string_constants(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= _string_constants(value)
    return found


def test_schema_names_every_type() -> None:
    schema = json_schema()
    json.dumps(schema)  # it must be plain JSON
    constants = _string_constants(schema)
    every = member_types(ClientFrame) | member_types(ServerFrame) | member_types(DataPayload)
    assert every <= constants
    assert {"unify_group_chat", "text", "thinking", "tool_use", "tool_result"} <= constants
    assert {code.value for code in ErrorCode} <= constants
    assert {"ClientFrame", "ServerFrame", "DataPayload"} <= set(schema["$defs"])


def test_schema_accepts_every_sample_and_refuses_a_typo() -> None:
    validator = jsonschema.Draft202012Validator(json_schema())
    for frame in CLIENT_SAMPLES + SERVER_SAMPLES:
        validator.validate(dump(frame))
    assert not validator.is_valid({"type": "subscribe", "groupId": "g", "lastSeqq": 1})
    assert not validator.is_valid({"type": "no_such_frame"})
