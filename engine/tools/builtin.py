"""Built-in tools every engine carries: ``rethink``, ``finish`` and ``ask_user``."""

from __future__ import annotations

from pydantic import BaseModel, Field

from engine.tools.registry import Tool, ToolContext, ToolOutcome


class RethinkParams(BaseModel):
    reason: str = Field(description="Why another pass is needed.")


class FinishParams(BaseModel):
    summary: str = Field(description="A short summary of what was done.")


class AskUserParams(BaseModel):
    question: str = Field(min_length=1, description="The question for the user.")
    choices: list[str] | None = Field(
        default=None, description="Optional answers the user can pick from."
    )


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
        answer = await ctx.ask_user(params.question, params.choices)
    except TimeoutError:
        return ToolOutcome("the user did not answer before the question expired", is_error=True)
    return ToolOutcome(answer)


def builtin_tools() -> list[Tool]:
    return [
        Tool(
            "rethink",
            "Take another careful pass over the conversation before answering.",
            RethinkParams,
            _rethink,
        ),
        Tool(
            "finish",
            "Call when the task is complete; ends your turn.",
            FinishParams,
            _finish,
        ),
        Tool(
            "ask_user",
            "Ask the user a question and wait for the answer.",
            AskUserParams,
            _ask_user,
            timeout=660.0,
        ),
    ]
