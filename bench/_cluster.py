"""Shared set-up for the benchmarks: a local Ray instance with token auth."""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_ray(namespace: str) -> None:
    # Ray reads the auth mode at import time: configure it first.
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
    import ray

    ray.init(
        num_cpus=os.cpu_count() or 2,
        include_dashboard=False,
        namespace=namespace,
        logging_level=logging.WARNING,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
