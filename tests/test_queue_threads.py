"""Queue modes meet threads: a busy VP's turn takes in only messages of its own place.

A message in a thread never steers into, or joins the batch of, a turn on
the main timeline (nor the other way round): it waits for the lane and is
answered in its thread, with the thread's context (``actors.threads``).
"""

from __future__ import annotations

from actors.turns import QueuePolicy, TurnOrigin, TurnRequest
from protocol import QueueMode
from store.base import GroupMessage
from store.threads import THREAD_KEY
from tests.test_queue_modes import STEER, Fixture, said
from tests.test_queue_modes import fx as fx

COLLECT = QueuePolicy(QueueMode.COLLECT, debounce_s=0.05)


async def _in_thread(fx: Fixture, root: str, text: str, policy: QueuePolicy) -> TurnRequest:
    msg, _ = await fx.store.append_message(
        fx.group, GroupMessage(author="bob", role="user", text=text, meta={THREAD_KEY: root})
    )
    origin = TurnOrigin(trigger_id=msg.id, chain_id=msg.id, user_id="bob", thread_id=root)
    turn_id = TurnRequest.new_turn_id("steve")
    return TurnRequest(fx.group, "steve", turn_id, origin, queue=policy)


async def test_a_thread_message_does_not_steer_into_a_main_turn(fx: Fixture) -> None:
    root = await fx.say("the root", None)
    main = fx.run(await fx.say("please hold", STEER))
    await fx.in_tool.wait()
    side = await _in_thread(fx, root.origin.trigger_id, "a side question", STEER)
    side_turn = fx.run(side)
    fx.release_tool.set()
    done_main, done_side = await main, await side_turn
    # The main turn never saw the side question; the side turn answered it itself.
    assert all("side question" not in text for r in fx.model.requests[:2] for text in said(r))
    assert not done_side.skipped and done_side.text == "answering: [bob] a side question"
    assert "side question" not in done_main.text
    # In the thread, steve saw the root and the question, nothing else of the group.
    assert said(fx.model.requests[-1]) == ["[ann] the root", "[bob] a side question"]


async def test_a_thread_message_does_not_join_a_main_batch(fx: Fixture) -> None:
    root = await fx.say("the root", None)
    first = fx.run(await fx.say("please hold", COLLECT))
    await fx.in_tool.wait()
    waiting = fx.run(await fx.say("main one", COLLECT))
    side = fx.run(await _in_thread(fx, root.origin.trigger_id, "a side one", COLLECT))
    fx.release_tool.set()
    await first
    done_waiting, done_side = await waiting, await side
    assert not done_waiting.skipped and not done_side.skipped
    assert done_side.text == "answering: [bob] a side one"
    main_calls = [r for r in fx.model.requests if "[ann] main one" in said(r)]
    assert main_calls and all("[bob] a side one" not in said(r) for r in main_calls)
