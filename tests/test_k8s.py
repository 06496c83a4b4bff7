"""Every k8s/ overlay renders, and every rendered object is valid.

Built-in kinds are validated with kubernetes-validate against the Kubernetes
API schemas it bundles (strict: an unknown field, a typo, is an error), for
the pinned KUBERNETES_VERSION; the RayCluster against k8s/schemas/, the
schema of KubeRay's CRD. Then what the schemas cannot say: the pieces refer
to each other correctly, and the deployment keeps the promises of the README
(probes, disruption budget, autoscaling bounds, AOF, token auth, ...).
Each variant is rendered once per session (tests/k8s_render.py).
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import schema_contents
from referencing import Registry, Resource

from gateway.settings import secret_problem
from personas.loader import parse_persona
from tests.k8s_render import (
    K8S,
    MANAGED,
    OVERLAYS,
    ROOT,
    SECRET,
    VARIANTS,
    Doc,
    containers,
    env_of,
    find,
    one,
    pod_templates,
    rendered,
)

# The Kubernetes version the manifests are validated for; kubernetes-validate
# bundles its API schemas (1.25 to 1.37 in kubernetes-validate 1.37.0).
KUBERNETES_VERSION = "1.33.0"
RAYCLUSTER_SCHEMA = K8S / "schemas" / "raycluster-v1.schema.yaml"
# The gateway's routes that stay inside the cluster.
INTERNAL_ROUTES = {"/metrics", "/healthz"}


def docs(variant: str) -> list[Doc]:
    """A deep copy, so that no test can change what another one sees."""
    return copy.deepcopy(list(rendered(variant)))


@cache
def raycluster_validator() -> jsonschema.Draft202012Validator:
    schema = yaml.safe_load(RAYCLUSTER_SCHEMA.read_text())
    # The strict core/v1 definitions kubernetes-validate bundles for the pinned version.
    major_minor = ".".join(KUBERNETES_VERSION.split(".")[:2])
    definitions = schema_contents(
        f"kubernetes-json-schema/v{major_minor}.0-local-strict/_definitions.json",
        KUBERNETES_VERSION,
    )
    registry: Registry[Any] = Registry().with_resources(
        [
            (definitions["$id"], Resource.from_contents(definitions)),
            (schema["$id"], Resource.from_contents(schema)),
        ]
    )
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, registry=registry)


def schema_errors(doc: Doc) -> list[str]:
    """Why ``doc`` does not match its schema (empty when it does)."""
    if doc["apiVersion"] == "ray.io/v1":
        return [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in raycluster_validator().iter_errors(doc)
        ]
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{'/'.join(map(str, e.path))}: {e.message}"]
    return []


# -- schemas -------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_object_matches_its_schema(variant: str) -> None:
    rendered_docs = docs(variant)
    kinds = {d["kind"] for d in rendered_docs}
    assert {"Namespace", "Deployment", "Service", "Ingress", "RayCluster"} <= kinds
    assert {"PodDisruptionBudget", "ConfigMap"} <= kinds
    problems = {
        f"{d['kind']}/{d['metadata']['name']}": errors
        for d in rendered_docs
        if (errors := schema_errors(d))
    }
    assert problems == {}


@pytest.mark.parametrize(
    ("kind", "name", "breakage"),
    [
        # A typo in a field name: the API server would drop it without a word.
        ("Deployment", "yeaft-gateway", ("spec.template.spec.containers.0", "readinesProbe", {})),
        ("Deployment", "yeaft-gateway", ("spec", "replicas", "two")),
        ("StatefulSet", "redis", ("spec", "volumeClaimTemplate", [])),
        ("Ingress", "yeaft-gateway", ("spec.rules.0.http.paths.0", "pathType", 3)),
        ("RayCluster", "yeaft", ("spec", "gcsFaultTolerance", {})),
        ("RayCluster", "yeaft", ("spec.workerGroupSpecs.0", "minReplicas", "1")),
        ("RayCluster", "yeaft", ("spec.autoscalerOptions", "upscalingMode", "Fast")),
        ("RayCluster", "yeaft", ("spec.headGroupSpec.rayStartParams", "num-cpus", 0)),
        # Deep inside a pod template: the core/v1 definitions apply.
        (
            "RayCluster",
            "yeaft",
            ("spec.headGroupSpec.template.spec.containers.0", "resource", {}),
        ),
        ("RayCluster", "yeaft", ("spec.gcsFaultToleranceOptions.redisPassword", "secret", "x")),
    ],
)
def test_a_broken_copy_fails_validation(
    kind: str, name: str, breakage: tuple[str, str, Any]
) -> None:
    doc = copy.deepcopy(one(docs("production"), kind, name))
    assert schema_errors(doc) == []
    where, key, value = breakage
    node: Any = doc
    for part in where.split("."):
        node = node[int(part)] if part.isdigit() else node[part]
    node[key] = value
    assert schema_errors(doc), f"{kind} with {where}.{key}={value!r} passed validation"


def test_a_raycluster_without_required_fields_fails() -> None:
    doc = copy.deepcopy(one(docs("local"), "RayCluster", "yeaft"))
    del doc["spec"]["workerGroupSpecs"][0]["groupName"]
    del doc["spec"]["headGroupSpec"]["template"]
    errors = schema_errors(doc)
    assert any("groupName" in e for e in errors) and any("template" in e for e in errors)


def test_the_raycluster_schema_names_its_source() -> None:
    head = RAYCLUSTER_SCHEMA.read_text().split("$schema")[0]
    assert "v1.7.0" in head and re.search(r"commit\s+#?\s*[0-9a-f]{40}", head)
    assert "ray.io_rayclusters.yaml" in head


# -- the RayCluster ------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_raycluster_head_autoscaler_and_fault_tolerance(variant: str) -> None:
    rendered_docs = docs(variant)
    spec = one(rendered_docs, "RayCluster", "yeaft")["spec"]
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    # KubeRay refuses CPU counts in both rayStartParams and the group's resources.
    assert "resources" not in head
    assert spec["enableInTreeAutoscaling"] is True
    assert spec["autoscalerOptions"]["idleTimeoutSeconds"] > 0
    (group,) = spec["workerGroupSpecs"]
    assert 1 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    assert group["maxReplicas"] > group["minReplicas"]
    ft = spec["gcsFaultToleranceOptions"]
    assert ft["redisPassword"]["valueFrom"]["secretKeyRef"] == {
        "name": SECRET,
        "key": "redis-password",
    }
    host = ft["redisAddress"].split(":")[0]
    redis_services = [s["metadata"]["name"] for s in find(rendered_docs, "Service", "redis")]
    if variant == MANAGED:
        assert not find(rendered_docs, "StatefulSet") and not redis_services
        assert host != "redis"
    else:
        assert host in redis_services
    # What KubeRay's admission rejects alongside gcsFaultToleranceOptions.
    head_env = env_of(head["template"]["spec"]["containers"][0])
    assert not {"REDIS_PASSWORD", "RAY_REDIS_ADDRESS", "REDIS_USERNAME"} & set(head_env)
    assert "ray.io/ft-enabled" not in one(rendered_docs, "RayCluster", "yeaft")["metadata"].get(
        "annotations", {}
    )
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", "yeaft")


def test_overlays_size_the_workers_differently() -> None:
    def bounds(variant: str) -> tuple[int, int]:
        (group,) = one(docs(variant), "RayCluster", "yeaft")["spec"]["workerGroupSpecs"]
        return group["minReplicas"], group["maxReplicas"]

    assert bounds("local")[1] <= 2
    assert bounds("production")[0] >= 3 and bounds("production")[1] >= 10


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_container_has_requests_and_limits(variant: str) -> None:
    seen = 0
    for where, container in containers(docs(variant)):
        seen += 1
        resources = container.get("resources", {})
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(resources.get(kind, {})), f"{where}: {kind}"
    # the gateway and its init container, head, workers, autoscaler, and redis
    # unless it is managed elsewhere
    assert seen == (5 if variant == MANAGED else 6)


@pytest.mark.parametrize("variant", OVERLAYS)
def test_images_are_retagged_everywhere(variant: str) -> None:
    images = {
        c["image"]
        for _, c in containers(docs(variant))
        if "image" in c and not c["image"].startswith("redis:")
    }
    assert len(images) == 1, images
    (image,) = images
    assert not image.endswith(":latest"), "a :latest tag makes kind and minikube pull"


# -- the gateway ---------------------------------------------------------------
def gateway(rendered_docs: list[Doc]) -> tuple[Doc, Doc]:
    deployment = one(rendered_docs, "Deployment", "yeaft-gateway")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, container


@pytest.mark.parametrize("variant", VARIANTS)
def test_gateway_probes_service_budget_and_ingress_fit_together(variant: str) -> None:
    rendered_docs = docs(variant)
    deployment, container = gateway(rendered_docs)
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["http"]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, probe
    assert env_of(container)["YEAFT_PORT"]["value"] == str(port)
    assert env_of(container)["YEAFT_HOST"]["value"] == "0.0.0.0"
    # The pod joins the cluster through KubeRay's head Service and, like
    # KubeRay's own workers, outlasts a head restart (GCS fault tolerance).
    cluster = one(rendered_docs, "RayCluster", "yeaft")["metadata"]["name"]
    assert f"ray start --address={cluster}-head-svc:6379 --num-cpus=0" in container["args"][0]
    assert "yeaft serve --ray-address auto" in container["args"][0]
    (wait,) = deployment["spec"]["template"]["spec"]["initContainers"]
    assert f"ray health-check --address {cluster}-head-svc:6379" in wait["args"][0]
    assert env_of(container)["RAY_gcs_rpc_server_reconnect_timeout_s"]["value"] == "600"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    service = one(rendered_docs, "Service", "yeaft-gateway")
    assert service["spec"]["selector"].items() <= labels.items()
    (spread,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert spread["labelSelector"]["matchLabels"].items() <= labels.items()
    pdb = one(rendered_docs, "PodDisruptionBudget", "yeaft-gateway")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/metrics"
    ingress = one(rendered_docs, "Ingress", "yeaft-gateway")
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    for rule in ingress["spec"]["rules"]:
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            assert backend["name"] == "yeaft-gateway" and backend["port"]["name"] in service_ports
    for key in ("proxy-read-timeout", "proxy-send-timeout"):
        # Longer than a watched group's quiet spells (clients ping once a minute).
        assert int(ingress["metadata"]["annotations"][f"nginx.ingress.kubernetes.io/{key}"]) >= 120


def gateway_routes() -> set[str]:
    """The paths the gateway serves, read from its route declarations."""
    routes: set[str] = set()
    pattern = re.compile(
        r"(?:@router\.(?:get|post|put|patch|delete)|add_api_route|add_api_websocket_route"
        r"|\.mount)\(\s*\"(/[^\"]*)\""
    )
    for path in (ROOT / "gateway").glob("*.py"):
        routes |= set(pattern.findall(path.read_text()))
    return routes


def test_the_ingress_routes_every_public_path_and_no_internal_one() -> None:
    ingress = one(docs("production"), "Ingress", "yeaft-gateway")
    paths = [p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]

    def routed(route: str) -> bool:
        for p in paths:
            prefix = p["path"].rstrip("/")
            if p["pathType"] == "Exact" and route == p["path"]:
                return True
            if p["pathType"] == "Prefix" and prefix and (route + "/").startswith(prefix + "/"):
                return True
        return False

    routes = gateway_routes()
    assert {"/", "/ws", "/api/login", "/healthz", "/metrics"} <= routes
    assert [r for r in sorted(routes - INTERNAL_ROUTES) if not routed(r)] == []
    assert [r for r in sorted(INTERNAL_ROUTES) if routed(r)] == []


def test_replicas_and_autoscaling_per_overlay() -> None:
    local = docs("local")
    assert gateway(local)[0]["spec"]["replicas"] == 1
    assert not find(local, "HorizontalPodAutoscaler")
    production = docs("production")
    deployment, container = gateway(production)
    # The HPA owns the count; a count in the Deployment would fight it on apply.
    assert "replicas" not in deployment["spec"]
    hpa = one(production, "HorizontalPodAutoscaler", "yeaft-gateway")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "yeaft-gateway",
    }
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    # Utilisation targets need CPU requests to measure against.
    assert container["resources"]["requests"]["cpu"]
    assert one(production, "Ingress", "yeaft-gateway")["spec"]["tls"]


# -- Redis ---------------------------------------------------------------------
@pytest.mark.parametrize("variant", OVERLAYS)
def test_redis_is_a_statefulset_with_aof_on_a_volume(variant: str) -> None:
    rendered_docs = docs(variant)
    statefulset = one(rendered_docs, "StatefulSet", "redis")
    service = one(rendered_docs, "Service", statefulset["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == "/data"
    config = one(rendered_docs, "ConfigMap", "redis-config")["data"]["redis.conf"]
    settings = dict(line.split(None, 1) for line in config.splitlines() if line and line[0] != "#")
    assert settings["appendonly"] == "yes"
    assert settings["dir"] == "/data"
    assert settings["maxmemory-policy"] == "noeviction"
    # The password reaches redis-server on stdin, not on its command line.
    assert "$REDIS_PASSWORD" in container["args"][0] and "requirepass" in container["args"][0]


def test_the_local_secret_works_with_the_local_redis_and_gateway() -> None:
    import base64

    secret = one(docs("local"), "Secret", SECRET)
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert secret_problem(data["jwt-secret"]) is None
    url = re.fullmatch(r"redis://:([^@]+)@([a-z0-9-]+):6379/0", data["redis-url"])
    assert url is not None
    assert url[1] == data["redis-password"] and url[2] == "redis"
    assert all("dev" in value for value in data.values()), "local values must look like dev ones"
    assert not find(docs("production"), "Secret"), "production must not ship a secret"


# -- configuration -------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_personas_and_mcp_config_are_mounted_where_the_gateway_says(variant: str) -> None:
    rendered_docs = docs(variant)
    configmaps = {c["metadata"]["name"] for c in find(rendered_docs, "ConfigMap")}
    _, container = gateway(rendered_docs)
    env = env_of(container)
    personas_dir = env["YEAFT_PERSONAS_DIR"]["value"]
    mcp_file = env["YEAFT_MCP_CONFIG"]["value"]
    expected = {"yeaft-personas": personas_dir, "yeaft-mcp": mcp_file.rsplit("/", 1)[0]}
    checked = 0
    for doc in rendered_docs:
        for where, template in pod_templates(doc):
            volumes = {
                v["name"]: v["configMap"]["name"]
                for v in template["spec"].get("volumes", [])
                if "configMap" in v
            }
            assert set(volumes.values()) <= configmaps, where
            if doc["kind"] == "StatefulSet":
                continue
            for c in template["spec"]["containers"]:
                mounts = {
                    volumes[m["name"]]: m["mountPath"]
                    for m in c["volumeMounts"]
                    if m["name"] in volumes
                }
                assert mounts == expected, f"{where}: the actors read these paths on every node"
                checked += 1
    assert checked == 3  # gateway, head, workers
    mcp = json.loads(one(rendered_docs, "ConfigMap", "yeaft-mcp")["data"]["mcp.json"])
    assert isinstance(mcp["mcpServers"], dict)


def test_persona_files_in_the_configmap_parse() -> None:
    data = one(docs("local"), "ConfigMap", "yeaft-personas")["data"]
    assert data, "the local overlay ships an example persona"
    for name, text in data.items():
        persona = parse_persona(text, name, expected_id=name.removesuffix(".md"))
        assert persona.id == name.removesuffix(".md")


@pytest.mark.parametrize("variant", VARIANTS)
def test_ray_pods_are_scraped_on_their_metrics_port(variant: str) -> None:
    cluster = one(docs(variant), "RayCluster", "yeaft")
    for where, template in pod_templates(cluster):
        port = template["metadata"]["annotations"]["prometheus.io/port"]
        (container,) = template["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert str(ports["metrics"]) == port, where


# -- the gateway's environment -------------------------------------------------
def settings_variables() -> set[str]:
    """Every YEAFT_* variable the gateway's and the engine's settings read."""
    from pydantic import AliasChoices

    from engine.settings import EngineSettings
    from gateway.settings import GatewaySettings

    names: set[str] = set()
    for settings in (GatewaySettings, EngineSettings):
        for field, info in settings.model_fields.items():
            names.add(f"YEAFT_{field.upper()}")
            alias = info.validation_alias
            if isinstance(alias, AliasChoices):
                names |= {c for c in alias.choices if isinstance(c, str)}
            elif isinstance(alias, str):
                names.add(alias)
    return names


# Read by a part of the project that arrives separately (the MCP servers
# file, engine/mcp); listed so that its name is still checked for typos.
NOT_YET_READ = {"YEAFT_MCP_CONFIG"}


def test_the_gateway_sets_only_variables_the_project_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import base64

    from gateway.settings import GatewaySettings

    rendered_docs = docs("local")
    _, container = gateway(rendered_docs)
    env = env_of(container)
    yeaft = {name for name in env if name.startswith("YEAFT_")}
    assert yeaft - settings_variables() <= NOT_YET_READ
    # The settings the gateway starts with, from that environment and the secret.
    secret = {
        k: base64.b64decode(v).decode()
        for k, v in one(rendered_docs, "Secret", SECRET)["data"].items()
    }
    for name in [n for n in os.environ if n.startswith("YEAFT_")]:
        monkeypatch.delenv(name)
    for name, var in env.items():
        if "value" in var:
            monkeypatch.setenv(name, var["value"])
        elif ref := var["valueFrom"].get("secretKeyRef"):
            if ref["key"] in secret:
                monkeypatch.setenv(name, secret[ref["key"]])
    settings = GatewaySettings()
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(settings.persona_dir()) == mounts["personas"]
    assert str(settings.data_dir) == mounts["data"]
    assert (settings.host, settings.port) == ("0.0.0.0", 8765)
    assert settings.redis_url == secret["redis-url"]
    assert settings.jwt_key() == secret["jwt-secret"]
