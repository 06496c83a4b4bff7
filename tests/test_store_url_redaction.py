"""A Redis password in the store URL never shows in a repr or a start-up line.

Kubernetes deployments (k8s/) pass YEAFT_REDIS_URL with the Redis password in
it; the URL travels inside every actor's RuntimeConfig, whose repr may be
logged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.config import RuntimeConfig
from store import StoreConfig, redact_url

SECRET = "s3cr3t-Redis-pw"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{SECRET}@redis:6379/0", "redis://:***@redis:6379/0"),
        (f"rediss://app:{SECRET}@cache.internal:6380/2", "rediss://app:***@cache.internal:6380/2"),
        (
            f"unix:///run/redis.sock?db=1&password={SECRET}",
            "unix:///run/redis.sock?db=1&password=***",
        ),
        (
            f"unix:///run/redis.sock?password={SECRET}&db=1",
            "unix:///run/redis.sock?password=***&db=1",
        ),
        ("redis://redis:6379/0", "redis://redis:6379/0"),
        ("redis://user@redis:6379/0", "redis://user@redis:6379/0"),
        ("embedded", "embedded"),
        (None, None),
    ],
)
def test_redact_url(url: str | None, shown: str | None) -> None:
    assert redact_url(url) == shown


def test_configs_never_show_the_password(tmp_path: Path) -> None:
    config = StoreConfig(f"redis://:{SECRET}@redis:6379/0", tmp_path)
    assert SECRET not in repr(config) and "redis://:***@redis:6379/0" in repr(config)
    assert config.url is not None and SECRET in config.url  # still usable
    assert SECRET not in repr(RuntimeConfig(store=config))
    assert repr(StoreConfig(None, tmp_path)).startswith("StoreConfig(url=None, data_dir=")
