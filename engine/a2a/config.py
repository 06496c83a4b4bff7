"""Remote A2A agents a VP may call: the ``a2aAgents`` file, shaped like ``mcpServers``.

The file is JSON with one object, ``a2aAgents``, naming each agent::

    {"a2aAgents": {
        "librarian": {"url": "https://papers.example/.well-known/agent-card.json",
                      "token": "..."},
        "billing": {"url": "https://billing.example/a2a",
                    "headers": {"X-Api-Key": "..."}, "timeout": 300}
    }}

``url`` is the agent's card: a URL that ends in ``.json`` is read as it is;
any other is the agent's base URL, whose card is at
``/.well-known/agent-card.json`` under it. ``token`` is sent as
``Authorization: Bearer <token>`` and ``headers`` as they are, on every
request to the agent (its card included). Optional keys: ``disabled``,
``timeout`` (seconds one call may take) and ``description`` (used for the
tool when the card has none). ``token`` and header values are secrets:
kept as :class:`~pydantic.SecretStr`, so no ``repr``, log line, listing or
frame shows them.

A broken entry does not stop the others: it is kept with the reason, listed
with it, and never called. A file that is not JSON, or has no ``a2aAgents``
object, is an error naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from engine.mcp.config import name_problem, validation_reason

# The well-known path of an agent card under an agent's base URL (A2A v1).
CARD_PATH = "/.well-known/agent-card.json"
# An agent's tool is named ``a2a__<agent>``: a policy of ``a2a__*`` covers them all.
TOOL_PREFIX = "a2a__"


class A2aConfigError(ValueError):
    """The configuration file cannot be used at all (not JSON, wrong shape)."""


class AgentSpec(BaseModel):
    """One remote agent: where its card is, and how to authenticate to it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(pattern=r"^https?://", max_length=2000)
    token: SecretStr | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    disabled: bool = False
    # Seconds one call may take; None: the configuration's default.
    timeout: float | None = Field(default=None, gt=0, le=3600)
    description: str | None = Field(default=None, max_length=2000)

    @property
    def card_url(self) -> str:
        """Where the agent card is read."""
        if self.url.split("?", 1)[0].endswith(".json"):
            return self.url
        return self.url.rstrip("/") + CARD_PATH

    def request_headers(self) -> dict[str, str]:
        """The headers every request to the agent carries (secret values, for the wire only)."""
        out = {k: v.get_secret_value() for k, v in self.headers.items()}
        if self.token is not None:
            out["Authorization"] = f"Bearer {self.token.get_secret_value()}"
        return out

    def auth_names(self) -> list[str]:
        """The names of the headers it sends (never their values), for listings."""
        names = sorted(self.headers)
        return ["Authorization", *names] if self.token is not None else names


class A2aConfig(BaseModel):
    """Every configured remote agent, and the limits its card and calls run under.

    Frozen and picklable: it travels to each VP actor inside the
    ``RuntimeConfig``, so an actor never reads the file itself.
    """

    model_config = ConfigDict(frozen=True)

    agents: dict[str, AgentSpec] = Field(default_factory=dict)
    # Entries that could not be read, with the reason (listed, never called).
    invalid: dict[str, str] = Field(default_factory=dict)
    source: str | None = None
    # Seconds to read an agent's card.
    card_timeout_s: float = Field(default=10.0, gt=0)
    # Seconds one call may take unless its agent sets ``timeout``.
    call_timeout_s: float = Field(default=300.0, gt=0)
    # Back-off between attempts to read a card that failed: doubling from
    # the first to the second value.
    backoff_s: tuple[float, float] = (1.0, 60.0)

    def usable(self) -> list[str]:
        """The names of agents that may be called (valid and not disabled)."""
        return sorted(n for n, a in self.agents.items() if not a.disabled)

    def call_timeout(self, name: str) -> float:
        spec = self.agents.get(name)
        return spec.timeout if spec is not None and spec.timeout else self.call_timeout_s


def parse_a2a_config(data: Any, source: str | None = None, **limits: Any) -> A2aConfig:
    """Read the ``a2aAgents`` shape; bad entries become invalid agents with a reason."""
    where = source or "A2A configuration"
    if not isinstance(data, dict) or not isinstance(data.get("a2aAgents", {}), dict):
        raise A2aConfigError(f"{where}: expected an object with an 'a2aAgents' object")
    agents: dict[str, AgentSpec] = {}
    invalid: dict[str, str] = {}
    for name, raw in data.get("a2aAgents", {}).items():
        problem = name_problem(name)
        if problem is not None:
            invalid[name[:64]] = problem.replace("server", "agent").replace(
                "name__tool", "a2a__name"
            )
            continue
        try:
            agents[name] = AgentSpec.model_validate(raw)
        except ValidationError as exc:
            invalid[name] = validation_reason(exc)
    return A2aConfig(agents=agents, invalid=invalid, source=source, **limits)


def load_a2a_config(path: Path, **limits: Any) -> A2aConfig:
    """The configuration in ``path``; an empty one when the file does not exist."""
    if not path.exists():
        return A2aConfig(**limits)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise A2aConfigError(f"{path}: cannot read the A2A configuration: {exc}") from exc
    return parse_a2a_config(data, str(path), **limits)
