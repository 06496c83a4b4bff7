"""Every server frame can be sent: text UTF-8 cannot encode is never echoed or dumped.

A lone surrogate (``"\\ud800"`` in JSON text, or the bytes ``ED A0 80`` in a
binary frame, which ``json.loads`` turns into one) can reach a Python string,
and UTF-8 cannot encode it. The gateway test of the same thing over a real
WebSocket is in ``tests/test_gateway_ws.py``.
"""

from __future__ import annotations

import json
import logging

import pytest
from pydantic_core import PydanticSerializationError

from protocol import (
    ErrorCode,
    ErrorFrame,
    ProtocolError,
    dumps,
    parse_client_frame,
    parse_server_frame,
)

LONE_SURROGATE_TEXT = r'{"type":"ping","requestId":"\ud800"}'
LONE_SURROGATE_BYTES = b'{"type":"ping","requestId":"\xed\xa0\x80"}'


@pytest.mark.parametrize(
    "raw",
    [
        LONE_SURROGATE_TEXT,
        LONE_SURROGATE_BYTES,
        r'{"type":"yeaft_session_chat","clientMessageId":"\udc00","text":"x"}',
    ],
)
def test_an_id_utf8_cannot_encode_is_not_echoed(raw: str | bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame(raw)
    assert caught.value.code is ErrorCode.BAD_JSON
    assert caught.value.request_id is None
    text = dumps(caught.value.to_error_frame())
    assert "requestId" not in json.loads(text.encode("utf-8"))


def test_an_id_that_can_be_encoded_is_still_echoed() -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame('{"type":"create_group","requestId":"r-é1","name":5}')
    assert caught.value.request_id == "r-é1"


def test_dumps_replaces_lone_surrogates_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    frame = ErrorFrame(
        code=ErrorCode.INVALID_FRAME,
        message="bad \udc80 text",
        request_id="\ud800",
        detail={"key\ud801": ["\udfff", 1.5, None, True], "ok": "😀"},
    )
    with caplog.at_level(logging.WARNING, logger="protocol.codec"):
        text = dumps(frame)
    back = parse_server_frame(text.encode("utf-8"))  # encodes, and parses back
    assert isinstance(back, ErrorFrame)
    assert back.message == "bad \ufffd text" and back.request_id == "\ufffd"
    assert back.detail is not None
    # pydantic itself replaces a bad key (with one U+FFFD per byte); values are ours.
    (key, value), ok = sorted(back.detail.items())
    assert key.startswith("key\ufffd") and value == ["\ufffd", 1.5, None, True]
    assert ok == ("ok", "😀")
    assert [r.getMessage() for r in caplog.records] == [
        "a ErrorFrame held text UTF-8 cannot encode (a lone surrogate); sent with U+FFFD instead"
    ]


def test_dumps_leaves_good_text_alone_and_other_errors_raised() -> None:
    assert dumps(ErrorFrame(code=ErrorCode.GAP, message="é 😀")) == (
        '{"type":"error","code":"gap","message":"é 😀"}'
    )
    with pytest.raises(PydanticSerializationError):
        dumps(ErrorFrame(code=ErrorCode.INTERNAL, message="x", detail={"x": object()}))
