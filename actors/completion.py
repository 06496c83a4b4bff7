"""A VP's one-off model call for team mode: budgeted, counted, without tools.

The router, the planner, skill selection and learning each make one call
through the group's default VP (``coordinator.team.calls``). The call runs
on that VP's engine (its model chain, retries, keys) beside its turns, never
in a group's lane, and is charged like a turn: it reserves on the group's
accounts, the account of the message chain it serves and the quota of the
person whose message that is, is refused with :class:`BudgetRefused` when
one is spent, settles what it used, and adds that to the group's usage
totals and usage records.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid

from actors.budget import TurnBudget
from engine.call_context import CallContext, CallMode, Speaker
from engine.caller import CallSpec
from engine.engine import Engine
from engine.messages import Message, Usage
from personas.model import Persona
from store.base import Store, StoreError
from store.budgets import day_account
from store.chatviews import TurnUsage
from store.quotas import NO_PERSON, UsageKey
from team.calls import ModelCall

log = logging.getLogger(__name__)


class BudgetRefused(RuntimeError):
    """The group's budget has no room for the call; the message names the budget."""


async def complete_call(
    engine: Engine,
    persona: Persona,
    store: Store,
    call: ModelCall,
    *,
    model: str | None,
    group_id: str,
    chain_id: str,
    user_id: str | None = None,
) -> str:
    """The model's text for ``call``; raises the engine's error, :class:`BudgetRefused`,
    or ``TimeoutError`` past ``call.timeout_s``."""
    budget = TurnBudget(store, group_id, f"call_{uuid.uuid4().hex[:12]}:{persona.id}", user_id)
    group = await store.get_group(group_id)
    if group is not None:
        refused = await budget.reserve(group.settings, chain_id)
        if refused is not None:
            raise BudgetRefused(refused)
    context = CallContext(
        speaker=Speaker.of(persona),
        mode=CallMode.TASK,
        purpose=str(call.purpose),
        language="zh" if call.language == "zh" else "en",
    )
    spec = CallSpec(call.system, [Message.user(call.prompt)], [], call.max_tokens, context)
    usage, cost, answered_by = Usage(), 0.0, model or engine.model
    try:
        # Bounded here, not only by the caller's wait: a call the caller gave
        # up on must not go on (and be charged) after it.
        async with asyncio.timeout(call.timeout_s):
            result = await engine.caller(model).call(spec, None, _ignore)
        usage, cost = result.usage, engine.prices.cost(result.model, result.usage)
        answered_by = result.model
        return result.text
    finally:
        cost = cost if math.isfinite(cost) else 0.0
        await budget.settle(usage, cost)
        if usage.input_tokens or usage.output_tokens:
            row = UsageKey(
                day_account().removeprefix("day:"), user_id or NO_PERSON, persona.id, answered_by
            )
            counted = TurnUsage(
                budget.turn_id, usage.input_tokens, usage.output_tokens, cost, row=row
            )
            try:
                await store.add_usage(group_id, counted)
            except StoreError as exc:
                log.warning("usage of %s not counted: %s", budget.turn_id, exc)


def _ignore(_text: str) -> None:
    """A call's streamed text is not shown anywhere: only its whole answer is used."""
