"""deploy/kubernetes: every overlay renders (``kubectl kustomize``), every object validates against the
Kubernetes OpenAPI schemas offline (``kubernetes-validate``, schemas bundled; the two custom resources, KEDA's
ScaledObject and the Prometheus Operator's ServiceMonitor, against the fields their CRDs require), and the
manifests agree with the service: probe paths are its routes, ports its port, the grace period outlasts the
preStop wait + drain + uvicorn's shutdown, the ingress's body limits and rates are the app's own.

No cluster can be started here, so nothing is applied; ``drift`` lists every disagreement and a test feeds it
drifted copies to show that each one is caught.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from unittest import mock

import kubernetes_validate
import pytest
import yaml
from starlette.applications import Starlette
from starlette.routing import Route

from backend.config import Settings
from backend.edge.http_limits import MAX_DRAFT_BODY_BYTES
from backend.server import server_config

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "deploy" / "kubernetes"
OVERLAYS = ["gpu", "cpu-trial"]
KUBERNETES_VERSION = "1.32.0"
"""The oldest Kubernetes these manifests are written for (kubectl here is 1.32)."""
EXTRA_ENV = {"CAPTIONS_PRESTOP_DELAY_S", "CAPTIONS_PRESTOP_WAIT_S"}
"""ConfigMap keys the preStop hook reads, not the service."""
CUSTOM_RESOURCES = {
    ("keda.sh/v1alpha1", "ScaledObject"): ["spec.scaleTargetRef.name", "spec.triggers"],
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ["spec.selector", "spec.endpoints"],
}
"""Fields the CRDs require (KEDA 2.x, Prometheus Operator 0.7x); their full schemas are not bundled."""


def kubectl() -> str:
    """kubectl with a kustomize of v4 or later (``labels``, ``components``, ``patches``)."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail("kubectl is missing: make system-deps installs Debian's kubernetes-client")
    version = subprocess.run([found, "version", "--client", "-o", "json"], capture_output=True, text=True)
    kustomize = json.loads(version.stdout or "{}").get("kustomizeVersion", "v0")
    if int(kustomize.lstrip("v").split(".")[0]) < 4:
        pytest.skip(
            f"kubectl's kustomize is {kustomize}; the manifests need v4+ (kubectl 1.21+, pkgs.k8s.io)"
        )
    return found


def render(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(path)], check=True, capture_output=True, text=True
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {overlay: render(KUBE / "overlays" / overlay) for overlay in OVERLAYS}


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def nginx_bytes(value: str) -> int:
    units = {"k": 1024, "m": 1024 * 1024}
    return int(value[:-1]) * units[value[-1]] if value[-1] in units else int(value)


def app_routes() -> set[str]:
    from backend.app import create_app

    app = create_app(Settings())
    return {r.path for r in app.routes if isinstance(r, Route)}


def settings_of(env: dict[str, str]) -> Settings:
    """The service's settings as the pod's environment gives them (values parsed as the service does)."""
    service_env = {k: v for k, v in env.items() if k not in EXTRA_ENV}
    others = {k: v for k, v in os.environ.items() if not k.startswith("CAPTIONS_")}
    with mock.patch.dict(os.environ, others | service_env, clear=True):
        return Settings()


