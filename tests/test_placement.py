"""Where coordinator and VP actors go: settings to RuntimeConfig to Ray options.

The actors' real placement over several nodes is shown by
``tests/test_multinode.py``; here, that the settings reach the config and
what each strategy means to Ray.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.config import Placement, RuntimeConfig
from engine.settings import EngineConfig
from gateway.server import runtime_config
from gateway.settings import GatewaySettings


def test_spread_is_the_default_and_each_strategy_names_a_ray_strategy() -> None:
    assert RuntimeConfig().actor_placement is Placement.SPREAD
    assert [p.strategy for p in Placement] == ["SPREAD", "DEFAULT"]


def test_placement_and_resources_come_from_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YEAFT_ACTOR_PLACEMENT", "default")
    monkeypatch.setenv("YEAFT_VP_RESOURCES", '{"yeaft": 0.01}')
    monkeypatch.setenv("YEAFT_COORDINATOR_RESOURCES", '{"yeaft_coord": 1}')
    config = runtime_config(GatewaySettings(data_dir=tmp_path), EngineConfig())
    assert config.actor_placement is Placement.DEFAULT
    assert dict(config.vp_resources) == {"yeaft": 0.01}
    assert dict(config.coordinator_resources) == {"yeaft_coord": 1}


def test_an_unknown_placement_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YEAFT_ACTOR_PLACEMENT", "everywhere")
    with pytest.raises(ValueError, match="actor_placement"):
        GatewaySettings(data_dir=tmp_path)
