"""Group settings: one bounded model, the patch derived from it, and the schema that shows both."""

from __future__ import annotations

import json
import pickle
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from protocol import (
    CreateGroup,
    ErrorCode,
    GroupSettings,
    GroupSettingsPatch,
    ProtocolError,
    json_schema,
    parse_client_frame,
)
from store.base import GroupSettings as StoreGroupSettings

# The ranges a group may be run with, written out here on purpose: a change
# to a bound must be a deliberate change to this table too.
BOUNDS: dict[str, tuple[float, float]] = {
    "fanout_cap": (1, 16),
    "max_chain_depth": (1, 16),
    "throttle_hits": (1, 32),
    "throttle_window_s": (0.5, 60),
    "max_pair_exchanges": (1, 16),
    "max_turns_per_message": (1, 64),
    "approval_timeout_s": (1, 3600),
    "queue_debounce_s": (0, 30),
    "queue_cap": (1, 100),
    "budget_tokens_per_day": (0, 10_000_000_000),
    "budget_usd_per_day": (0, 1_000_000),
    "budget_tokens_per_month": (0, 1_000_000_000_000),
    "budget_usd_per_month": (0, 100_000_000),
    "budget_tokens_per_message": (0, 10_000_000_000),
    "budget_usd_per_message": (0, 1_000_000),
}
DEFAULTS: dict[str, Any] = {
    "language": "en",
    "team_mode": False,
    "broadcast_when_unmentioned": True,
    "vp_mentions_dispatch": True,
    "fanout_cap": 16,
    "max_chain_depth": 8,
    "throttle_hits": 8,
    "throttle_window_s": 5.0,
    "max_pair_exchanges": 4,
    "max_turns_per_message": 32,
    "mcp_servers": ["*"],
    "auto_approve": False,
    "tool_policies": {},
    "approval_timeout_s": 300.0,
    "model": "",
    "project_doc": "",
    "queue_mode": "collect",
    "queue_debounce_s": 1.0,
    "queue_cap": 20,
    "budget_tokens_per_day": 0,
    "budget_usd_per_day": 0.0,
    "budget_tokens_per_month": 0,
    "budget_usd_per_month": 0.0,
    "budget_tokens_per_message": 0,
    "budget_usd_per_message": 0.0,
}


def _edges(name: str) -> tuple[list[float], list[float]]:
    """Values at the bounds of a field (accepted) and just past them (refused)."""
    low, high = BOUNDS[name]
    step = 1 if isinstance(DEFAULTS[name], int) else 0.01
    kind = type(DEFAULTS[name])
    return [kind(low), kind(high)], [kind(low - step), kind(high + step)]


def test_defaults_and_the_model_setting() -> None:
    assert GroupSettings().model_dump() == DEFAULTS
    assert StoreGroupSettings is GroupSettings
    # The group's model: empty (each VP's default) or provider:name of a known provider.
    for good in ("", "offline:default", "openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5"):
        assert GroupSettingsPatch.model_validate({"model": good}).changes() == {"model": good}
    for bad in ("gpt-4o", "acme:x", "openai:", "openai:a b", "x" * 300):
        with pytest.raises(ValidationError):
            GroupSettingsPatch.model_validate({"model": bad})
    # Groups saved when ``model`` was an unused setting held null: the default now.
    assert GroupSettings.model_validate({"model": None}).model == ""


def test_patch_has_every_setting_and_nothing_else() -> None:
    assert set(GroupSettingsPatch.model_fields) == set(GroupSettings.model_fields)
    assert GroupSettingsPatch().changes() == {}


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_settings_and_patch_share_the_bounds(name: str) -> None:
    accepted, refused = _edges(name)
    for value in accepted:
        assert getattr(GroupSettings.model_validate({name: value}), name) == value
        patch = GroupSettingsPatch.model_validate({to_camel(name): value})
        assert patch.changes() == {name: value}
    for value in refused:
        with pytest.raises(ValidationError):
            GroupSettings.model_validate({name: value})
        with pytest.raises(ValidationError):
            GroupSettingsPatch.model_validate({to_camel(name): value})


