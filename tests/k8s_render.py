"""Rendering and walking the Kubernetes manifests under k8s/ for the tests.

Every overlay is rendered with ``kubectl kustomize`` (kustomize v5 is built
into kubectl 1.27 and later). There is no Kubernetes cluster in CI: the tests
check what would be applied, object by object, against the schemas.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "k8s"
OVERLAYS = ("local", "production")
# The production overlay with the managed-Redis component added, rendered
# through a kustomization made for the test (see render_with_components).
MANAGED = "production+managed-redis"
SECRET = "yeaft-secrets"

Doc = dict[str, Any]

# kubectl 1.27 embeds kustomize v5, which the overlays are written for
# (`labels`, components, patches with targets).
MIN_KUSTOMIZE = (5, 0)


def kubectl() -> str:
    """The kubectl binary, or a test failure that says how to get one (never a skip)."""
    path = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if path is None:
        pytest.fail(
            "kubectl is needed to render the k8s/ overlays and is not on PATH. "
            ".ci/run installs it; by hand: apt-get install kubectl (version 1.27 or "
            "later, for kustomize v5), or set KUBECTL to a kubectl binary."
        )
    out = subprocess.run(
        [path, "version", "--client", "-o", "json"], capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout).get("kustomizeVersion", "")
    match = re.match(r"v(\d+)\.(\d+)", found)
    if match is None or (int(match[1]), int(match[2])) < MIN_KUSTOMIZE:
        pytest.fail(
            f"{path} embeds kustomize {found or 'of an unknown version'}; the k8s/ overlays "
            "need kustomize v5 (kubectl 1.27 or later)"
        )
    return path


def render(directory: Path) -> list[Doc]:
    """The objects ``kubectl kustomize directory`` renders, in its order."""
    out = subprocess.run(
        [kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60
    )
    if out.returncode != 0:
        pytest.fail(f"kubectl kustomize {directory} failed:\n{out.stderr}")
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def render_with_components(scratch: Path, overlay: str, *components: str) -> list[Doc]:
    """Render ``overlay`` with kustomize components added, as a user would in the overlay."""
    scratch.mkdir(parents=True, exist_ok=True)
    # kustomize refuses absolute paths to other kustomizations.
    rel = Path(os.path.relpath(K8S, scratch))
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [str(rel / "overlays" / overlay)],
        "components": [str(rel / "components" / c) for c in components],
    }
    (scratch / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return render(scratch)


@cache
def rendered(variant: str) -> tuple[Doc, ...]:
    """One variant (an overlay, or MANAGED), rendered once per test session."""
    if variant == MANAGED:
        with tempfile.TemporaryDirectory() as scratch:
            return tuple(render_with_components(Path(scratch), "production", "managed-redis"))
    return tuple(render(K8S / "overlays" / variant))


VARIANTS = (*OVERLAYS, MANAGED)


def find(docs: list[Doc] | tuple[Doc, ...], kind: str, name: str | None = None) -> list[Doc]:
    """The objects of ``kind`` (and ``name``, when given)."""
    return [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]


def one(docs: list[Doc] | tuple[Doc, ...], kind: str, name: str) -> Doc:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def secret_refs(node: Any) -> list[Doc]:
    """Every ``secretKeyRef`` anywhere under ``node``."""
    found: list[Doc] = []
    if isinstance(node, dict):
        if "secretKeyRef" in node:
            found.append(node["secretKeyRef"])
        for value in node.values():
            found += secret_refs(value)
    elif isinstance(node, list):
        for value in node:
            found += secret_refs(value)
    return found


def pod_templates(doc: Doc) -> Iterator[tuple[str, Doc]]:
    """Each pod template of a workload, named for messages: Deployment, StatefulSet, RayCluster."""
    name = f"{doc['kind']}/{doc['metadata']['name']}"
    spec = doc.get("spec", {})
    if doc["kind"] in ("Deployment", "StatefulSet"):
        yield name, spec["template"]
    elif doc["kind"] == "RayCluster":
        yield f"{name} head", spec["headGroupSpec"]["template"]
        for group in spec.get("workerGroupSpecs", []):
            yield f"{name} {group['groupName']}", group["template"]


def containers(docs: list[Doc] | tuple[Doc, ...]) -> Iterator[tuple[str, Doc]]:
    """Every container the rendered objects would start, the RayCluster's autoscaler included."""
    for doc in docs:
        for where, template in pod_templates(doc):
            spec = template["spec"]
            for container in spec.get("initContainers", []) + spec.get("containers", []):
                yield f"{where} {container['name']}", container
        if doc["kind"] == "RayCluster" and doc["spec"].get("enableInTreeAutoscaling"):
            # KubeRay adds this sidecar to the head pod; autoscalerOptions is its spec.
            yield "RayCluster autoscaler", doc["spec"].get("autoscalerOptions", {})


def env_of(container: Doc) -> dict[str, Doc]:
    return {e["name"]: e for e in container.get("env", [])}


def documented_secret_keys() -> set[str]:
    """The secret keys k8s/README.md's `kubectl create secret` command sets."""
    return set(re.findall(r"--from-literal=([a-z-]+)=", (K8S / "README.md").read_text()))
