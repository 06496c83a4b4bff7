"""engine.bridge's result payloads: one for every stop reason, usable on their own."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from engine.bridge import RESULT_SUBTYPES, result_payload
from engine.events import NoticeEvent, NoticeKind, StopEvent, StopReason
from engine.messages import Usage
from protocol import dump, parse_data
from protocol.data import ResultSubtype


def stop(reason: StopReason = StopReason.END_TURN, **kw: Any) -> StopEvent:
    fields: dict[str, Any] = {"usage": Usage(), "cost_usd": 0.0, "duration_ms": 5}
    fields.update(kw)
    return StopEvent(reason=reason, **fields)


def test_every_stop_reason_has_a_subtype() -> None:
    # Fails when a StopReason member is added without a result subtype.
    assert [reason for reason in StopReason if reason not in RESULT_SUBTYPES] == []
    assert set(RESULT_SUBTYPES) == set(StopReason)
    assert set(RESULT_SUBTYPES.values()) <= set(get_args(ResultSubtype))


@pytest.mark.parametrize("reason", list(StopReason))
def test_every_stop_reason_gives_a_valid_result(reason: StopReason) -> None:
    payload = dump(result_payload(stop(reason), session_id="conv-1"))
    assert payload["subtype"] == RESULT_SUBTYPES[reason]
    assert payload["stop_reason"] == reason.value
    assert dump(parse_data(payload)) == payload


def test_events_turn_plain_strings_into_members() -> None:
    # Code above the engine may still build a stop from a string.
    assert stop("aborted").reason is StopReason.ABORTED  # type: ignore[arg-type]
    assert NoticeEvent("retry", "again").kind is NoticeKind.RETRY  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        stop("done")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        NoticeEvent("oops", "no such kind")  # type: ignore[arg-type]


def test_result_payload_is_usable_on_its_own() -> None:
    stopped = stop(StopReason.ERROR, error="x", error_kind="auth")
    data = dump(result_payload(stopped, session_id="s"))
    assert data["subtype"] == "error_during_execution"
    assert data["error_kind"] == "auth"
    assert "attempts" not in data