def drift(objects: list[dict[str, Any]], routes: set[str]) -> list[str]:
    """Every way the rendered manifests disagree with the service's settings (empty: none)."""
    errors: list[str] = []
    env = {k: str(v) for k, v in one(objects, "ConfigMap", "captions-config")["data"].items()}
    unknown = {
        k
        for k in env
        if k not in EXTRA_ENV and k.removeprefix("CAPTIONS_").lower() not in Settings.model_fields
    }
    if unknown:
        errors.append(f"ConfigMap keys the service does not read: {sorted(unknown)}")
    settings = settings_of(env)

    pod = one(objects, "Deployment", "captions")["spec"]["template"]["spec"]
    (app,) = [c for c in pod["containers"] if c["name"] == "captions"]
    ports = {p["name"]: p["containerPort"] for p in app["ports"]}
    if ports.get("http") != settings.port:
        errors.append(f"containerPort {ports.get('http')} is not CAPTIONS_PORT {settings.port}")
    for probe, path in (
        ("startupProbe", "/readyz"),
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
    ):
        get = app.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("path") not in routes:
            errors.append(f"{probe} asks {get.get('path')}, the service answers {path}")
        if get.get("port") not in ("http", settings.port):
            errors.append(f"{probe} probes port {get.get('port')}, the service listens on {settings.port}")
    startup = app.get("startupProbe", {})
    if startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3) < 300:
        errors.append("the startup probe gives a first model load less than 5 minutes")

    uvicorn_s = server_config(Starlette(), settings, "127.0.0.1", settings.port).timeout_graceful_shutdown
    stop_s = (
        float(env.get("CAPTIONS_PRESTOP_DELAY_S", 0))
        + float(env.get("CAPTIONS_PRESTOP_WAIT_S", 0))
        + settings.drain_timeout_s
        + (uvicorn_s or 0)
    )
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if grace < stop_s + 10:
        errors.append(f"terminationGracePeriodSeconds {grace} < preStop + drain + uvicorn {stop_s} + 10 s")

    service = one(objects, "Service", "captions")
    if service["spec"]["ports"][0]["targetPort"] not in ("http", settings.port):
        errors.append("the Service does not target the app's port")
    limits = {
        "captions": settings.max_body_bytes,
        "captions-uploads": settings.max_upload_body_bytes,
        "captions-drafts": MAX_DRAFT_BODY_BYTES,
        "captions-anonymous": settings.max_anonymous_body_bytes,
        "captions-views": settings.max_body_bytes,
    }
    for name, app_bytes in limits.items():
        notes = one(objects, "Ingress", name)["metadata"]["annotations"]
        cap = nginx_bytes(notes["nginx.ingress.kubernetes.io/proxy-body-size"])
        if not app_bytes <= cap < app_bytes + 2048:
            errors.append(f"Ingress {name} takes bodies of {cap} bytes, the app {app_bytes}")
        for timeout in ("proxy-read-timeout", "proxy-send-timeout"):
            if int(notes[f"nginx.ingress.kubernetes.io/{timeout}"]) < 3600:
                errors.append(f"Ingress {name} {timeout} ends WebSockets before an hour")
    anonymous = one(objects, "Ingress", "captions-anonymous")["metadata"]["annotations"]
    if int(anonymous["nginx.ingress.kubernetes.io/limit-rpm"]) != settings.anonymous_requests_per_minute:
        errors.append("the ingress's no-login rate is not CAPTIONS_ANONYMOUS_REQUESTS_PER_MINUTE")
    views = one(objects, "Ingress", "captions-views")["metadata"]["annotations"]
    if int(views["nginx.ingress.kubernetes.io/limit-connections"]) != settings.max_viewers_per_client:
        errors.append("the ingress's views per address are not CAPTIONS_MAX_VIEWERS_PER_CLIENT")
    return errors


# ----- rendering and schemas --------------------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_validates_against_the_kubernetes_schemas(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    objects = rendered[overlay]
    assert {o["kind"] for o in objects} >= {"Deployment", "Service", "Ingress", "PodDisruptionBudget", "Job"}
    for obj in objects:
        key = (obj["apiVersion"], obj["kind"])
        if key in CUSTOM_RESOURCES:
            for dotted in CUSTOM_RESOURCES[key]:
                value: Any = obj
                for part in dotted.split("."):
                    value = value[part]
                assert value, f"{obj['kind']}/{obj['metadata']['name']}: {dotted} is empty"
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)  # raises ValidationError
        assert obj["metadata"].get("namespace", "captions") == "captions" or obj["kind"] == "Namespace"


def test_the_optional_cookie_affinity_component_renders_and_validates(tmp_path: Path) -> None:
    overlay = tmp_path / "affinity"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(KUBE / "overlays" / "cpu-trial", overlay)],
                "components": [os.path.relpath(KUBE / "components" / "cookie-affinity", overlay)],
            }
        )
    )
    objects = render(overlay)
    for ingress in [o for o in objects if o["kind"] == "Ingress"]:
        kubernetes_validate.validate(ingress, KUBERNETES_VERSION, strict=True)
        notes = ingress["metadata"]["annotations"]
        assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
        assert notes["nginx.ingress.kubernetes.io/session-cookie-name"] == "captions_affinity"