def test_language_is_english_or_chinese() -> None:
    assert GroupSettingsPatch.model_validate({"language": "zh"}).changes() == {"language": "zh"}
    for model in (GroupSettings, GroupSettingsPatch):
        with pytest.raises(ValidationError):
            model.model_validate({"language": "fr"})


@pytest.mark.parametrize(
    "raw",
    [
        {"model": "expensive"},
        {"fanoutCap": "4"},
        {"fanoutCap": 4.0},
        {"fanoutCap": True},
        {"vpMentionsDispatch": "yes"},
        {"throttleWindowS": float("nan")},
    ],
)
def test_patch_is_strict_and_closed(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        GroupSettingsPatch.model_validate(raw)


def test_apply_changes_only_what_the_patch_sets() -> None:
    base = GroupSettings(fanout_cap=3, language="zh")
    patch = GroupSettingsPatch.model_validate({"maxChainDepth": 2, "fanoutCap": None})
    patched = base.apply(patch)
    assert patched == GroupSettings(fanout_cap=3, language="zh", max_chain_depth=2)
    assert base.max_chain_depth == 8  # the original is left as it was
    assert base.apply(None) == base
    # An integer is a valid number of seconds.
    window = GroupSettingsPatch.model_validate({"throttleWindowS": 2})
    assert GroupSettings().apply(window).throttle_window_s == 2.0


def test_stored_settings_with_unknown_keys_still_load() -> None:
    legacy = {**DEFAULTS, "fanout_cap": 3, "model": None, "retired_knob": 1}
    assert GroupSettings.model_validate_json(json.dumps(legacy)).fanout_cap == 3
    assert GroupSettings.model_validate({"model": "gpt"}) == GroupSettings()


def test_wire_names_come_from_the_model() -> None:
    wire = GroupSettings().model_dump(mode="json", by_alias=True)
    assert wire == {to_camel(k): v for k, v in DEFAULTS.items()}
    assert GroupSettings.model_validate(wire) == GroupSettings()


def test_patch_pickles_for_ray() -> None:
    patch = GroupSettingsPatch.model_validate({"fanoutCap": 2, "language": "zh"})
    copy = pickle.loads(pickle.dumps(patch))
    assert type(copy) is GroupSettingsPatch and copy == patch


def test_create_group_frame_checks_settings() -> None:
    frame = parse_client_frame(
        {"type": "create_group", "name": "g", "roster": [], "settings": {"fanoutCap": 16}}
    )
    assert isinstance(frame, CreateGroup) and frame.settings is not None
    assert frame.settings.changes() == {"fanout_cap": 16}
    with pytest.raises(ProtocolError) as caught:
        parse_client_frame(
            {"type": "create_group", "name": "g", "roster": [], "settings": {"fanoutCap": 17}}
        )
    assert caught.value.code is ErrorCode.INVALID_FRAME
    assert caught.value.field == "settings.fanoutCap"


def test_schema_carries_every_bound_and_default() -> None:
    defs = json_schema()["$defs"]
    properties = defs["GroupSettingsPatch"]["properties"]
    assert set(properties) == {to_camel(name) for name in DEFAULTS}
    assert defs["GroupSettingsPatch"]["additionalProperties"] is False
    for name, (low, high) in BOUNDS.items():
        (bounded,) = [s for s in properties[to_camel(name)]["anyOf"] if s.get("type") != "null"]
        assert (bounded["minimum"], bounded["maximum"]) == (low, high), name
        assert properties[to_camel(name)]["description"]
    language = properties["language"]["anyOf"][0]
    assert set(language["enum"]) == {"en", "zh"}


def test_schema_refuses_settings_out_of_bounds() -> None:
    validator = jsonschema.Draft202012Validator(json_schema())
    frame = {"type": "create_group", "name": "g", "roster": []}
    assert validator.is_valid({**frame, "settings": {"maxTurnsPerMessage": 64}})
    assert not validator.is_valid({**frame, "settings": {"maxTurnsPerMessage": 65}})
    assert not validator.is_valid({**frame, "settings": {"model": "x"}})
