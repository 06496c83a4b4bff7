"""The ``group_message`` frame and the fields that thread a turn under the message it answers."""

from __future__ import annotations

import typing

import jsonschema

from protocol import (
    AgentStatus,
    EventFrame,
    GroupMessageFrame,
    Handoff,
    ResultData,
    ResultUsage,
    dump,
    json_schema,
    parse_server_frame,
)

PERSON = GroupMessageFrame(
    group_id="g1",
    message_id="msg_1",
    author="ann",
    role="user",
    text="@alice have a look",
    ts=1_700_000_000.25,
    mentions=["alice"],
    client_message_id="m-1",
    chain_id="msg_1",
    seq=3,
)

FORWARD = GroupMessageFrame(
    group_id="g1",
    message_id="msg_3",
    author="alice",
    role="assistant",
    text="please take it",
    ts=1_700_000_001.0,
    caused_by=["msg_1", "msg_2"],
    chain_id="msg_1",
    handoff=Handoff.model_validate({"from": "alice", "to": "bob", "reason": "tests"}),
)


def test_a_persons_message_on_the_wire() -> None:
    assert dump(PERSON) == {
        "type": "group_message",
        "groupId": "g1",
        "messageId": "msg_1",
        "author": "ann",
        "role": "user",
        "text": "@alice have a look",
        "ts": 1_700_000_000.25,
        "mentions": ["alice"],
        "clientMessageId": "m-1",
        "chainId": "msg_1",
        "seq": 3,
    }
    assert parse_server_frame(dump(PERSON)) == PERSON


def test_a_hand_off_keeps_from_as_its_wire_name() -> None:
    wire = dump(FORWARD)
    assert wire["handoff"] == {
        "from": "alice",
        "to": "bob",
        "reason": "tests",
        "via": "route_forward",
    }
    assert wire["causedBy"] == ["msg_1", "msg_2"] and wire["mentions"] == []
    parsed = parse_server_frame(wire)
    assert isinstance(parsed, GroupMessageFrame) and parsed.handoff is not None
    assert parsed.handoff.from_vp == "alice"


def test_it_belongs_in_the_event_log_and_the_schema() -> None:
    assert GroupMessageFrame in typing.get_args(EventFrame)
    validator = jsonschema.Draft202012Validator(json_schema())
    validator.validate(dump(FORWARD))
    # A client may not rely on a field the schema does not have.
    assert not validator.is_valid({**dump(PERSON), "messageId": 5})


def test_a_turn_names_what_it_answers_and_what_it_stored() -> None:
    status = AgentStatus(group_id="g1", vp_id="alice", state="thinking", trigger_id="msg_1")
    assert dump(status)["triggerId"] == "msg_1"
    result = ResultData(
        subtype="success",
        session_id="g1",
        is_error=False,
        duration_ms=5,
        total_cost_usd=0.0,
        usage=ResultUsage(),
        message_id="msg_2",
    )
    # Inside the stream-json payload the spelling stays snake_case.
    assert dump(result)["message_id"] == "msg_2"
