"""Every remote A2A agent of one process, and the engine tools they offer a turn.

One :class:`A2aManager` lives in each VP host process, shared by its VPs.
It holds a :class:`~engine.a2a.remote.RemoteAgent` per configured agent,
made (not contacted) on first ask. :meth:`A2aManager.toolset` gives a turn
one tool per agent, ``a2a__<agent>``, with one parameter (``message``): the
text sent to the agent. Unlike an MCP server's tools, an agent's tool does
not depend on its card, so it is offered at once; its description is read
from the card's skills once the card is in, and until then says that the
card is still being read (or why it could not be). The card is read in the
background when the turn starts, so the turn waits for nothing unless it
calls the agent.

A call streams the agent's artifacts and status messages to the people
watching as the tool's output (``ToolContext.output``) and gives the model
the whole answer as the tool's result. Every failure (no card, refused
credentials, a failed task, a timeout) is an error result that says why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from engine.a2a.config import TOOL_PREFIX, A2aConfig
from engine.tools.registry import CONVERSATION_MODES, Handler, Tool, ToolContext, ToolOutcome

if TYPE_CHECKING:
    from engine.a2a.remote import RemoteAgent

# How much of a card the model reads in a tool's description.
MAX_DESCRIPTION = 2000
MAX_MESSAGE = 100_000


class AskAgent(BaseModel):
    """The parameters of an agent's tool."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(
        min_length=1,
        max_length=MAX_MESSAGE,
        description=(
            "What to ask the agent, in plain words. A later call from this "
            "conversation continues the same conversation with the agent."
        ),
    )


def tool_name(agent: str) -> str:
    """The name the model sees for ``agent``'s tool."""
    return f"{TOOL_PREFIX}{agent}"


def describe_card(agent: RemoteAgent) -> str:
    """The tool's description: the card's name, description and skills, or why there are none."""
    head = f"[A2A {agent.name}] Ask the remote agent '{agent.name}'"
    card = agent.card
    if card is None:
        own = f" ({agent.spec.description})" if agent.spec.description else ""
        if agent.error is not None:
            return f"{head}{own}. It is unavailable now ({agent.error}); a call tries again."
        return f"{head}{own}. Its agent card is still being read, so its skills are not known yet."
    lines = [f"{head}: {card.name}. {card.description or agent.spec.description or ''}".strip()]
    if card.skills:
        lines.append("Skills:")
    for skill in card.skills:
        examples = "; ".join(skill.examples[:2])
        more = f" (e.g. {examples})" if examples else ""
        lines.append(f"- {skill.name}: {skill.description}{more}")
    text = "\n".join(lines)
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


@dataclass(frozen=True, slots=True)
class AgentStatus:
    """What a listing shows of one agent (plain values: it may cross processes)."""

    name: str
    url: str
    state: str
    # The names of the headers it sends (never their values).
    auth: tuple[str, ...] = ()
    card_name: str | None = None
    skills: tuple[str, ...] = ()
    error: str | None = None


class A2aToolset:
    """The agent tools of one turn: one per agent, offered whether or not its card is in."""

    def __init__(self, manager: A2aManager, agents: Sequence[str]) -> None:
        self._manager = manager
        self._agents = tuple(agents)

    def tools(self) -> tuple[Tool, ...]:
        out = []
        for name in self._agents:
            agent = self._manager.agent(name)
            if agent is not None:
                out.append(self._manager.tool_of(agent))
        return tuple(out)

    async def resolve(self, name: str) -> Tool | None:
        return None

    def missing(self, name: str) -> str | None:
        if not name.startswith(TOOL_PREFIX):
            return None
        agent = name.removeprefix(TOOL_PREFIX)
        if agent in self._manager.config.agents:
            return f"{name} cannot be called: the A2A agent '{agent}' is disabled"
        return None


