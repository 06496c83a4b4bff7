"""The Kubernetes manifests and the Dockerfile stay in step with the code."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "secretKeyRef" in node:
            found.append(node["secretKeyRef"])
        for value in node.values():
            found += walk(value)
    elif isinstance(node, list):
        for value in node:
            found += walk(value)
    return found


def test_manifests_parse_and_use_only_documented_secret_keys() -> None:
    documented = set(re.findall(r"--from-literal=([a-z-]+)=", (ROOT / "k8s/README.md").read_text()))
    refs: list[dict[str, Any]] = []
    for path in sorted((ROOT / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["metadata"]["name"]
            refs += walk(doc)
    assert refs and {r["key"] for r in refs} <= documented
    assert {r["name"] for r in refs} == {"yeaft-secrets"}


def test_ray_token_auth_is_on_everywhere_ray_runs() -> None:
    for name in ("raycluster.yaml", "gateway.yaml"):
        text = (ROOT / "k8s" / name).read_text()
        assert "RAY_AUTH_MODE, value: token" in text and "ray-token" in text


def test_dockerfile_copies_every_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    for pattern in packages:
        name = pattern.rstrip("*")
        assert f"COPY {name} {name}" in dockerfile
