"""The agent engine: providers, a model chain, tools and limits, and the turn entry.

An :class:`Engine` holds what every turn of an agent shares: its settings,
the model and its fallbacks, the tools, prices and provider access.
:meth:`Engine.run_turn` runs one turn of a conversation through the query
loop of :mod:`engine.turn_loop`, which ends it with exactly one stop event.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from engine.access import ProviderAccess, ProviderState
from engine.call_context import CallContext
from engine.caller import Emit, ModelCaller, RetryPolicy
from engine.events import EngineEvent
from engine.messages import Conversation, Message
from engine.models import UnknownModel
from engine.pricing import PriceTable
from engine.providers.registry import ProviderRegistry
from engine.settings import EngineConfig
from engine.steer import SteerSource
from engine.tools.builtin import builtin_tools
from engine.tools.registry import ToolContext, ToolRegistry
from engine.turn_loop import TurnLoop, TurnResult
from personas.prompts import final_answer_prompt


async def _drop(_: EngineEvent) -> None:
    return None


class Engine:
    """An agent engine: providers, a model chain, tools and limits.

    It keeps no conversation state; a caller hands in a :class:`Conversation`
    per turn, which the turn updates in place and the caller persists.
    Everything it is configured with comes from ``settings`` (an
    :class:`EngineConfig`; the defaults when omitted), never from the
    environment, so it behaves the same in whichever process it runs.
    """

    def __init__(
        self,
        providers: ProviderRegistry | None = None,
        *,
        model: str | None = None,
        fallbacks: list[str] | None = None,
        tools: ToolRegistry | None = None,
        settings: EngineConfig | None = None,
        prices: PriceTable | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        final_answer_prompt: str | None = None,
        provider_state: ProviderState | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or EngineConfig()
        self.providers = providers or ProviderRegistry(self.settings)
        self.model = self._qualify(model) if model else self.settings.default_model()
        chain = self.settings.fallback_models if fallbacks is None else fallbacks
        self.fallbacks = [self._qualify(m) for m in chain]
        self.tools = tools if tools is not None else ToolRegistry(builtin_tools())
        self.prices = prices or PriceTable.overlay(self.settings.models)
        # Credential rotation, the provider lane and thinking options; the
        # cooldowns and slots are shared through ``provider_state`` (the store).
        overridden = frozenset(v for v in ("openai", "anthropic") if self.providers.has_override(v))
        self.access = ProviderAccess(
            self.settings, provider_state, overridden=overridden, clock=clock
        )
        self.final_answer_prompt = final_answer_prompt
        s = self.settings
        self.retry_policy = RetryPolicy(
            s.max_retries,
            s.retry_base_delay,
            s.retry_max_delay,
            s.retry_jitter,
            max_retry_after=s.rate_limit_wait,
        )
        self._sleep = sleep
        self._rand = rand

    def _qualify(self, model: str) -> str:
        """``model`` as provider:name; a name that cannot be is kept, to fail its calls.

        A persona or group naming an unknown model then gets a clear
        model_not_found error on its turns instead of taking its actor down.
        """
        try:
            return self.settings.registry().qualify(model)
        except UnknownModel:
            return model

    def caller(self, model: str | None = None) -> ModelCaller:
        """A model caller for ``model`` (the engine's own when omitted), then the fallbacks."""
        first = self._qualify(model) if model else self.model
        chain = [first, *self.fallbacks]
        return ModelCaller(
            self.providers,
            chain,
            self.retry_policy,
            timeouts=self.settings.stream_timeouts(),
            sleep=self._sleep,
            rand=self._rand,
            sees_images=self.settings.sees_images,
            access=self.access,
        )

    def window_for(self, model: str | None = None) -> int:
        """The context window, in tokens, of ``model`` (the engine's own when omitted)."""
        return self.settings.window_for(model or self.model)

    def tool_result_max_chars_for(self, model: str | None = None) -> int:
        """The longest tool result kept in the transcript: ~30% of the window, at most 40k."""
        return min(int(self.window_for(model) * 0.3 * 4), 40_000)

    @property
    def tool_result_max_chars(self) -> int:
        """The longest tool result kept in the transcript of the engine's own model."""
        return self.tool_result_max_chars_for()

    def final_prompt(self, language: object = None) -> str:
        """The last, tool-less call's instruction, in the turn's language.

        A configured ``final_answer_prompt`` replaces the templates.
        """
        if self.final_answer_prompt is not None:
            return self.final_answer_prompt
        return final_answer_prompt("zh" if language == "zh" else "en")

    async def run_turn(
        self,
        conv: Conversation,
        user_input: Message | None,
        *,
        system: str,
        emit: Emit | None = None,
        ctx: ToolContext | None = None,
        allowed_tools: set[str] | frozenset[str] | None = None,
        abort: asyncio.Event | None = None,
        context: CallContext | None = None,
        model: str | None = None,
        steer: SteerSource | None = None,
        preamble: list[Message] | None = None,
        announce: bool = False,
    ) -> TurnResult:
        """Run one turn; always ends with exactly one :class:`StopEvent`.

        ``steer`` gives messages that join the turn at its model-call
        boundaries (``engine.steer``); ``preamble`` messages go to every
        model call between the system prompt and the transcript, and are
        not added to the transcript (a task's activated skills).
        ``announce`` opens the turn with an ``init`` notice naming its
        model, tools and session (``system`` ``init`` on the wire).
        ``context`` says who calls and why (:mod:`engine.call_context`);
        every model call of the turn carries it.

        Setting ``abort`` stops the turn at its next await point (or, when
        the code awaited there swallows the cancel, at its next event or
        step); the turn then ends with reason ``aborted`` and a consistent
        transcript. An abort that comes once the turn has decided its own end
        is too late: the turn keeps that end, and its one stop event.
        Cancelling the calling task does the same and then propagates.
        """
        turn = TurnLoop(
            self,
            conv,
            system,
            emit or _drop,
            ctx or ToolContext(conv.id),
            allowed_tools,
            context or CallContext(),
            self.caller(model),
        )
        turn.steer = steer
        turn.preamble = list(preamble or ())
        turn.announcing = announce
        if user_input is not None:
            conv.messages.append(user_input)
        return await turn.drive(abort)