class A2aManager:
    """The remote agents of one process (see the module notes)."""

    def __init__(self, config: A2aConfig) -> None:
        self.config = config
        self._agents: dict[str, RemoteAgent] = {}

    def __repr__(self) -> str:
        return f"A2aManager({self.agents})"

    @property
    def agents(self) -> list[str]:
        """The agents that can be called."""
        return self.config.usable()

    def agent(self, name: str) -> RemoteAgent | None:
        """The agent ``name`` (made, not contacted, on first ask); None if not usable."""
        spec = self.config.agents.get(name)
        if spec is None or spec.disabled:
            return None
        agent = self._agents.get(name)
        if agent is None:
            from engine.a2a.remote import RemoteAgent

            agent = self._agents[name] = RemoteAgent(
                name,
                spec,
                card_timeout_s=self.config.card_timeout_s,
                backoff_s=self.config.backoff_s,
            )
        return agent

    def start(self, names: Iterable[str]) -> None:
        """Read the cards of ``names`` in the background (where not read or being read)."""
        for name in names:
            agent = self.agent(name)
            if agent is not None:
                agent.start()

    async def settled(self) -> None:
        """Wait until every card being read in the background is read or has failed."""
        await asyncio.gather(*(a.settled() for a in self._agents.values()))

    def toolset(self, names: Iterable[str] | None = None) -> A2aToolset:
        """The tools of ``names`` (every usable agent by default); their cards are asked for."""
        wanted = [n for n in (self.agents if names is None else names) if self.agent(n)]
        self.start(wanted)
        return A2aToolset(self, wanted)

    def tool_of(self, agent: RemoteAgent) -> Tool:
        timeout = self.config.call_timeout(agent.name)
        return Tool(
            tool_name(agent.name),
            describe_card(agent),
            AskAgent,
            _caller(agent, timeout),
            modes=CONVERSATION_MODES,
            # The handler keeps its own deadline (with the card's); this one is a backstop.
            timeout=timeout + self.config.card_timeout_s + 5.0,
            server=f"a2a:{agent.name}",
        )

    async def reconfigure(self, config: A2aConfig) -> None:
        """Use ``config`` from now on: agents removed or changed are closed."""
        old, self.config = self._agents, config
        self._agents = {
            n: a for n, a in old.items() if config.agents.get(n) == a.spec and not a.spec.disabled
        }
        gone = [a for n, a in old.items() if self._agents.get(n) is not a]
        await asyncio.gather(*(a.aclose() for a in gone), return_exceptions=True)

    def statuses(self) -> list[AgentStatus]:
        """Every configured agent with its state, skills and the names of its auth headers."""
        out = []
        for name, spec in sorted(self.config.agents.items()):
            agent = self._agents.get(name)
            if spec.disabled:
                state, card, error = "closed", None, "disabled"
            elif agent is None:
                state, card, error = "idle", None, None
            else:
                state, card, error = agent.state.value, agent.card, agent.error
            out.append(
                AgentStatus(
                    name,
                    spec.url,
                    state,
                    tuple(spec.auth_names()),
                    card.name if card is not None else None,
                    tuple(s.name for s in card.skills) if card is not None else (),
                    error,
                )
            )
        for name, reason in sorted(self.config.invalid.items()):
            out.append(AgentStatus(name, "", "failed", error=reason))
        return out

    async def aclose(self) -> None:
        await asyncio.gather(*(a.aclose() for a in self._agents.values()), return_exceptions=True)


def _caller(agent: RemoteAgent, timeout: float) -> Handler:
    from engine.a2a.remote import AgentUnavailable, RemoteFailed

    exposed = tool_name(agent.name)

    async def call(params: AskAgent, ctx: ToolContext) -> ToolOutcome:
        try:
            async with asyncio.timeout(timeout):
                result = await agent.call(params.message, ctx.conversation_id, ctx.output)
        except TimeoutError:
            return ToolOutcome(
                f"{exposed} timed out after {timeout:g}s: the A2A agent '{agent.name}' did "
                "not finish in time, and the call was given up",
                is_error=True,
            )
        except (AgentUnavailable, RemoteFailed) as exc:
            return ToolOutcome(str(exc), is_error=True)
        if result.needs_input:
            return ToolOutcome(
                f"The agent needs more from you before it goes on ({result.state}): "
                f"{result.text or 'it did not say what'}. Call {exposed} again with the answer."
            )
        return ToolOutcome(result.text or "(the agent answered with no content)")

    return call
