"""A group's settings: one bounded model, and the patch a client sends to change it.

``GroupSettings`` is the whole record. Every field has a default and the
bounds a group may be run with: the loop guard's limits are what stop VPs
from talking to each other forever at the owner's expense, so nobody (a
client, the CLI, a test) can set them outside these ranges. The store keeps
it as JSON with the Python (snake_case) names; clients see it with the wire
(camelCase) names, ``model_dump(by_alias=True)``.

``GroupSettingsPatch`` is what a client sends to set some of them. It is
derived from ``GroupSettings`` field by field rather than written out again,
so the two cannot drift apart: the same names, types, bounds and
descriptions, every field optional (absent or ``null`` leaves the setting as
it is), and strict like every client frame: unknown fields are refused and
values are not coerced.

A one-to-one conversation is a group record too (``store.conversation``),
with the same settings; ``ConversationSettingsPatch`` is derived the same
way from the fields that mean something with one VP and one person
(``CONVERSATION_SETTINGS``). The others (fan-out, hand-offs between VPs,
team mode) need several VPs, so a conversation refuses them as unknown.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, field_validator
from pydantic.alias_generators import to_camel

from protocol.common import ClientModel
from protocol.queueing import QueueMode

ToolPolicy = Literal["auto", "ask", "deny"]
"""How a tool call is let through: at once, after a person allows it, or never."""

TOOL_KEY_PATTERN = r"^[A-Za-z0-9_-]+(\*)?$"
"""A tool's name as the model sees it, or a prefix of names ending in ``*`` (``fx__*``)."""

MODEL_PATTERN = r"^((openai|anthropic|offline):[^\s:][^\s]*)?$"
"""A group's model: empty (the server's default) or ``provider:name`` of a known provider."""


def check_project_doc(value: str) -> str:
    """A project document path: relative, inside the workspace, ``/``-separated."""
    if not value:
        return value
    if "\x00" in value or "\\" in value:
        raise ValueError("a project document path has no NUL or backslash characters")
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise ValueError("a project document path is relative to the group's workspace")
    if ".." in value.split("/"):
        raise ValueError("a project document path may not leave the workspace ('..')")
    return value


ProjectDocPath = Annotated[str, AfterValidator(check_project_doc)]


