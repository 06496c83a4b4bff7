"""The chat mode's frames on the wire: the seed's fields alone make valid frames.

The replies' samples (``tests/fixtures/frame_samples.py``) join
``tests/test_protocol.py``'s server samples, which round-trip them.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from protocol import (
    AskUserAnswer,
    CancelExecution,
    ClaudeOutput,
    CreateConversation,
    ProtocolError,
    ResumeConversation,
    SendMessage,
    SessionReady,
    dump,
    parse_client_frame,
    parse_server_frame,
)


@pytest.mark.parametrize(
    ("wire", "model"),
    [
        ({"type": "create_conversation", "provider": "yeaft", "workDir": "w"}, CreateConversation),
        ({"type": "send_message", "conversationId": "c1", "text": "hi"}, SendMessage),
        (
            {"type": "resume_conversation", "conversationId": "c1", "sessionId": "c1"},
            ResumeConversation,
        ),
        ({"type": "cancel_execution", "conversationId": "c1"}, CancelExecution),
        ({"type": "ask_user_answer", "requestId": "ask_1", "answer": "red"}, AskUserAnswer),
    ],
)
def test_the_seeds_fields_alone_make_a_valid_frame(
    wire: dict[str, str], model: type[BaseModel]
) -> None:
    assert type(parse_client_frame(json.dumps(wire))) is model


def test_a_cancel_must_name_something() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame({"type": "cancel_execution", "vpId": "linus"})
    assert caught.value.to_error_frame().field == "groupId"


def test_the_servers_additions_ride_along_under_their_wire_names() -> None:
    ready = SessionReady(
        conversation_id="c1",
        session_id="c1",
        capabilities={"streaming": True},
        model_info={"vpId": "linus", "model": "offline:default"},
        last_seq=3,
    )
    wire = dump(ready)
    assert wire["modelInfo"] == {"vpId": "linus", "model": "offline:default"}
    assert wire["lastSeq"] == 3
    output = parse_server_frame(
        json.dumps(
            {
                "type": "claude_output",
                "conversationId": "c1",
                "vpId": "linus",
                "turnId": "t1",
                "seq": 4,
                "data": {"type": "system", "subtype": "init"},
            }
        )
    )
    assert isinstance(output, ClaudeOutput) and output.seq == 4 and output.vp_id == "linus"
    message = parse_client_frame(
        {"type": "send_message", "conversationId": "c1", "text": "hi", "clientMessageId": "m1"}
    )
    assert isinstance(message, SendMessage) and message.client_message_id == "m1"
