"""Approval policies: how a call's policy is resolved, and the gate that applies it.

The gate is exercised through the real ``ToolRegistry.execute`` with real
tools; the people it asks are a function that answers as a test tells it.
Turns through the whole deployment are in tests/test_approval_turns.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from engine.messages import ToolCall
from engine.tools.approval import (
    ALLOW_ONCE,
    ALWAYS,
    CHOICES,
    DENY,
    ApprovalGate,
    ApprovalRequest,
    ApprovalRules,
    approval_marks,
    default_policy,
)
from engine.tools.registry import JsonArguments, Tool, ToolContext, ToolRegistry
from personas.model import PersonaMeta
from protocol import GroupSettingsPatch
from protocol.settings import GroupSettings


# -- resolution ----------------------------------------------------------------------
def test_defaults_read_auto_and_writes_web_and_mcp_ask() -> None:
    for name in ("rethink", "finish", "ask_user", "recall", "remember", "list_files"):
        assert default_policy(name) == "auto", name
    for name in ("read_file", "search_files", "route_forward"):
        assert default_policy(name) == "auto", name
    assert default_policy("write_file") == "ask"
    assert default_policy("web_fetch") == "ask"
    assert default_policy("fx__echo") == "ask"
    # A tool the table does not know keeps what it declares.
    assert default_policy("something_new") == "auto"
    assert default_policy("something_new", "ask") == "ask"


def test_group_overrides_persona_overrides_default() -> None:
    rules = ApprovalRules.of(
        {"web_fetch": "auto"}, {"web_fetch": "ask", "recall": "ask"}, False, ()
    )
    assert rules.resolve("web_fetch") == "auto"
    assert rules.resolve("recall") == "ask"
    assert rules.resolve("write_file") == "ask"
    assert rules.resolve("rethink") == "auto"


def test_a_prefix_covers_a_server_and_an_exact_name_beats_it() -> None:
    rules = ApprovalRules.of({"fx__*": "auto", "fx__crash": "ask", "f*": "deny"}, {}, False, ())
    assert rules.resolve("fx__echo") == "auto"
    assert rules.resolve("fx__crash") == "ask"
    assert rules.resolve("other__echo") == "ask"


def test_deny_from_either_side_wins_over_everything() -> None:
    by_persona = ApprovalRules.of({"web_fetch": "auto"}, {"web_fetch": "deny"}, True, ("all",))
    assert by_persona.resolve("web_fetch") == "deny"
    by_group = ApprovalRules.of({"fx__*": "deny"}, {}, True, ("fx__echo",))
    assert by_group.resolve("fx__echo") == "deny"


def test_auto_approve_and_marks_allow_without_asking() -> None:
    assert ApprovalRules.of({}, {}, True, ()).resolve("fx__echo") == "auto"
    marked = ApprovalRules.of({"write_file": "ask"}, {}, False, ("web_fetch", "fx__*"))
    assert marked.resolve("web_fetch") == "auto"
    assert marked.resolve("fx__add") == "auto"
    assert marked.resolve("write_file") == "ask"
    assert ApprovalRules.of({}, {}, False, ("all",)).resolve("write_file") == "auto"


@pytest.mark.parametrize(
    ("text", "marks"),
    [
        ("please fetch it !approve web_fetch", ("web_fetch",)),
        ("!approve all", ("all",)),
        ("!approve web_fetch, fx__echo and thanks", ("web_fetch", "fx__echo")),
        ("two marks: !approve a\n!approve b !approve a", ("a", "b")),
        ("no mark here, only!approve web_fetch glued to a word", ()),
        ("!approve", ()),
        ("an e-mail approve web_fetch", ()),
    ],
)
def test_marks_are_read_from_the_message(text: str, marks: tuple[str, ...]) -> None:
    assert approval_marks(text) == marks


def test_group_settings_bound_the_policies() -> None:
    settings = GroupSettings.model_validate(
        {"toolPolicies": {"fx__*": "auto", "web_fetch": "deny"}, "autoApprove": True}
    )
    assert settings.tool_policies == {"fx__*": "auto", "web_fetch": "deny"}
    assert settings.model_dump(by_alias=True)["approvalTimeoutS"] == 300.0
    with pytest.raises(ValidationError):
        GroupSettingsPatch.model_validate({"toolPolicies": {"web_fetch": "sometimes"}})
    with pytest.raises(ValidationError):
        GroupSettingsPatch.model_validate({"toolPolicies": {"bad name": "auto"}})
    with pytest.raises(ValidationError):
        GroupSettingsPatch.model_validate({"toolPolicies": {f"t{i}": "auto" for i in range(65)}})
    with pytest.raises(ValidationError):
        GroupSettingsPatch.model_validate({"approvalTimeoutS": 0.5})


def test_a_persona_file_sets_its_policies() -> None:
    base = {"id": "x", "name": "X", "role": "r"}
    persona = PersonaMeta.model_validate({**base, "toolPolicies": {"web_fetch": "deny"}})
    assert persona.tool_policies == {"web_fetch": "deny"}
    with pytest.raises(ValidationError):
        PersonaMeta.model_validate(
            {"id": "x", "name": "X", "role": "r", "toolPolicies": {"a": "no"}}
        )


# -- the gate in the registry ---------------------------------------------------------
class _Text(BaseModel):
    text: str


async def _shout(params: _Text, ctx: ToolContext) -> str:
    return params.text.upper()


async def _echo(arguments: dict[str, Any], ctx: ToolContext) -> str:
    return f"echo {arguments['text']}"


REGISTRY = ToolRegistry(
    [
        Tool("web_fetch", "fetch", _Text, _shout),
        Tool("recall", "recall", _Text, _shout),
        Tool(
            "fx__echo",
            "echo",
            JsonArguments,
            _echo,
            input_schema={"type": "object", "required": ["text"]},
        ),
    ]
)


class People:
    """Answers approval questions as the test says, and keeps what it was asked."""

    def __init__(self, *answers: str | type[TimeoutError]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[ApprovalRequest, str, list[str]]] = []
        self.remembered: list[str] = []

    async def ask(self, request: ApprovalRequest, prompt: str, choices: list[str]) -> str:
        self.asked.append((request, prompt, choices))
        answer = self.answers.pop(0)
        if answer is TimeoutError:
            raise TimeoutError
        assert isinstance(answer, str)
        return answer

    async def remember(self, tool: str) -> None:
        self.remembered.append(tool)


def _ctx(people: People, rules: ApprovalRules | None = None) -> ToolContext:
    gate = ApprovalGate(rules or ApprovalRules(), people.ask, people.remember)
    return ToolContext(conversation_id="c", vp_id="linus", group_id="g", approve=gate)


async def _call(ctx: ToolContext, name: str, text: str = "hi") -> tuple[str, bool]:
    outcome = await REGISTRY.execute(ToolCall(id="c1", name=name, arguments={"text": text}), ctx)
    return outcome.content, outcome.is_error


async def test_an_auto_tool_runs_without_a_question() -> None:
    people = People()
    assert await _call(_ctx(people), "recall") == ("HI", False)
    assert people.asked == []


async def test_allow_once_runs_this_call_and_asks_again_next_time() -> None:
    people = People(ALLOW_ONCE, ALLOW_ONCE)
    ctx = _ctx(people)
    assert await _call(ctx, "fx__echo", "one") == ("echo one", False)
    assert await _call(ctx, "fx__echo", "two") == ("echo two", False)
    assert len(people.asked) == 2 and people.remembered == []
    request, prompt, choices = people.asked[0]
    assert request == ApprovalRequest("fx__echo", '{"text": "one"}')
    assert prompt == '@linus wants to run fx__echo with {"text": "one"}. Allow it?'
    assert choices == list(CHOICES)


async def test_always_is_remembered_and_not_asked_again() -> None:
    people = People(ALWAYS)
    ctx = _ctx(people)
    assert await _call(ctx, "web_fetch") == ("HI", False)
    assert await _call(ctx, "web_fetch") == ("HI", False)
    assert len(people.asked) == 1 and people.remembered == ["web_fetch"]


async def test_deny_and_expiry_are_error_results_the_model_reads() -> None:
    people = People(DENY, TimeoutError)
    ctx = _ctx(people)
    content, is_error = await _call(ctx, "web_fetch")
    assert is_error and content == "web_fetch was not run: a person of the group denied it"
    content, is_error = await _call(ctx, "web_fetch")
    assert is_error and "nobody approved it before the question expired" in content


async def test_a_denied_policy_never_asks_and_bad_arguments_are_refused_first() -> None:
    people = People()
    ctx = _ctx(people, ApprovalRules.of({"web_fetch": "deny"}, {}, False, ()))
    content, is_error = await _call(ctx, "web_fetch")
    assert is_error and "approval policy is deny" in content
    outcome = await REGISTRY.execute(ToolCall(id="c3", name="fx__echo", arguments={}), _ctx(people))
    assert outcome.is_error and outcome.content.startswith("invalid arguments")
    assert people.asked == []


async def test_a_long_argument_list_is_summarised() -> None:
    request = ApprovalRequest.of(ToolCall(id="c", name="web_fetch", arguments={"url": "x" * 1000}))
    assert len(request.arguments) == 400 and request.arguments.endswith("…")


async def test_nobody_to_ask_is_a_refusal() -> None:
    gate = ApprovalGate(ApprovalRules(), None)
    ctx = ToolContext(conversation_id="c", approve=gate)
    content, is_error = await _call(ctx, "web_fetch")
    assert is_error and "nobody can be asked" in content