class GroupSettings(BaseModel):
    """Per-group knobs with their defaults (see DESIGN.md) and bounds.

    Unknown keys are ignored when a stored group is loaded: settings that
    were removed (a ``model`` field once lived here) must not make old
    groups unreadable (the ``model`` that lives here now is another: the
    group's model for every VP, empty by default). What a client sends is checked by the strict
    ``GroupSettingsPatch`` instead.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="ignore"
    )

    language: Literal["en", "zh"] = Field(
        default="en", description="The language VPs are asked to answer in."
    )
    team_mode: bool = Field(
        default=False,
        description=(
            "Team mode: a message without @mentions goes to an intent router, which may make "
            "it a task that a planned team of the group's VPs works on in parallel, with one "
            "synthesised answer the people accept. A message starting with /task is a task "
            "whatever this says."
        ),
    )
    broadcast_when_unmentioned: bool = Field(
        default=True,
        description=(
            "A message that mentions nobody goes to every VP; when false, only the "
            "group's default VP answers it."
        ),
    )
    vp_mentions_dispatch: bool = Field(
        default=True, description="An @name in a VP's own reply dispatches that VP."
    )
    fanout_cap: int = Field(
        default=16, ge=1, le=16, description="At most this many VPs answer one message."
    )
    max_chain_depth: int = Field(
        default=8, ge=1, le=16, description="At most this many VP-to-VP hops follow one message."
    )
    throttle_hits: int = Field(
        default=8,
        ge=1,
        le=32,
        description="At most this many VP-caused dispatches to one VP per throttle window.",
    )
    throttle_window_s: float = Field(
        default=5.0, ge=0.5, le=60, description="The throttle window, in seconds."
    )
    max_pair_exchanges: int = Field(
        default=4,
        ge=1,
        le=16,
        description="At most this many exchanges between the same two VPs after one message.",
    )
    max_turns_per_message: int = Field(
        default=32, ge=1, le=64, description="At most this many VP turns after one message."
    )
    mcp_servers: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        default_factory=lambda: ["*"],
        max_length=64,
        description="The MCP servers this group's VPs may use, by name; '*' is every one.",
    )
    auto_approve: bool = Field(
        default=False,
        description="Every tool call runs without asking (tools set to deny stay refused).",
    )
    tool_policies: dict[
        Annotated[str, Field(min_length=1, max_length=80, pattern=TOOL_KEY_PATTERN)], ToolPolicy
    ] = Field(
        default_factory=dict,
        max_length=64,
        description=(
            "Approval policy by tool name (or name prefix ending in '*'): auto, ask or deny; "
            "overrides each tool's default and the persona's."
        ),
    )
    approval_timeout_s: float = Field(
        default=300.0,
        ge=1,
        le=3600,
        description="Seconds a tool approval question waits for an answer before it is a denial.",
    )
    model: str = Field(
        default="",
        max_length=200,
        pattern=MODEL_PATTERN,
        description=(
            "The model every VP of the group answers with, as provider:name "
            "(openai, anthropic or offline); empty: the server's default for each VP."
        ),
    )

    project_doc: ProjectDocPath = Field(
        default="",
        max_length=255,
        description=(
            "The file, relative to the group's workspace, every VP reads into its system "
            "prompt (the first 16 KiB) on each turn; empty: AGENTS.md, else README.md."
        ),
    )
    queue_mode: QueueMode = Field(
        default=QueueMode.COLLECT,
        description=(
            "What a person's message does when the VP it goes to is still answering: "
            "steer (joins the running turn), followup (a turn after it), collect "
            "(messages merged into one turn after a quiet window) or interrupt "
            "(the running turn stops and one on the new message starts)."
        ),
    )
    queue_debounce_s: float = Field(
        default=1.0,
        ge=0,
        le=30,
        description="collect: the quiet window, in seconds, before the merged turn starts.",
    )
    queue_cap: int = Field(
        default=20,
        ge=1,
        le=100,
        description=(
            "collect: at most this many messages in full in one merged turn; older ones "
            "are shortened to one line each."
        ),
    )

    budget_tokens_per_day: int = Field(
        default=0,
        ge=0,
        le=10_000_000_000,
        description="At most this many tokens a day (UTC) for the group's turns; 0: no limit.",
    )
    budget_usd_per_day: float = Field(
        default=0.0,
        ge=0,
        le=1_000_000,
        description="At most this many US dollars a day (UTC) for the group's turns; 0: no limit.",
    )
    budget_tokens_per_month: int = Field(
        default=0,
        ge=0,
        le=1_000_000_000_000,
        description="At most this many tokens a month (UTC) for the group's turns; 0: no limit.",
    )
    budget_usd_per_month: float = Field(
        default=0.0,
        ge=0,
        le=100_000_000,
        description=(
            "At most this many US dollars a month (UTC) for the group's turns; 0: no limit."
        ),
    )
    budget_tokens_per_message: int = Field(
        default=0,
        ge=0,
        le=10_000_000_000,
        description=(
            "At most this many tokens for the turns that follow one person's message "
            "(its whole chain of VP turns); 0: no limit."
        ),
    )
    budget_usd_per_message: float = Field(
        default=0.0,
        ge=0,
        le=1_000_000,
        description="At most this many US dollars for the turns after one message; 0: no limit.",
    )

    @field_validator("model", mode="before")
    @classmethod
    def _retired_model_is_the_default(cls, value: object) -> object:
        # Groups saved when ``model`` was an unused setting carry ``null`` or
        # a bare name: loaded as the default, like any retired setting.
        if value is None or (isinstance(value, str) and not re.fullmatch(MODEL_PATTERN, value)):
            return ""
        return value

    def apply(self, patch: GroupSettingsPatch | None) -> GroupSettings:
        """These settings with the fields ``patch`` sets replaced; ``self`` is left as is."""
        if patch is None:
            return self
        return GroupSettings.model_validate({**self.model_dump(), **patch.changes()})


class SettingsPatch(ClientModel):
    """The base of ``GroupSettingsPatch``: its behaviour, none of its fields."""

    def changes(self) -> dict[str, Any]:
        """The settings this patch sets, by their Python names; unset and null ones left out."""
        return self.model_dump(by_alias=False, exclude_none=True)


def _optional_fields(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s fields as ``create_model`` takes them: each optional, constraints kept."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotated: Any = info.annotation
        if info.metadata:
            # ``metadata`` holds the field's constraints (Ge, Le, ...); attached
            # to the type they check every value that is not None.
            annotated = Annotated[(annotated, *info.metadata)]
        fields[name] = (annotated | None, Field(default=None, description=info.description))
    return fields


CONVERSATION_SETTINGS = (
    "language",
    "model",
    "queue_mode",
    "queue_debounce_s",
    "queue_cap",
    "auto_approve",
    "tool_policies",
    "approval_timeout_s",
    "mcp_servers",
    "project_doc",
    "budget_tokens_per_day",
    "budget_usd_per_day",
    "budget_tokens_per_month",
    "budget_usd_per_month",
    "budget_tokens_per_message",
    "budget_usd_per_message",
)
"""The settings a conversation has, by their Python names (all of ``GroupSettings`` but
those about several VPs)."""


def conversation_settings(settings: GroupSettings) -> dict[str, Any]:
    """The settings a conversation has, in wire spelling."""
    return {
        GroupSettings.model_fields[name].alias or name: value
        for name, value in settings.model_dump(mode="json").items()
        if name in CONVERSATION_SETTINGS
    }


if TYPE_CHECKING:
    # A class made at run time is not a type the checker can follow; it sees
    # the base, which has every method the rest of the code calls.
    GroupSettingsPatch = SettingsPatch
    ConversationSettingsPatch = SettingsPatch
else:
    GroupSettingsPatch = create_model(
        "GroupSettingsPatch",
        __base__=SettingsPatch,
        __module__=__name__,
        __doc__=(
            "Settings a client sets: any subset of GroupSettings, with the same bounds; "
            "absent or null fields are left as they are."
        ),
        **_optional_fields(GroupSettings),
    )
    ConversationSettingsPatch = create_model(
        "ConversationSettingsPatch",
        __base__=SettingsPatch,
        __module__=__name__,
        __doc__=(
            "Settings a conversation's owner sets: any subset of the conversation's "
            "settings (CONVERSATION_SETTINGS), with the bounds of GroupSettings; absent or "
            "null fields are left as they are."
        ),
        **{
            name: spec
            for name, spec in _optional_fields(GroupSettings).items()
            if name in CONVERSATION_SETTINGS
        },
    )
