"""Which messages take team mode's path, and how team mode reaches a model.

A person's message goes to the intent router when the group has team mode
on and the message names no VP (``@mentions`` still win for plain chat) and
carries no queue prefix (``/steer`` and the like are chat), or when it
starts with ``/task``: then it is a task whether team mode is on or not.

Team mode's model calls (router, planner, skills, learning) are made by one
VP actor of the group, its default VP: its engine, model chain, retries and
keys, charged to the group's budgets like its turns (``actors.completion``).
A failure reaches the caller as :class:`~team.calls.CallFailed` with a short
reason, never the remote traceback, since the reason may end up on a task
card that every member sees.
"""

from __future__ import annotations

import re

from ray.exceptions import RayError

from actors.completion import BudgetRefused
from actors.vp_commands import Complete
from coordinator.dispatch import Dispatcher
from engine.errors import ErrorKind, ModelError
from protocol import split_queue_prefix
from store.base import Group
from store.conversation import GroupKind
from team.calls import CallFailed, ModelCall

# "/task" then anything that is not a letter, digit or underscore (a space, a
# colon, full-width punctuation, or Chinese text right after it).
_TASK_PREFIX = re.compile(r"^\s*/task(?![A-Za-z0-9_])[\s:：,，]*", re.IGNORECASE)


def task_request(text: str) -> tuple[bool, str]:
    """Whether ``text`` forces a task (``/task``), and the text without the prefix."""
    match = _TASK_PREFIX.match(text)
    if match is None:
        return False, text
    return True, text[match.end() :].strip()


def takes_task_path(group: Group, text: str, names: list[str]) -> bool:
    """Whether a person's message goes to the router rather than straight to its VPs."""
    if group.kind is GroupKind.CONVERSATION or not group.roster:
        return False
    forced, _ = task_request(text)
    if forced:
        return True
    mode, _ = split_queue_prefix(text)
    return group.settings.team_mode and not names and mode is None


class VPComplete:
    """Team mode's model calls for one message chain, made by one VP actor of the group."""

    def __init__(
        self, turns: Dispatcher, group: Group, chain_id: str, user_id: str | None = None
    ) -> None:
        self.turns = turns
        self.group_id = group.id
        self.chain_id = chain_id
        # The person whose message the calls serve: their quota pays (None: nobody's).
        self.user_id = user_id
        self.vp_id = group.default_vp or group.roster[0]
        self.model = group.settings.model or None

    async def __call__(self, call: ModelCall) -> str:
        vp = await self.turns.vp(self.vp_id)
        try:
            text = await vp.send(
                Complete(call, self.model, self.group_id, self.chain_id, self.user_id)
            )
        except RayError as exc:
            if _timed_out(exc):
                # The caller retries a timeout; any other failure falls back.
                raise TimeoutError(f"@{self.vp_id}'s model call timed out") from None
            raise CallFailed(self._reason(exc)) from None
        return text

    def _reason(self, exc: RayError) -> str:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BudgetRefused):
            return str(cause)
        if isinstance(cause, ModelError):
            return f"@{self.vp_id}'s model failed ({cause.kind.value})"
        return f"@{self.vp_id} could not make the call ({type(exc).__name__})"


def _timed_out(exc: RayError) -> bool:
    """Whether the remote call failed by running out of time (its own bound or the model's)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, ModelError):
        return cause.kind is ErrorKind.TIMEOUT
    return isinstance(cause, TimeoutError)
