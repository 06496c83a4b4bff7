"""Wire models: every bad frame becomes one typed error, however malformed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import (
    MAX_MENTIONS,
    MAX_TEXT_LENGTH,
    ClientFrame,
    CreateConversation,
    ErrorCode,
    Ping,
    ProtocolError,
    check_size,
    dump,
    dumps,
    parse_client_frame,
    parse_server_frame,
)
from tests.protocol_helpers import client_json, member_types

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
        parse_client_frame(client_json(type="list_history_sessions", requestId="r9", x=1))
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
    raw = client_json(type="yeaft_session_chat", groupId="g", clientMessageId="m7")
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


# Fuzz ----------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
frame_types = st.sampled_from(sorted(member_types(ClientFrame) | {"pong", "", "x"}))
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