# ----- agreement with the service ---------------------------------------------------------------------------
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_ports_grace_period_and_body_limits_agree_with_the_service(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    assert drift(rendered[overlay], app_routes()) == []


def test_each_kind_of_drift_is_caught(rendered: dict[str, list[dict[str, Any]]]) -> None:
    routes = app_routes()

    def drifted(change: Any) -> list[str]:
        objects = copy.deepcopy(rendered["gpu"])
        change(objects)
        return drift(objects, routes)

    def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
        return one(objects, "Deployment", "captions")["spec"]["template"]["spec"]["containers"][0]

    def pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
        return one(objects, "Deployment", "captions")["spec"]["template"]["spec"]

    def config(objects: list[dict[str, Any]]) -> dict[str, Any]:
        return one(objects, "ConfigMap", "captions-config")["data"]

    cases = {
        "readiness path": lambda o: container(o)["readinessProbe"]["httpGet"].update(path="/ready"),
        "liveness path": lambda o: container(o)["livenessProbe"]["httpGet"].update(path="/health"),
        "container port": lambda o: container(o)["ports"][0].update(containerPort=8080),
        "service port": lambda o: config(o).update(CAPTIONS_PORT="9000"),
        "grace period": lambda o: pod(o).update(terminationGracePeriodSeconds=60),
        "longer drain": lambda o: config(o).update(CAPTIONS_DRAIN_TIMEOUT_S="300"),
        "body limit": lambda o: one(o, "Ingress", "captions")["metadata"]["annotations"].update(
            {"nginx.ingress.kubernetes.io/proxy-body-size": "1m"}
        ),
        "unknown setting": lambda o: config(o).update(CAPTIONS_DRAIN_TIMEOUT="30"),
    }
    for what, change in cases.items():
        assert drifted(change), f"a drifted {what} went unnoticed"


# ----- the shape of a safe rollout --------------------------------------------------------------------------
def test_rollouts_and_disruptions_move_one_replicas_sessions_at_a_time(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for objects in rendered.values():
        deployment = one(objects, "Deployment", "captions")
        assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
        assert one(objects, "PodDisruptionBudget", "captions")["spec"]["maxUnavailable"] == 1
        job = one(objects, "Job", "captions-migrate")
        assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["captions", "migrate"]
        assert job["spec"].get("parallelism", 1) == 1 and job["spec"].get("completions", 1) == 1


def test_secrets_come_as_files_the_entrypoint_reads_and_none_is_rendered(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    from tests.test_deploy import entrypoint

    for objects in rendered.values():
        assert not [o for o in objects if o["kind"] == "Secret"], (
            "secrets are created with kubectl, not kept here"
        )
        app = one(objects, "Deployment", "captions")["spec"]["template"]["spec"]["containers"][0]
        files = {e["name"].removesuffix("_FILE") for e in app["env"] if e["name"].endswith("_FILE")}
        assert files == set(entrypoint.FILE_SETTINGS)
        mounts = {m["mountPath"] for m in app["volumeMounts"]}
        assert all(e["value"].rsplit("/", 1)[0] in mounts for e in app["env"] if e["name"].endswith("_FILE"))


def test_gpu_replicas_take_one_gpu_each_and_scale_on_live_sessions(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    from backend.edge.metrics import Metrics

    objects = rendered["gpu"]
    pod = one(objects, "Deployment", "captions")["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    config = one(objects, "ConfigMap", "captions-config")["data"]
    assert config["CAPTIONS_DEVICE"] == "cuda"
    (trigger,) = one(objects, "ScaledObject", "captions")["spec"]["triggers"]
    gauge = Metrics().sessions.describe()[0].name
    assert gauge in trigger["metadata"]["query"]
    assert int(trigger["metadata"]["threshold"]) < int(config["CAPTIONS_MAX_SESSIONS"])
    scale_down = one(objects, "ScaledObject", "captions")["spec"]["advanced"]["horizontalPodAutoscalerConfig"]
    assert scale_down["behavior"]["scaleDown"]["policies"] == [
        {"type": "Pods", "value": 1, "periodSeconds": 900}
    ]
    assert float(config["CAPTIONS_PRESTOP_WAIT_S"]) >= 300  # scale-down waits for sessions to end
    cpu = one(rendered["cpu-trial"], "Deployment", "captions")["spec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in cpu["resources"].get("limits", {})


def test_the_app_is_reachable_only_from_the_ingress_and_prometheus(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    objects = rendered["gpu"]
    policy = one(objects, "NetworkPolicy", "captions-app")["spec"]
    sources = {
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for rule in policy["ingress"]
        for peer in rule["from"]
    }
    assert sources == {"ingress-nginx", "monitoring"}
    database = one(objects, "NetworkPolicy", "captions-database")["spec"]
    assert database["ingress"][0]["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "captions"}}}
    ]
    config = one(objects, "ConfigMap", "captions-config")["data"]
    assert Settings(trusted_proxies=config["CAPTIONS_TRUSTED_PROXIES"]).trusted_proxies
