"""Which turns belong to what a person's message started, beyond the ones it started itself.

The edges that stream a message's turns (AG-UI runs, A2A tasks) begin with
the turns the message dispatched, then follow what those turns start:

* A **team task** (``/task``, or a message without a mention in team mode)
  starts no turn of its own: the router opens a task, whose attempt names
  its runs (one turn each: the plan's nodes, the synthesis) in the
  ``task_changed`` cards it writes as it goes (:class:`TaskFollower`).
* A **hand-off** (:class:`ChainFollower`): a VP's reply that names other
  VPs says so in its ``result`` (``mentions``), and the coordinator's
  ``reply_routed`` frame then names the turns it started
  (``protocol.reply_routes``); a ``route_forward`` is a ``group_message``
  of the chain with ``handoff``, and the turn it starts names that message
  as its ``triggerId``.

A turn may write before the frame naming it is seen; its envelopes wait
here until it is (a bounded number).
"""

from __future__ import annotations

from typing import Any

# How many envelopes of not yet named turns are kept.
EARLY_LIMIT = 5000


class _Held:
    """Envelopes of turns nobody has named yet, kept until one is (bounded)."""

    def __init__(self) -> None:
        self._early: dict[str, list[dict[str, Any]]] = {}
        self._early_count = 0

    def hold(self, envelope: dict[str, Any]) -> None:
        """Keep an envelope of a turn not named yet (it may be one to follow)."""
        turn_id = envelope.get("turnId")
        if turn_id and self._early_count < EARLY_LIMIT:
            self._early.setdefault(str(turn_id), []).append(envelope)
            self._early_count += 1

    def early(self, turn_id: str) -> list[dict[str, Any]]:
        """What the turn wrote before it was named, in order (given once)."""
        return self._early.pop(turn_id, [])


class TaskFollower(_Held):
    """The task one message started: its cards, and its runs' turns as they are named."""

    def __init__(self, message_id: str) -> None:
        super().__init__()
        self.message_id = message_id
        # The task's cards (task id -> card), newest of each.
        self.tasks: dict[str, dict[str, Any]] = {}
        self._named: set[str] = set()

    @property
    def over(self) -> bool:
        """Whether a card of the message's attempt was seen and every attempt has finished."""
        return bool(self.tasks) and all(_attempt_over(t) for t in self.tasks.values())

    def card(self, envelope: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]] | None:
        """A ``task_changed`` of this message's attempt: the card and the runs it names first.

        None for a card of another message's task. Each new run is
        ``(vpId, turnId)``; :meth:`early` gives what its turn wrote before.
        """
        task = envelope.get("task")
        if not isinstance(task, dict):
            return None
        attempts = task.get("attempts") or []
        attempt = attempts[-1] if attempts else None
        if not isinstance(attempt, dict) or attempt.get("messageId") != self.message_id:
            return None
        self.tasks[str(task.get("id"))] = task
        new: list[tuple[str, str]] = []
        for run in attempt.get("runs") or []:
            turn_id, vp = run.get("turnId"), run.get("vp")
            if turn_id and vp and turn_id not in self._named:
                self._named.add(str(turn_id))
                new.append((str(vp), str(turn_id)))
        return task, new


class ChainFollower(_Held):
    """The hand-offs of one chain (the person's message ``chain_id`` started).

    Fed every envelope the run sees (:meth:`saw`), it names the turns that
    join the run: those a ``reply_routed`` of the chain started, and those
    a ``route_forward`` of the chain started (by their ``triggerId``).
    :attr:`settled` is False while a reply that names VPs waits for its
    ``reply_routed``, or a ``route_forward`` for its turn.
    """

    def __init__(self, chain_id: str) -> None:
        super().__init__()
        self.chain_id = chain_id
        # Replies whose result named VPs, until their reply_routed is seen, and
        # route_forward messages of the chain, until their turn is seen.
        self.awaiting: set[str] = set()
        # The chain's route_forward messages: their turns name them as triggerId.
        self._forwards: set[str] = set()

    @property
    def settled(self) -> bool:
        return not self.awaiting

    def saw(self, envelope: dict[str, Any], known: bool) -> list[tuple[str, str]]:
        """The turns this envelope makes part of the run, ``(vpId, turnId)``.

        ``known``: the envelope is of a turn the run follows already. An
        envelope of a turn not known yet is kept while a routing is awaited.
        """
        kind = envelope.get("type")
        if kind == "reply_routed":
            if envelope.get("chainId") != self.chain_id:
                return []
            self.awaiting.discard(str(envelope.get("messageId")))
            turns = envelope.get("turns") or {}
            return [(str(vp), str(turn)) for vp, turn in turns.items()]
        if kind == "group_message":
            if envelope.get("handoff") and envelope.get("chainId") == self.chain_id:
                # Stored once its turn was admitted: that turn is on its way.
                forward = str(envelope.get("messageId"))
                self._forwards.add(forward)
                self.awaiting.add(forward)
            return []
        if known:
            data = envelope.get("data") or {}
            if kind == "yeaft_output" and data.get("type") == "result":
                if data.get("mentions") and data.get("message_id"):
                    self.awaiting.add(str(data["message_id"]))
            return []
        turn_id, vp = envelope.get("turnId"), envelope.get("vpId")
        trigger = envelope.get("triggerId")
        if kind == "agent_status" and trigger in self._forwards and turn_id and vp:
            self.awaiting.discard(str(trigger))
            return [(str(vp), str(turn_id))]
        if self.awaiting:
            self.hold(envelope)
        return []


def _attempt_over(task: dict[str, Any]) -> bool:
    attempts = task.get("attempts") or []
    return bool(attempts) and attempts[-1].get("finishedAt") is not None
