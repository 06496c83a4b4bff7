"""Error classes decide what a failed model call does next, through the real SDKs.

Retryable failures (rate limit, overload, timeout, 5xx, a cut-off stream) are
retried and then fall back; authentication and billing fall back with a
visible notice; a malformed request and a content-policy refusal end the turn
with the provider's message, since any other model would refuse it too. A
refusal can come before the stream (an HTTP error) or inside it, as the stop
of a reply the provider cut off; both end the turn the same way.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from engine.engine import Engine
from engine.events import NoticeKind, StopEvent, StopReason
from engine.messages import Conversation, Message
from engine.turn_loop import TurnResult
from tests.engine_helpers import Recorder
from tests.fixtures.llm_server import FakeLLM
from tests.fixtures.llm_server import Reply as Wire
from tests.fixtures.sdk_engines import MakeEngine

VENDORS = ["openai", "anthropic"]
OTHER = {"openai": "anthropic", "anthropic": "openai"}
GUARD = 15.0


async def turn(engine: Engine, recorder: Recorder) -> TurnResult:
    conv = Conversation(id="c")
    run = engine.run_turn(conv, Message.user("hi"), system="Be brief.", emit=recorder)
    return await asyncio.wait_for(run, GUARD)


def notices(recorder: Recorder, kind: NoticeKind) -> list[Any]:
    return [n for n in recorder.of("notice") if n.kind is kind]


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    ("reply", "kind", "said"),
    [
        (
            Wire(status=400, error_message="messages.0.content: field required"),
            "format",
            "messages.0.content: field required",
        ),
        (
            Wire(
                status=400,
                error_message="Your request was rejected by our content policy",
                error_code="content_policy_violation",
            ),
            "content_policy",
            "rejected by our content policy",
        ),
    ],
    ids=["malformed", "content-policy"],
)
async def test_a_request_any_model_would_refuse_ends_the_turn_with_the_providers_message(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str, reply: Wire, kind: str, said: str
) -> None:
    fake_llm.push(reply)
    fake_llm.text("the backup must not be asked")
    recorder = Recorder()
    engine = sdk_engine(f"{vendor}:primary", [f"{OTHER[vendor]}:backup"], max_retries=2)

    result = await turn(engine, recorder)

    assert result.reason is StopReason.ERROR and result.error_kind == kind
    assert result.error is not None and said in result.error
    assert "All models failed" not in result.error
    assert len(fake_llm.requests) == 1  # neither retried nor failed over
    assert not notices(recorder, NoticeKind.FALLBACK)
    assert not notices(recorder, NoticeKind.RETRY)
    assert len(recorder.of("stop")) == 1 and isinstance(recorder.events[-1], StopEvent)


# Each vendor's content-policy stop inside a stream that otherwise ends well:
# OpenAI's ``finish_reason: "content_filter"`` (with the model's ``refusal``
# text), Anthropic's ``stop_reason: "refusal"`` (with ``stop_details``).
REFUSED = {
    "openai": ('finish_reason "content_filter"', "I can't continue with that."),
    "anthropic": (
        'stop_reason "refusal" (category cyber)',
        "This request was declined because it could enable cyber harm.",
    ),
}


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_reply_the_content_policy_stops_mid_stream_ends_the_turn_as_a_refusal(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    stop, explanation = REFUSED[vendor]
    fake_llm.push(
        Wire(
            text="Here is how to begin: first",
            chunks=3,
            stop="content_policy",
            refusal=explanation,
            refusal_category="cyber",
            output_tokens=7,
        )
    )
    fake_llm.text("the backup must not be asked")
    recorder = Recorder()
    engine = sdk_engine(f"{vendor}:primary", [f"{OTHER[vendor]}:backup"], max_retries=2)

    result = await turn(engine, recorder)

    assert result.reason is StopReason.ERROR and result.error_kind == "content_policy"
    assert result.error is not None
    assert result.error.startswith(f"{vendor} refused the content: it stopped primary's reply")
    assert f"({stop}: {explanation})" in result.error
    assert "cut off after 27 characters" in result.error
    # What was streamed before the refusal stays the turn's text, and the call is counted.
    assert result.text == "Here is how to begin: first"
    assert result.usage.output_tokens == 7 and result.model == f"{vendor}:primary"
    # Neither retried nor failed over: the backup model was never called.
    assert len(fake_llm.requests) == 1 and fake_llm.pending == 1
    assert not notices(recorder, NoticeKind.FALLBACK)
    assert not notices(recorder, NoticeKind.RETRY)
    (stop_event,) = recorder.of("stop")
    assert stop_event is recorder.events[-1]
    assert stop_event.reason is StopReason.ERROR and stop_event.error_kind == "content_policy"
    assert stop_event.error == result.error and stop_event.text == result.text


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_refused_reply_stays_out_of_the_transcript_the_model_is_sent_next(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    fake_llm.push(Wire(text="partial words", stop="content_policy"))
    fake_llm.text("a fresh answer")
    engine = sdk_engine(f"{vendor}:primary")
    conv = Conversation(id="c")

    first = await engine.run_turn(conv, Message.user("hi"), system="Be brief.", emit=Recorder())
    second = await engine.run_turn(conv, Message.user("again"), system="Be brief.", emit=Recorder())

    assert first.error_kind == "content_policy" and second.text == "a fresh answer"
    sent = json.dumps(fake_llm.last_request.body)
    assert "partial words" not in sent and "again" in sent


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Wire(status=401, error_code="invalid_api_key"), "auth"),
        (Wire(status=400, error_message="Your credit balance is too low"), "billing"),
    ],
    ids=["auth", "billing"],
)
async def test_auth_and_billing_fall_back_with_a_visible_notice(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str, reply: Wire, kind: str
) -> None:
    fake_llm.push(reply)
    fake_llm.text("from the backup")
    backup = f"{OTHER[vendor]}:backup"
    recorder = Recorder()

    result = await turn(sdk_engine(f"{vendor}:primary", [backup], max_retries=2), recorder)

    assert result.reason is StopReason.END_TURN and result.text == "from the backup"
    (fallback,) = notices(recorder, NoticeKind.FALLBACK)
    assert fallback.detail["reason"] == kind and fallback.detail["to"] == backup
    assert not notices(recorder, NoticeKind.RETRY)  # not retried on the same model
    assert len(fake_llm.requests) == 2


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_stream_cut_off_mid_reply_is_retried_and_reported_as_cut(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str
) -> None:
    fake_llm.push(Wire(text="half an ans", truncate=True))
    fake_llm.push(Wire(text="half again", truncate=True))
    fake_llm.text("from the backup")
    backup = f"{OTHER[vendor]}:backup"
    recorder = Recorder()

    result = await turn(sdk_engine(f"{vendor}:primary", [backup], max_retries=1), recorder)

    assert result.text == "from the backup"
    assert [a["reason"] for a in result.attempts] == ["stream_cut", "stream_cut"]
    assert all("cut off" in a["message"] for a in result.attempts)
    (retry,) = notices(recorder, NoticeKind.RETRY)
    assert retry.detail["reason"] == "stream_cut"
    assert notices(recorder, NoticeKind.FALLBACK)[0].detail["reason"] == "stream_cut"


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    "reply",
    # A rate limit cools the credential down first (engine.credentials).
    [Wire(status=529), Wire(status=500), Wire(status=504)],
    ids=["overload", "5xx", "timeout"],
)
async def test_retryable_errors_retry_then_fall_back(
    fake_llm: FakeLLM, sdk_engine: MakeEngine, vendor: str, reply: Wire
) -> None:
    fake_llm.push(reply)
    fake_llm.push(reply)
    fake_llm.text("from the backup")
    backup = f"{OTHER[vendor]}:backup"
    recorder = Recorder()

    result = await turn(sdk_engine(f"{vendor}:primary", [backup], max_retries=1), recorder)

    assert result.reason is StopReason.END_TURN and result.text == "from the backup"
    assert len(notices(recorder, NoticeKind.RETRY)) == 1
    assert len(notices(recorder, NoticeKind.FALLBACK)) == 1
    assert len(fake_llm.requests) == 3
