"""Questions a VP asks people (``ask_user_question``) and the answers it awaits.

A question goes out as a frame in the group's event log and waits for the
matching ``ask_user_answer``. Its id names the VP that asked (see
``actors.turns.new_question_id``), so the coordinator hands the answer
straight to that VP.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from actors.turns import new_question_id
from actors.writer import TurnWriter
from engine.tools.approval import ApprovalRequest, AskApproval
from engine.tools.registry import AskUser
from protocol import ToolApproval


class QuestionBox:
    """The open questions of one VP actor, by request id."""

    def __init__(self, vp_id: str, timeout_s: float, clock: Callable[[], float] = time.time):
        self.vp_id = vp_id
        self.timeout_s = timeout_s
        self._clock = clock
        self._open: dict[str, asyncio.Future[str]] = {}
        # The group (or conversation) each open question was asked in, so an
        # answer that names only the question can be checked and routed.
        self._groups: dict[str, str] = {}

    def asker(self, writer: TurnWriter) -> AskUser:
        """The ``ask_user`` callback of one turn: asks through that turn's writer."""

        async def ask(question: str, choices: list[str] | None) -> str:
            return await self._ask(writer, question, choices, self.timeout_s)

        return ask

    def approval_asker(self, writer: TurnWriter, timeout_s: float) -> AskApproval:
        """The approval gate's callback of one turn: the question names the tool call."""

        async def ask(request: ApprovalRequest, prompt: str, choices: list[str]) -> str:
            tool = ToolApproval(name=request.tool, arguments=request.arguments)
            return await self._ask(writer, prompt, choices, timeout_s, tool)

        return ask

    async def _ask(
        self,
        writer: TurnWriter,
        question: str,
        choices: list[str] | None,
        timeout_s: float,
        tool: ToolApproval | None = None,
    ) -> str:
        request_id = new_question_id(self.vp_id)
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._open[request_id] = fut
        self._groups[request_id] = writer.events.group_id
        try:
            await writer.events.question(
                writer.vp_id,
                writer.turn_id,
                request_id,
                question,
                choices,
                self._clock() + timeout_s,
                tool,
            )
            async with asyncio.timeout(timeout_s):
                return await fut
        except TimeoutError:
            await writer.system("the question expired before anyone answered", requestId=request_id)
            raise
        finally:
            self._open.pop(request_id, None)
            self._groups.pop(request_id, None)

    def group_of(self, request_id: str) -> str | None:
        """The group an open question was asked in; None when it is not open."""
        return self._groups.get(request_id)

    def answer(self, request_id: str, answer: str, group_id: str | None = None) -> bool:
        """Deliver an answer; False when the question is unknown, answered or expired.

        With ``group_id``, also False when the question was asked in another group.
        """
        fut = self._open.get(request_id)
        if fut is None or fut.done():
            return False
        if group_id is not None and self._groups.get(request_id) != group_id:
            return False
        fut.set_result(answer)
        return True
