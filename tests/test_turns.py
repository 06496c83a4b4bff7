"""Turn records without Ray: states, origins, the writer's held text and result."""

from __future__ import annotations

import pytest

from actors.turns import IllegalTransition, TurnOrigin, TurnState, TurnTracker


def test_a_turn_walks_its_states_and_finishes_once() -> None:
    tracker = TurnTracker("t1")
    for state in (TurnState.STARTED, TurnState.RUNNING, TurnState.STORED, TurnState.FINISHED):
        tracker.advance(state)
    assert tracker.finished
    with pytest.raises(IllegalTransition):
        tracker.advance(TurnState.FINISHED)


@pytest.mark.parametrize("state", [TurnState.QUEUED, TurnState.STARTED, TurnState.RUNNING])
def test_a_turn_can_end_early_from_any_step_before_its_reply(state: TurnState) -> None:
    tracker = TurnTracker("t1", state)
    tracker.advance(TurnState.FINISHED)
    assert tracker.finished


def test_steps_cannot_be_skipped_or_repeated() -> None:
    tracker = TurnTracker("t1")
    with pytest.raises(IllegalTransition):
        tracker.advance(TurnState.RUNNING)  # never acknowledged
    tracker.advance(TurnState.STARTED)
    with pytest.raises(IllegalTransition):
        tracker.advance(TurnState.STARTED)
    with pytest.raises(IllegalTransition):
        tracker.advance(TurnState.STORED)  # the engine never ran


def test_the_next_hop_keeps_the_chain_and_the_person() -> None:
    first = TurnOrigin(trigger_id="m1", chain_id="m1", user_id="ann")
    second = first.next_hop("m2").next_hop("m3")
    assert second == TurnOrigin(
        trigger_id="m3", chain_id="m1", caused_by=("m1", "m2"), user_id="ann"
    )
    assert (first.depth, second.depth) == (0, 2)
