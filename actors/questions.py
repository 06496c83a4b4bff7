"""Questions a VP asks people (``ask_user_question``) and the answers it awaits.

A question goes out as a frame in the group's event log and waits for the
matching ``ask_user_answer``. Its id names the VP that asked (see
``actors.turns.new_question_id``), so the coordinator hands the answer
straight to that VP.

The VP checks each answer against its question (:func:`check_answer`)
before the tool that asked sees it: with choices, the answer is one of them
(a list of them for a multi-select question) unless the question allows the
person's own words. A refused answer leaves the question open.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from actors.turns import new_question_id
from actors.vp_commands import AnswerReceipt, AnswerVerdict
from actors.writer import TurnWriter
from engine.tools.approval import ApprovalRequest, AskApproval
from engine.tools.registry import AskUser
from protocol import ToolApproval

Answer = str | list[str]


@dataclass(frozen=True, slots=True)
class Form:
    """How a question may be answered: its choices, and the two switches."""

    choices: tuple[str, ...] = ()
    multi_select: bool = False
    allow_other: bool = False


def check_answer(form: Form, answer: str | tuple[str, ...] | list[str]) -> AnswerReceipt:
    """Whether ``answer`` fits a question of ``form``; ``TAKEN`` when it does.

    Without choices any non-empty text is an answer. With choices, one of
    them, or several (a list) for a multi-select question; with
    ``allow_other`` the person's own words too. A choice matches whatever
    its case and surrounding spaces (``Deny`` is ``deny``).
    """
    picked = [answer] if isinstance(answer, str) else list(answer)
    choices = form.choices
    if len(picked) > 1 and not form.multi_select:
        return AnswerReceipt(
            AnswerVerdict.ONE_ONLY, "this question takes one answer, not a list", choices
        )
    if not picked or any(not item.strip() for item in picked):
        return AnswerReceipt(AnswerVerdict.EMPTY, "the answer is empty", choices)
    if not choices or form.allow_other:
        return AnswerReceipt(AnswerVerdict.TAKEN)
    strays = [item for item in picked if _choice(form, item) is None]
    if strays:
        how = "any of" if form.multi_select else "one of"
        return AnswerReceipt(
            AnswerVerdict.NOT_A_CHOICE,
            f"{strays[0]!r} is not a choice of this question; answer with {how}: "
            + ", ".join(choices),
            choices,
        )
    return AnswerReceipt(AnswerVerdict.TAKEN)


def _choice(form: Form, item: str) -> str | None:
    """The choice ``item`` names, in the choice's own spelling; None when it names none."""
    wanted = item.strip().casefold()
    return next((c for c in form.choices if c.strip().casefold() == wanted), None)


def _as_given(form: Form, answer: str | tuple[str, ...]) -> Answer:
    """A checked answer as the asking tool takes it: each choice in its own spelling,
    a list (repeats dropped) for a multi-select question, else one text."""
    picked = [answer] if isinstance(answer, str) else list(answer)
    named = [_choice(form, item) or item.strip() for item in picked]
    if form.multi_select:
        return list(dict.fromkeys(named))
    return named[0]


@dataclass(slots=True)
class _Open:
    """A question waiting for its answer."""

    group_id: str
    form: Form
    answered: asyncio.Future[Answer]


class QuestionBox:
    """The open questions of one VP actor, by request id."""

    def __init__(self, vp_id: str, timeout_s: float, clock: Callable[[], float] = time.time):
        self.vp_id = vp_id
        self.timeout_s = timeout_s
        self._clock = clock
        # Each open question with the group (or conversation) it was asked
        # in, so an answer that names only the question can be checked and routed.
        self._open: dict[str, _Open] = {}

    def asker(self, writer: TurnWriter) -> AskUser:
        """The ``ask_user`` callback of one turn: asks through that turn's writer."""

        async def ask(
            question: str,
            choices: list[str] | None,
            *,
            multi_select: bool = False,
            allow_other: bool = False,
        ) -> Answer:
            form = Form(tuple(choices or ()), multi_select, allow_other)
            return await self._ask(writer, question, form, self.timeout_s)

        return ask

    def approval_asker(self, writer: TurnWriter, timeout_s: float) -> AskApproval:
        """The approval gate's callback of one turn: the question names the tool call."""

        async def ask(request: ApprovalRequest, prompt: str, choices: list[str]) -> str:
            tool = ToolApproval(name=request.tool, arguments=request.arguments)
            answer = await self._ask(writer, prompt, Form(tuple(choices)), timeout_s, tool)
            # A single-select question is answered with one text (see _as_given).
            assert isinstance(answer, str)
            return answer

        return ask

    async def _ask(
        self,
        writer: TurnWriter,
        question: str,
        form: Form,
        timeout_s: float,
        tool: ToolApproval | None = None,
    ) -> Answer:
        request_id = new_question_id(self.vp_id)
        fut: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Open(writer.events.group_id, form, fut)
        try:
            await writer.events.question(
                writer.vp_id,
                writer.turn_id,
                request_id,
                question,
                list(form.choices) or None,
                self._clock() + timeout_s,
                tool,
                multi_select=form.multi_select,
                allow_other=form.allow_other,
            )
            async with asyncio.timeout(timeout_s):
                return await fut
        except TimeoutError:
            await writer.system("the question expired before anyone answered", requestId=request_id)
            raise
        finally:
            self._open.pop(request_id, None)

    def group_of(self, request_id: str) -> str | None:
        """The group an open question was asked in; None when it is not open."""
        waiting = self._open.get(request_id)
        return waiting.group_id if waiting is not None else None

    def answer(
        self, request_id: str, answer: str | tuple[str, ...], group_id: str | None = None
    ) -> AnswerReceipt:
        """Deliver an answer that fits its question (see :func:`check_answer`).

        ``NOT_OPEN`` when the question is unknown, answered or expired, or
        (with ``group_id``) was asked in another group; a refused answer
        leaves the question open for another.
        """
        waiting = self._open.get(request_id)
        if waiting is None or waiting.answered.done():
            return AnswerReceipt(AnswerVerdict.NOT_OPEN)
        if group_id is not None and waiting.group_id != group_id:
            return AnswerReceipt(AnswerVerdict.NOT_OPEN)
        receipt = check_answer(waiting.form, answer)
        if receipt:
            waiting.answered.set_result(_as_given(waiting.form, answer))
        return receipt
