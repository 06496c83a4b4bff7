"""The settings queries of the seed: ``llm_config`` and ``yeaft_settings``.

Both directions share each wire name, like ``mcp_servers_list``: the
client's frame asks (strict, like every client frame), the server's frame
answers, echoing ``requestId``.

- ``llm_config {groupId?, requestId?}``: the models a person may pick for a
  group's ``model`` setting, with each one's context window, output limit,
  price (US dollars per million tokens) and whether it calls tools, sees
  images (``vision``) and reasons (``thinking``); with ``groupId`` (a group
  the user is a member of) the answer also names the group's own ``model``.
- ``yeaft_settings {groupId, settings?, requestId?}``: without ``settings``
  it reads the group's settings (any member); with them, the owner changes
  the settings it names, within the same bounds as
  ``PATCH /api/groups/{id}/settings`` (``GroupSettingsPatch``), and the
  answer holds the settings after the change. ``editable`` says whether the
  user may change them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from protocol.common import ClientModel, Id, ServerModel
from protocol.settings import GroupSettings, GroupSettingsPatch

ThinkingLevel = Literal["off", "low", "medium", "high"]
"""How hard the models that can reason are asked to (the server's ``YEAFT_THINKING``)."""


class LlmConfig(ClientModel):
    """Ask for the models a person may pick; with ``groupId``, the group's model too."""

    type: Literal["llm_config"] = "llm_config"
    group_id: Id | None = Field(
        default=None, description="A group of the user's: the answer names its model too."
    )
    request_id: Id | None = None


class LlmPrice(ServerModel):
    """A model's list price, in US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(default=0.0, ge=0)
    cache_write: float = Field(default=0.0, ge=0)


class LlmModel(ServerModel):
    """One model a person may pick; ``id`` is what the group's ``model`` setting takes."""

    id: str = Field(description="provider:name, as the group's model setting takes it.")
    provider: str
    name: str
    context_window: int = Field(gt=0, description="Tokens of prompt and reply together.")
    max_output: int = Field(gt=0, description="Most tokens one reply may have.")
    tools: bool = Field(description="It calls tools.")
    vision: bool = Field(description="It is sent images (others get a description of each).")
    thinking: bool = Field(description="It reasons before answering (at thinkingLevel).")
    price: LlmPrice = Field(description="US dollars per million tokens.")


class LlmConfigFrame(ServerModel):
    """The answer to ``llm_config``.

    ``defaultModel`` answers when a group names no model (``fastModel`` for
    personas that ask for a fast one); ``fallbackModels`` are tried in order
    when a model fails. ``groupModel`` is the group's ``model`` setting when
    the question named a group (empty: each VP's default).
    """

    type: Literal["llm_config"] = "llm_config"
    models: list[LlmModel] = Field(default_factory=list)
    default_model: str
    fast_model: str | None = None
    fallback_models: list[str] = Field(default_factory=list)
    thinking_level: ThinkingLevel = "off"
    group_id: str | None = None
    group_model: str | None = None
    request_id: str | None = None


class YeaftSettings(ClientModel):
    """Read a group's settings (a member), or change the ones ``settings`` names (the owner)."""

    type: Literal["yeaft_settings"] = "yeaft_settings"
    group_id: Id
    settings: GroupSettingsPatch | None = Field(
        default=None, description="The settings to change (the owner only); absent: a read."
    )
    request_id: Id | None = None


class YeaftSettingsFrame(ServerModel):
    """The answer to ``yeaft_settings``: the group's settings, after any change it made."""

    type: Literal["yeaft_settings"] = "yeaft_settings"
    group_id: str
    settings: GroupSettings
    editable: bool = Field(default=False, description="The user may change them (the owner).")
    request_id: str | None = None
