"""Wire models: every frame round-trips, and every bad frame becomes one typed error."""

from __future__ import annotations

import json
import typing
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from protocol import (
    MAX_MENTIONS,
    MAX_TEXT_LENGTH,
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
    ProtocolError,
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
    check_size,
    dump,
    dumps,
    json_schema,
    parse_client_frame,
    parse_data,
    parse_server_frame,
)
from tests.fixtures.frame_samples import MEMBER_CLIENT_SAMPLES, MEMBER_SERVER_SAMPLES

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


def _member_types(union: Any) -> set[str]:
    """The wire type names of every member of an annotated discriminated union."""
    members = typing.get_args(typing.get_args(union)[0])
    names: set[str] = set()
    for member in members:
        names.update(typing.get_args(member.model_fields["type"].annotation))
    return names


def _sample_types(samples: list[BaseModel]) -> set[str]:
    return {getattr(s, "type") for s in samples}  # noqa: B009 - models share no base type


def _client_json(**fields: Any) -> str:
    return json.dumps(fields)


# Round trips ---------------------------------------------------------------


def test_samples_cover_every_type() -> None:
    assert _sample_types(CLIENT_SAMPLES) == _member_types(ClientFrame) - {"unify_group_chat"}
    assert _sample_types(SERVER_SAMPLES) == _member_types(ServerFrame)
    assert _sample_types(DATA_SAMPLES) == _member_types(DataPayload)


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
    frame = parse_client_frame(_client_json(type=name, groupId="g1", text="hi", mentions=["alice"]))
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


# Errors --------------------------------------------------------------------

TOO_MANY_MENTIONS = [f"vp{i}" for i in range(MAX_MENTIONS + 1)]

