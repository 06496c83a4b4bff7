"""Following a team task from a group's envelopes: which turns are its runs, when it is over.

A person's message that the team takes (``/task``, or any message in team
mode without a mention) starts no turn of its own: the router opens a task,
whose attempt names its runs (one turn each: the plan's nodes, the
synthesis) in the ``task_changed`` cards it writes as it goes. The edges
that stream a message's turns (AG-UI, A2A) follow those runs as the cards
name them. A run's turn may write before the card naming it is seen; its
envelopes wait here until it is (a bounded number).
"""

from __future__ import annotations

from typing import Any

# How many envelopes of not yet named turns are kept.
EARLY_LIMIT = 5000


class TaskFollower:
    """The task one message started: its cards, and its runs' turns as they are named."""

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        # The task's cards (task id -> card), newest of each.
        self.tasks: dict[str, dict[str, Any]] = {}
        self._named: set[str] = set()
        self._early: dict[str, list[dict[str, Any]]] = {}
        self._early_count = 0

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

    def hold(self, envelope: dict[str, Any]) -> None:
        """Keep an envelope of a turn no card has named yet (it may be a run's)."""
        turn_id = envelope.get("turnId")
        if turn_id and self._early_count < EARLY_LIMIT:
            self._early.setdefault(str(turn_id), []).append(envelope)
            self._early_count += 1

    def early(self, turn_id: str) -> list[dict[str, Any]]:
        """What the turn wrote before a card named it, in order (given once)."""
        return self._early.pop(turn_id, [])


def _attempt_over(task: dict[str, Any]) -> bool:
    attempts = task.get("attempts") or []
    return bool(attempts) and attempts[-1].get("finishedAt") is not None
