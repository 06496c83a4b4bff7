"""The Kubernetes manifests and the Dockerfile stay in step with the code.

The manifests are checked as they would be applied: every overlay rendered
with ``kubectl kustomize`` (tests/k8s_render.py). Their schemas are checked
in tests/test_k8s.py.
"""

from __future__ import annotations

import tomllib

import pytest

from tests.k8s_render import (
    ROOT,
    SECRET,
    VARIANTS,
    containers,
    documented_secret_keys,
    env_of,
    find,
    rendered,
    secret_refs,
)


@pytest.mark.parametrize("variant", VARIANTS)
def test_manifests_use_only_documented_secret_keys(variant: str) -> None:
    documented = documented_secret_keys()
    refs = [ref for doc in rendered(variant) for ref in secret_refs(doc)]
    assert refs
    assert {r["key"] for r in refs} <= documented, "undocumented secret keys"
    assert {r["name"] for r in refs} == {SECRET}
    for doc in rendered(variant):
        assert doc["metadata"]["name"]


def test_the_readme_documents_every_key_the_manifests_use() -> None:
    used = {ref["key"] for v in VARIANTS for doc in rendered(v) for ref in secret_refs(doc)}
    assert documented_secret_keys() == used, "README documents keys nothing reads"


@pytest.mark.parametrize("variant", VARIANTS)
def test_ray_token_auth_is_on_everywhere_ray_runs(variant: str) -> None:
    docs = rendered(variant)
    ray_containers = [
        (where, c)
        for where, c in containers(docs)
        # Redis is the one container that runs no Ray.
        if not where.startswith("StatefulSet/redis")
    ]
    assert {w.split(" ")[0] for w, _ in ray_containers} == {
        "Deployment/yeaft-gateway",
        "RayCluster/yeaft",
        "RayCluster",
    }
    # the gateway and its wait for the head, the head, the workers, the autoscaler
    assert len(ray_containers) == 5
    for where, container in ray_containers:
        env = env_of(container)
        assert env.get("RAY_AUTH_MODE", {}).get("value") == "token", where
        token = env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
        assert token == {"name": SECRET, "key": "ray-token"}, where


def test_local_overlay_secret_has_every_required_key() -> None:
    (secret,) = find(rendered("local"), "Secret", SECRET)
    required = {
        r["key"] for doc in rendered("local") for r in secret_refs(doc) if not r.get("optional")
    }
    assert required <= set(secret["data"])


def test_dockerfile_copies_every_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    for pattern in packages:
        name = pattern.rstrip("*")
        assert f"COPY {name} {name}" in dockerfile