ERROR_CASES: list[tuple[str, Any, ErrorCode, str | None, str]] = [
    ("missing field", {"type": "send_message", "text": "hi"}, ErrorCode.INVALID_FRAME,
     "conversationId", "'conversationId' is required"),
    ("wrong type", {"type": "subscribe", "groupId": "g", "lastSeq": "5"},
     ErrorCode.INVALID_FRAME, "lastSeq", "valid integer"),
    ("bool is not int", {"type": "subscribe", "groupId": "g", "lastSeq": True},
     ErrorCode.INVALID_FRAME, "lastSeq", "valid integer"),
    ("negative seq", {"type": "subscribe", "groupId": "g", "lastSeq": -1},
     ErrorCode.INVALID_FRAME, "lastSeq", "greater than or equal to 0"),
    ("extra field", {"type": "subscribe", "groupId": "g", "lastSeqq": 1},
     ErrorCode.INVALID_FRAME, "lastSeqq", "'lastSeqq' is not a field of subscribe"),
    ("snake case on the wire", {"type": "unsubscribe", "group_id": "g"},
     ErrorCode.INVALID_FRAME, "groupId", "required"),
    ("bad mention", {"type": "yeaft_session_chat", "groupId": "g", "text": "x",
                     "mentions": ["a", "b", "c", "no spaces"]},
     ErrorCode.INVALID_FRAME, "mentions.3", "pattern"),
    ("too many mentions", {"type": "yeaft_session_chat", "groupId": "g", "text": "x",
                           "mentions": TOO_MANY_MENTIONS},
     ErrorCode.INVALID_FRAME, "mentions", "at most 32"),
    ("empty id", {"type": "delete_group", "groupId": ""}, ErrorCode.INVALID_FRAME,
     "groupId", "at least 1"),
    ("long id", {"type": "delete_group", "groupId": "x" * 129}, ErrorCode.INVALID_FRAME,
     "groupId", "at most 128"),
    ("long text", {"type": "send_message", "conversationId": "c",
                   "text": "x" * (MAX_TEXT_LENGTH + 1)},
     ErrorCode.INVALID_FRAME, "text", "at most 100000"),
    ("bad attachment", {"type": "send_message", "conversationId": "c", "text": "x",
                        "attachments": [{"name": "a", "mime": "text/plain"}]},
     ErrorCode.INVALID_FRAME, "attachments.0.base64", "required"),
    ("extra attachment field", {"type": "send_message", "conversationId": "c", "text": "x",
                                "attachments": [{"name": "a", "mime": "text/plain",
                                                 "base64": "", "size": 1}]},
     ErrorCode.INVALID_FRAME, "attachments.0.size", "not a field"),
    ("answer list item", {"type": "ask_user_answer", "requestId": "q", "answer": ["a", 1]},
     ErrorCode.INVALID_FRAME, "answer.1", "valid string"),
    ("cancel without target", {"type": "cancel_execution", "vpId": "alice"},
     ErrorCode.INVALID_FRAME, "groupId", "conversationId or groupId is required"),
    ("setting out of bounds", {"type": "create_group", "name": "g", "roster": [],
                               "settings": {"fanoutCap": 17}},
     ErrorCode.INVALID_FRAME, "settings.fanoutCap", "less than or equal to 16"),
    ("unknown setting", {"type": "create_group", "name": "g", "roster": [],
                         "settings": {"budget": "x"}},
     ErrorCode.INVALID_FRAME, "settings.budget", "'settings.budget' is not a field"),
    ("setting of the wrong type", {"type": "create_group", "name": "g", "roster": [],
                                   "settings": {"throttleWindowS": "5"}},
     ErrorCode.INVALID_FRAME, "settings.throttleWindowS", "valid number"),
    ("null required", {"type": "rename_group", "groupId": "g", "name": None},
     ErrorCode.INVALID_FRAME, "name", "valid string"),
    ("unknown type", {"type": "send_mesage"}, ErrorCode.UNKNOWN_TYPE, "type",
     "unknown frame type 'send_mesage'"),
    ("missing type", {"groupId": "g"}, ErrorCode.UNKNOWN_TYPE, "type", "no 'type' field"),
    ("type not a string", {"type": 7}, ErrorCode.UNKNOWN_TYPE, "type", "unknown frame type"),
    ("server type sent by client", {"type": "pong"}, ErrorCode.UNKNOWN_TYPE, "type", "'pong'"),
    ("bad json", '{"type": "ping",', ErrorCode.BAD_JSON, None, "not valid JSON"),
    ("not utf-8", b"\xff\xfe{}", ErrorCode.BAD_JSON, None, "not valid JSON"),
    ("lone surrogate", '"\ud800"', ErrorCode.BAD_JSON, None, "not valid"),
    ("empty text", "", ErrorCode.BAD_JSON, None, "not valid JSON"),
    ("array", "[1, 2]", ErrorCode.INVALID_FRAME, None, "must be a JSON object"),
    ("string", '"ping"', ErrorCode.INVALID_FRAME, None, "must be a JSON object"),
    ("null", "null", ErrorCode.INVALID_FRAME, None, "must be a JSON object"),
    ("number", "42", ErrorCode.INVALID_FRAME, None, "must be a JSON object"),
    ("python list", [{"type": "ping"}], ErrorCode.INVALID_FRAME, None, "JSON object"),
    ("python none", None, ErrorCode.INVALID_FRAME, None, "JSON object"),
    ("deep json", '{"type":"create_conversation","options":' + "[" * 5000 + "]" * 5000 + "}",
     ErrorCode.BAD_JSON, None, "recursion limit"),
    ("deep json array", "[" * 100_000, ErrorCode.BAD_JSON, None, "not valid JSON"),
    ("nan", '{"type":"ask_user_answer","requestId":"q","answer":NaN}',
     ErrorCode.INVALID_FRAME, "answer", "invalid"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "code", "field", "reason"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_bad_client_frame(raw: Any, code: ErrorCode, field: str | None, reason: str) -> None:
    if isinstance(raw, dict):
        # The same frame must fail the same way as text and as a mapping.
        with pytest.raises(ProtocolError) as from_text:
            parse_client_frame(json.dumps(raw))
        assert (from_text.value.code, from_text.value.field) == (code, field)
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame(raw)
    err = caught.value
    assert isinstance(err, ValueError)
    assert err.code == code
    assert err.field == field
    assert reason in err.reason
    assert str(err) == err.reason


def test_unknown_type_lists_the_known_ones() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame('{"type": "nope"}')
    assert caught.value.detail is not None
    assert "yeaft_session_chat" in caught.value.detail["expected"]


def test_nested_data_errors_name_the_path() -> None:
    frame = {
        "type": "claude_output",
        "conversationId": "c",
        "data": {"type": "assistant", "message": {"content": [{"type": "text", "text": 5}]}},
    }
    with pytest.raises(ProtocolError) as caught:
        parse_server_frame(frame)
    assert caught.value.field == "data.message.content.0.text"
    frame["data"] = {"type": "bogus"}
    with pytest.raises(ProtocolError) as caught:
        parse_server_frame(frame)
    assert caught.value.field == "data.type"
    assert "'bogus'" in caught.value.reason


def test_deeply_nested_mapping_is_refused() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(1000):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame({"type": "create_conversation", "options": deep})
    assert caught.value.code == ErrorCode.INVALID_FRAME
    assert "levels deep" in caught.value.reason


def test_cyclic_mapping_is_refused() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ProtocolError, match="refers to itself"):
        parse_client_frame({"type": "create_conversation", "options": loop})


def test_shared_empty_containers_are_not_cycles() -> None:
    frame = parse_client_frame({"type": "create_conversation", "options": {"a": (), "b": ()}})
    assert isinstance(frame, CreateConversation)


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "ping", 1: 2},
        {"type": "create_conversation", "options": {"x": object()}},
        {"type": "send_message", "conversationId": object(), "text": "x"},
        {"type": "create_group", "name": "n", "roster": ("a", "b")},
        {"type": b"ping"},
    ],
    ids=["int key", "object value", "object id", "tuple roster", "bytes type"],
)
def test_weird_python_input_raises_only_protocol_error(raw: Any) -> None:
    try:
        parse_client_frame(raw)
    except ProtocolError as err:
        assert err.code in {ErrorCode.INVALID_FRAME, ErrorCode.UNKNOWN_TYPE}


