"""Built-in tools every engine carries: ``rethink``, ``finish`` and ``ask_user``."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.tools.registry import CONVERSATION_MODES, Tool, ToolContext, ToolOutcome
from protocol.common import MAX_CHOICES


class RethinkParams(BaseModel):
    reason: str = Field(description="Why another pass is needed.")


class FinishParams(BaseModel):
    summary: str = Field(description="A short summary of what was done.")


class AskUserParams(BaseModel):
    # The two switches keep the wire protocol's names (``multiSelect`` of
    # ``ask_user_question``); Python code uses the snake_case ones.
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)

    question: str = Field(min_length=1, description="The question for the user.")
    choices: list[str] | None = Field(
        default=None,
        max_length=MAX_CHOICES,
        description="Answers the user picks from; without them the user writes an answer.",
    )
    multi_select: bool = Field(
        default=False,
        alias="multiSelect",
        description="The user may pick several of the choices; the answer is then a list.",
    )
    allow_other: bool = Field(
        default=False,
        alias="allowOther",
        description="The user may also answer in their own words instead of (or besides) "
        "the choices.",
    )

    @model_validator(mode="after")
    def _choices_for_multi_select(self) -> AskUserParams:
        if self.multi_select and not self.choices:
            raise ValueError("multiSelect needs choices to pick from")
        return self


async def _rethink(params: RethinkParams, ctx: ToolContext) -> str:
    # The tool has no side effect: its result invites the model to take the
    # conversation so far as input for another, more careful pass.
    return (
        "Reconsider the conversation above before answering. "
        f"Your reason: {params.reason}. Check assumptions, look for what is "
        "missing or wrong, then continue."
    )


async def _finish(params: FinishParams, ctx: ToolContext) -> str:
    ctx.request_end_turn("finish", summary=params.summary)
    return "finished"


async def _ask_user(params: AskUserParams, ctx: ToolContext) -> ToolOutcome:
    if ctx.ask_user is None:
        return ToolOutcome("no user can be asked in this context", is_error=True)
    try:
        answer = await ctx.ask_user(
            params.question,
            params.choices,
            multi_select=params.multi_select,
            allow_other=params.allow_other,
        )
    except TimeoutError:
        return ToolOutcome("the user did not answer before the question expired", is_error=True)
    if isinstance(answer, str):
        return ToolOutcome(answer)
    # Several choices go back as a JSON list, so a choice with a comma stays one.
    return ToolOutcome(json.dumps(answer, ensure_ascii=False))


def builtin_tools() -> list[Tool]:
    return [
        Tool(
            "rethink",
            "Take another careful pass over the conversation before answering.",
            RethinkParams,
            _rethink,
            modes=CONVERSATION_MODES,
        ),
        Tool(
            "finish",
            "Call when the task is complete; ends your turn.",
            FinishParams,
            _finish,
            modes=CONVERSATION_MODES,
        ),
        Tool(
            "ask_user",
            "Ask the user a question and wait for the answer. With choices the user picks "
            "one (several with multiSelect, answered as a JSON list); allowOther also lets "
            "them write their own.",
            AskUserParams,
            _ask_user,
            modes=CONVERSATION_MODES,
            timeout=660.0,
        ),
    ]
