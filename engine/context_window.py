"""One turn's prompt kept inside its model's context window.

Before every model call the turn asks :meth:`ContextWindow.make_room`: a
window no larger than the output reserved for the reply is refused at once,
and a prompt past the window (less that reserve) is made smaller in seed
004's order: compaction (older turns summarised, at most
``max_compactions`` times a turn), then large tool results shortened once,
then a readable refusal that names the numbers and what to do. A provider
that still reports an overflow gets the same treatment
(:meth:`ContextWindow.overflowed`). A summary call that fails ends
compaction for the turn with a ``system`` ``error`` notice; the turn goes on
to the next step, never loops, and never ends in the fallback chain's
listing.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.caller import Emit
from engine.compaction import Summarize, compact
from engine.errors import ErrorKind, ModelError
from engine.events import NoticeEvent, NoticeKind
from engine.history import truncate_tool_result
from engine.messages import Conversation
from engine.settings import EngineConfig

OVERFLOW_MESSAGE = (
    "The conversation no longer fits the model's context window, even after compaction. "
    "Start a new conversation or use a model with a larger context window."
)
WHAT_TO_DO = "Start a new conversation, or pick a model with a larger context window."
_SHRUNK_RESULT_CHARS = 2000


class ContextWindow:
    """The guard and the recovery of one turn's prompt, with what was tried so far.

    ``model`` is the first of the turn's chain (its window sets the limits),
    ``prompt_tokens`` measures the prompt as it is now, ``emit`` says what
    was done, ``summarize`` makes the summary a compaction keeps.
    """

    def __init__(
        self,
        settings: EngineConfig,
        model: str,
        window_for: Callable[[str], int],
        conv: Conversation,
        prompt_tokens: Callable[[], int],
        emit: Emit,
        summarize: Summarize,
    ) -> None:
        self.settings = settings
        self.model = model
        self.window_for = window_for
        self.conv = conv
        self.prompt_tokens = prompt_tokens
        self.emit = emit
        self.summarize = summarize
        self.compactions = 0
        # Why compaction failed this turn (its summary call's error), if it did.
        self.compaction_failed: ModelError | None = None
        self.shrunk_results = False

    async def make_room(self) -> None:
        """Before a call: refuse what cannot fit; make the prompt fit if it does not."""
        self.guard(recovered=False)
        if self.prompt_tokens() > self.threshold():
            await self.recover()
            self.guard(recovered=True)

    async def overflowed(self, err: ModelError) -> None:
        """The provider said the prompt overflowed: make room, or end with a readable error."""
        if not await self.recover():
            raise ModelError(
                ErrorKind.CONTEXT_OVERFLOW, self.overflow_message(), status=err.status
            ) from err

    def guard(self, recovered: bool) -> None:
        """Refuse a call the model's window cannot hold, before the model is called.

        A window no larger than the output reserved for the reply is refused
        at once (no compaction can help); a prompt that, with the reserve,
        still exceeds the window once compaction and truncation are done
        (``recovered``) is refused with the same numbers.
        """
        model = self.model
        window = self.window_for(model)
        reserve = self.settings.max_output_tokens
        prompt = self.prompt_tokens()
        if reserve >= window:
            raise ModelError(
                ErrorKind.CONTEXT_WINDOW,
                f"{model} has a {window:,}-token context window, too small for the "
                f"{reserve:,} tokens reserved for its reply plus a prompt of about "
                f"{prompt:,} tokens; the model was not called. Give the model a larger "
                "context_window in the models file, lower max_output_tokens, or pick "
                "another model.",
            )
        if recovered and prompt + reserve > window:
            raise ModelError(
                ErrorKind.CONTEXT_WINDOW,
                f"The conversation (about {prompt:,} tokens) and the {reserve:,} tokens "
                f"reserved for the reply do not fit {model}'s {window:,}-token context "
                f"window{self.after_recovery()}; the model was not called. {WHAT_TO_DO}",
            )

    def after_recovery(self) -> str:
        """What was tried to make room, for the message that says it was not enough."""
        failed = self.compaction_failed
        if failed is not None:
            return f", and summarising older turns failed ({failed.kind.value})"
        return ", even after compaction" if self.compactions else ""

    def overflow_message(self) -> str:
        if self.compaction_failed is None:
            return OVERFLOW_MESSAGE
        return (
            "The conversation no longer fits the model's context window, and summarising "
            f"older turns failed ({self.compaction_failed.kind.value}). {WHAT_TO_DO}"
        )

    def threshold(self) -> int:
        """Prompt tokens above which the turn compacts: the window less the output room."""
        return self.window_for(self.model) - self.settings.max_output_tokens

    async def recover(self) -> bool:
        """Make room: compact (at most N times a turn), then shrink tool results once."""
        s = self.settings
        while self.compactions < s.max_compactions:
            self.compactions += 1
            keep = max(1, s.keep_recent_turns - (self.compactions - 1))
            try:
                compacted = await compact(self.conv, keep, self.summarize)
            except ModelError as err:
                if err.kind is ErrorKind.ABORTED:
                    raise
                await self.compaction_failure(err)
                break
            if compacted:
                await self.emit(
                    NoticeEvent(
                        NoticeKind.COMPACT,
                        "older turns were summarised",
                        {"summary": self.conv.summary, "compactions": self.conv.compactions},
                    )
                )
                return True
        if not self.shrunk_results:
            self.shrunk_results = True
            shrunk = 0
            messages = self.conv.messages
            for i, m in enumerate(messages):
                if m.role == "tool" and len(m.content) > _SHRUNK_RESULT_CHARS:
                    # A new message, not an edit: a saved transcript tells by
                    # identity which of its messages changed.
                    short = truncate_tool_result(m.content, _SHRUNK_RESULT_CHARS)
                    messages[i] = m.model_copy(update={"content": short})
                    shrunk += 1
            if shrunk:
                await self.emit(
                    NoticeEvent(
                        NoticeKind.TRUNCATE,
                        f"{shrunk} large tool results shortened",
                        {"count": shrunk},
                    )
                )
                return True
        return False

    async def compaction_failure(self, err: ModelError) -> None:
        """The summary call failed: no more compaction this turn; say so and go on."""
        self.compaction_failed = err
        self.compactions = self.settings.max_compactions
        await self.emit(
            NoticeEvent(
                NoticeKind.ERROR,
                f"compaction failed: the summary call ended in {err.kind.value}; "
                "shortening large tool results instead",
                {"stage": "compaction", "reason": err.kind.value},
            )
        )
