"""Bad input over a real WebSocket: typed errors, limits, abuse and idle closes, fuzzing.

None of this depends on the store backend, so it runs on the embedded store.
The fuzz test runs hypothesis (which is synchronous) in a worker thread and
hands each batch of frames to the test's event loop, where the server and
the client connection live.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import (
    ProtocolError,
    SendMessage,
    YeaftSessionChat,
    parse_client_frame,
    parse_server_frame,
)
from tests.fixtures.gateway import Gateway, StartGateway, WsClient

pytestmark = pytest.mark.parametrize("store_factory", ["embedded"], indirect=True)


def _error(frame: dict[str, Any], code: str) -> None:
    assert frame["type"] == "error" and frame["code"] == code, frame


async def test_protocol_errors_are_typed_and_the_connection_stays_open(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    ws = await WsClient.open(gw, "ann")
    _error(await ws.request("{not json"), "bad_json")
    _error(await ws.request("[1, 2]"), "invalid_frame")
    unknown = await ws.request({"type": "teleport"})
    _error(unknown, "unknown_type")
    assert unknown["field"] == "type"
    missing = await ws.request({"type": "subscribe"})
    _error(missing, "invalid_frame")
    assert missing["field"] == "groupId"
    extra = await ws.request({"type": "ping", "grupId": "x"})
    assert extra["field"] == "grupId"
    wrong = await ws.request({"type": "yeaft_session_chat", "groupId": 5, "text": "hi"})
    assert wrong["field"] == "groupId"
    binary = await ws.request(b"\xff\xfe\x00garbage")
    _error(binary, "bad_json")
    # The seed's chat mode about a conversation that does not exist: not_found.
    nowhere = await ws.request({"type": "send_message", "conversationId": "c1", "text": "hello"})
    _error(nowhere, "not_found")
    cancel = await ws.request({"type": "cancel_execution", "conversationId": "c1"})
    _error(cancel, "not_found")
    neither = await ws.request({"type": "cancel_execution", "vpId": "linus"})
    _error(neither, "invalid_frame")
    assert neither["field"] == "groupId"
    # A valid frame about a group that does not exist: not_found, request id echoed.
    chat = await ws.request(
        {"type": "unify_group_chat", "groupId": "grp_nope", "text": "hi", "clientMessageId": "m1"}
    )
    _error(chat, "not_found")
    assert chat["requestId"] == "m1"
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    for frame in ws.received:
        parse_server_frame(json.dumps(frame))  # every reply is a valid server frame
    await ws.close()


async def test_an_id_utf8_cannot_encode_gets_an_error_and_the_connection_stays_open(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway()
    await gw.user("ann")
    ws = await WsClient.open(gw, "ann")
    # The escape as JSON text, and the same character as raw bytes in a binary
    # frame: both decode to a lone surrogate, which must not be echoed.
    for raw in (
        r'{"type":"ping","requestId":"\ud800"}',
        b'{"type":"ping","requestId":"\xed\xa0\x80"}',
    ):
        reply = await ws.request(raw)
        _error(reply, "bad_json")
        assert "requestId" not in reply
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    assert ws.conn.close_code is None
    await ws.close()


async def test_a_text_frame_that_is_not_utf8_closes_with_1007_without_a_traceback(
    start_gateway: StartGateway, caplog: pytest.LogCaptureFixture
) -> None:
    gw = await start_gateway(log_level="info")
    await gw.user("ann")
    # uvicorn's loggers do not propagate to the root logger caplog watches.
    uvicorn_log = logging.getLogger("uvicorn.error")
    uvicorn_log.addHandler(caplog.handler)
    try:
        ws = await WsClient.open(gw, "ann")
        await ws.conn.send(b'{"type":"ping","x":"\xff"}', text=True)
        assert await ws.closed_with() == 1007
        other = await WsClient.open(gw, "ann")
        assert (await other.request({"type": "ping"}))["type"] == "pong"
        await other.close()
    finally:
        uvicorn_log.removeHandler(caplog.handler)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.WARNING]
    closed = [r for r in caplog.records if "1007" in r.getMessage()]
    assert [(r.name, r.levelno) for r in closed] == [("uvicorn.error", logging.INFO)]


async def test_oversized_frames_get_frame_too_large(start_gateway: StartGateway) -> None:
    gw = await start_gateway(frame_max_bytes=4096)
    await gw.user("ann")
    ws = await WsClient.open(gw, "ann")
    big = {"type": "yeaft_session_chat", "groupId": "g", "text": "x" * 5000}
    too_large = await ws.request(big)
    _error(too_large, "frame_too_large")
    assert too_large["detail"] == {"limit": 4096}
    # Multi-byte text is measured in bytes, not characters.
    _error(await ws.request({**big, "text": "é" * 2100}), "frame_too_large")
    assert (await ws.request({"type": "ping"}))["type"] == "pong"
    await ws.close()
    # Above the WebSocket layer's hard cap the socket itself is closed (1009).
    ws = await WsClient.open(gw, "ann")
    await ws.send("x" * (gw.settings.ws_max_message_bytes + 1))
    assert await ws.closed_with() == 1009


async def test_rate_limit_drops_frames_with_an_error(start_gateway: StartGateway) -> None:
    gw = await start_gateway(rate_limit_per_s=1, rate_limit_burst=5)
    await gw.user("ann")
    ws = await WsClient.open(gw, "ann")
    for _ in range(12):
        await ws.send({"type": "ping"})
    replies = [await ws.next() for _ in range(12)]
    kinds = [r["type"] for r in replies]
    assert kinds[:5] == ["pong"] * 5 and kinds.count("pong") in (5, 6)
    limited = [r for r in replies if r["type"] == "error"]
    assert limited and all(r["code"] == "rate_limited" for r in limited)
    assert limited[0]["detail"]["retryAfterMs"] > 0
    assert ws.conn.close_code is None  # still open
    await ws.close()


async def test_error_floods_close_with_the_abuse_code(start_gateway: StartGateway) -> None:
    gw = await start_gateway(abuse_max_errors=20)
    await gw.user("ann")
    ws = await WsClient.open(gw, "ann")
    for _ in range(25):
        await ws.send(b"\x00\x01binary garbage")
    assert await ws.closed_with() == 4429
    errors = [f for f in ws.received if f["type"] == "error"]
    assert len(errors) == 21  # the 21st error is the one over the limit


async def test_silent_clients_are_closed_and_pinging_ones_are_not(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway(idle_timeout=2.0)
    await gw.user("ann")
    silent = await WsClient.open(gw, "ann")
    talkative = await WsClient.open(gw, "ann")
    started = time.monotonic()
    for _ in range(10):  # 3 s of pings every 0.3 s keeps it open
        assert (await talkative.request({"type": "ping"}))["type"] == "pong"
        await asyncio.sleep(0.3)
    assert await silent.closed_with() == 4408
    assert time.monotonic() - started >= 2.0
    assert (await talkative.request({"type": "ping"}))["type"] == "pong"
    await talkative.close()


# -- fuzzing -----------------------------------------------------------------
GROUP = "grp_fuzz_not_yours"
TEMPLATES: list[dict[str, Any]] = [
    {"type": "yeaft_session_chat", "groupId": GROUP, "text": "hi @linus", "clientMessageId": "c1"},
    {"type": "unify_group_chat", "groupId": GROUP, "text": "hi", "mentions": ["linus"]},
    {"type": "subscribe", "groupId": GROUP, "lastSeq": 3, "vpIds": ["linus"]},
    {"type": "unsubscribe", "groupId": GROUP},
    {"type": "cancel_execution", "groupId": GROUP, "vpId": "linus"},
    {"type": "ask_user_answer", "requestId": "ask_1", "answer": "red", "groupId": GROUP},
    {"type": "create_group", "name": "g", "roster": ["nobody_at_all"], "requestId": "r1"},
    {"type": "rename_group", "groupId": GROUP, "name": "n"},
    {"type": "delete_group", "groupId": GROUP},
    {"type": "add_vp", "groupId": GROUP, "vpId": "linus"},
    {"type": "remove_vp", "groupId": GROUP, "vpId": "linus"},
    {"type": "set_default_vp", "groupId": GROUP, "vpId": None},
    {"type": "send_message", "conversationId": "c", "text": "x"},
    {"type": "list_groups"},
    {"type": "ping"},
]

# A small alphabet keeps generation cheap while still covering quotes,
# escapes, control characters, non-ASCII and astral-plane text.
chars = st.sampled_from(list('ab{}[]":,\\\n\x00 é中😀-_0'))
short_text = st.text(chars, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | short_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_text, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    frame = dict(draw(st.sampled_from(TEMPLATES)))
    keys = sorted(frame)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["drop", "add", "retype", "type", "drop", "huge"]))
        key = draw(st.sampled_from(keys))
        if kind == "drop":
            frame.pop(key, None)
        elif kind == "add":
            frame[draw(st.text(chars, min_size=1, max_size=10))] = draw(json_values)
        elif kind == "retype":
            frame[key] = draw(json_values)
        elif kind == "type":
            frame["type"] = draw(st.sampled_from([t["type"] for t in TEMPLATES]) | short_text)
        else:
            frame[key] = "x" * draw(st.integers(100_000, 300_000))
    return json.dumps(frame)


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


frames = st.one_of(
    mutated(),
    json_values.map(json.dumps),
    st.binary(max_size=48),
    st.text(chars, max_size=48),
    st.integers(150, 5000).map(deep),
    st.integers(150, 5000).map(lambda d: '{"type":"ping","x":' + deep(d) + "}"),
    st.sampled_from(TEMPLATES).map(lambda t: json.dumps({**t, "groupId": 7})),
)

SENTINEL = '{"type":"ping","fuzzSentinel":true}'
BATCH = 25  # generated frames per example; each goes out in VARIANTS forms
EXAMPLES = 105
VARIANTS = 4


def _is_sentinel(reply: dict[str, Any]) -> bool:
    return reply.get("type") == "error" and reply.get("field") == "fuzzSentinel"


def variants(raw: str | bytes) -> list[str | bytes]:
    """A generated frame as it is, cut short, with a quote inserted, and doubled.

    Deriving these mechanically multiplies the frames per hypothesis draw
    (drawing is what costs time) while shrinking still works on the draw.
    """
    cut = len(raw) // 3
    if isinstance(raw, str):
        return [raw, raw[: len(raw) // 2], raw[:cut] + '"' + raw[cut:], raw + raw]
    return [raw, raw[: len(raw) // 2], raw[:cut] + b'"' + raw[cut:], raw + raw]


def _expected(raw: str | bytes, limit: int) -> str | None:
    """The error code the server must answer with, or None for a valid frame."""
    try:
        parse_client_frame(raw, max_bytes=limit)
    except ProtocolError as exc:
        return exc.code.value
    return None


async def _exchange(
    ws: WsClient, raws: list[str | bytes], chats: list[bool]
) -> list[list[dict[str, Any]]]:
    """Send a batch and return the replies to each frame.

    Each frame is followed by a sentinel that has a reply of its own, so the
    replies before a sentinel's belong to one frame while a run of frames is
    pipelined. (A ping would not do: a fuzzed frame can be a valid ping.)
    A valid chat frame (``chats``) is handled off the receive loop, so its
    one reply may overtake or follow later frames' replies: it is sent on
    its own, once the replies before it are in, and its reply awaited.
    """
    replies: list[list[dict[str, Any]]] = []
    start = 0
    for end in range(len(raws) + 1):
        if end < len(raws) and not chats[end]:
            continue
        replies += await _pipelined(ws, raws[start:end])
        if end < len(raws):
            await ws.conn.send(raws[end])
            replies.append([json.loads(await ws.conn.recv())])
        start = end + 1
    return replies


async def _pipelined(ws: WsClient, raws: list[str | bytes]) -> list[list[dict[str, Any]]]:
    for raw in raws:
        await ws.conn.send(raw)
        await ws.conn.send(SENTINEL)
    replies: list[list[dict[str, Any]]] = []
    for _ in raws:
        mine = []
        while not _is_sentinel(reply := json.loads(await ws.conn.recv())):
            mine.append(reply)
        replies.append(mine)
    return replies


def _is_chat(raw: str | bytes, limit: int) -> bool:
    """A frame the server answers off its read loop (as gateway.ws does both kinds)."""
    try:
        frame = parse_client_frame(raw, max_bytes=limit)
        return isinstance(frame, YeaftSessionChat | SendMessage)
    except ProtocolError:
        return False


def _fuzz(gw: Gateway, ws: WsClient, loop: asyncio.AbstractEventLoop) -> int:
    """Run hypothesis in this worker thread, the I/O on the server's loop.

    Hypothesis is synchronous, so it cannot run on the loop; keeping the
    client's I/O on the loop (rather than a second client thread) avoids two
    threads fighting over the GIL for every frame.
    """
    sent = 0
    limit = gw.settings.frame_max_bytes

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(frames, min_size=BATCH, max_size=BATCH))
    def batch(drawn: list[str | bytes]) -> None:
        nonlocal sent
        raws = [variant for raw in drawn for variant in variants(raw)]
        chats = [_is_chat(raw, limit) for raw in raws]
        pending = asyncio.run_coroutine_threadsafe(_exchange(ws, raws, chats), loop)
        expected = [_expected(raw, limit) for raw in raws]  # while the server works
        for raw, code, replies in zip(raws, expected, pending.result(60), strict=True):
            for reply in replies:
                parse_server_frame(json.dumps(reply))
            if code is not None:
                assert [r["code"] for r in replies] == [code], (raw[:200], replies)
            else:
                assert len(replies) <= 1, replies
                assert all(r.get("code") != "internal" for r in replies), replies
        sent += len(raws)

    batch()
    return sent


async def test_ten_thousand_random_and_mutated_frames_get_typed_errors(
    start_gateway: StartGateway,
) -> None:
    gw = await start_gateway(
        rate_limit_per_s=1e9,
        rate_limit_burst=10**9,
        user_rate_limit_per_s=1e9,
        user_rate_limit_burst=10**9,
        abuse_max_errors=10**9,
        idle_timeout=600,
    )
    await gw.user("ann")
    await gw.user("bob")
    bobs = await gw.http.post(
        "/api/groups", json={"name": "bob's", "roster": []}, headers=gw.auth("bob")
    )
    TEMPLATES.append({"type": "subscribe", "groupId": bobs.json()["id"]})
    ws = await WsClient.open(gw, "ann", max_size=None)
    try:
        sent = await asyncio.to_thread(_fuzz, gw, ws, asyncio.get_running_loop())
    finally:
        TEMPLATES.pop()
    assert sent >= 10_000
    # The same connection still answers a valid frame, and the server is up.
    assert (await ws.request({"type": "list_groups"}))["type"] == "group_update"
    assert (await gw.http.get("/healthz")).json() == {"status": "ok"}
    await ws.close()