def test_error_frame_from_protocol_error() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame(_client_json(type="list_history_sessions", requestId="r9", x=1))
    err = caught.value
    assert err.request_id == "r9"
    assert err.frame_type == "list_history_sessions"
    frame = err.to_error_frame()
    assert dump(frame) == {
        "type": "error",
        "code": "invalid_frame",
        "message": err.reason,
        "field": "x",
        "requestId": "r9",
    }
    assert err.to_error_frame(request_id="other").request_id == "other"
    assert parse_server_frame(dumps(frame)) == frame


def test_client_message_id_is_echoed_as_the_request_id() -> None:
    raw = _client_json(type="yeaft_session_chat", groupId="g", clientMessageId="m7")
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame(raw)
    assert caught.value.field == "text"
    assert caught.value.to_error_frame().request_id == "m7"


# Size ----------------------------------------------------------------------


def test_check_size() -> None:
    check_size("x" * 100, 100)
    check_size(b"x" * 100, 100)
    for raw in ("x" * 101, b"x" * 101, "é" * 51):  # é is two bytes in UTF-8
        with pytest.raises(ProtocolError) as caught:
            check_size(raw, 100)
        assert caught.value.code == ErrorCode.FRAME_TOO_LARGE
        assert caught.value.to_error_frame().detail == {"limit": 100}
    check_size("é" * 50, 100)


def test_parse_checks_size_before_decoding() -> None:
    raw = '{"type": "ping"}' + " " * 100
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame(raw, max_bytes=64)
    assert caught.value.code == ErrorCode.FRAME_TOO_LARGE
    assert isinstance(parse_client_frame(raw, max_bytes=1024), Ping)


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
    every = _member_types(ClientFrame) | _member_types(ServerFrame) | _member_types(DataPayload)
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


# Fuzz ----------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
frame_types = st.sampled_from(sorted(_member_types(ClientFrame) | {"pong", "", "x"}))
field_names = st.sampled_from(
    ["groupId", "text", "mentions", "vpId", "lastSeq", "requestId", "answer", "attachments",
     "conversationId", "roster", "name", "vpIds", "options", "settings", "extra"]
)  # fmt: skip
frames = st.builds(
    lambda kind, fields: {"type": kind, **fields},
    frame_types,
    st.dictionaries(field_names, json_values, max_size=5),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(frames, json_values))
def test_fuzzed_frames_parse_or_raise_protocol_error(raw: Any) -> None:
    for form in (raw, json.dumps(raw), json.dumps(raw).encode()):
        try:
            parse_client_frame(form)
        except ProtocolError as err:
            assert err.code in {ErrorCode.BAD_JSON, ErrorCode.INVALID_FRAME, ErrorCode.UNKNOWN_TYPE}


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64))
def test_fuzzed_bytes_parse_or_raise_protocol_error(raw: str | bytes) -> None:
    try:
        parse_client_frame(raw)
    except ProtocolError:
        pass
