"""The Kubernetes manifests (``deploy/kubernetes/``) against the Kubernetes API's own schemas (kubernetes-validate
bundles them: no cluster, no network), and against bookchat: every variable they set is a setting, the pods run as
the image's non-root user on a read-only root, and the web pods are probed where the manual says."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest
import yaml

from bookchat.conf import SETTINGS
from tests.conftest import REPO

MANIFESTS = REPO / "deploy" / "kubernetes"
KUBERNETES = "1.33"  # the API version the manifests are checked against (strict: no unknown fields)


def resources() -> list[tuple[str, dict]]:
    return [(path.name, doc) for path in sorted(MANIFESTS.glob("*.yaml")) if path.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def pods() -> list[tuple[str, dict]]:
    return [(doc["metadata"]["name"], doc["spec"]["template"]["spec"]) for _, doc in resources()
            if doc["kind"] in ("Deployment", "Job")]


@pytest.mark.parametrize(("name", "doc"), resources(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_every_manifest_is_valid_for_the_kubernetes_api(name, doc):
    kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_a_manifest_with_an_unknown_field_is_caught():
    _, web = next((n, d) for n, d in resources() if d["kind"] == "Deployment")
    broken = yaml.safe_load(yaml.safe_dump(web))
    broken["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # a typo of readinessProbe
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)


def test_the_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text(encoding="utf-8"))
    files = {path.name for path in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    assert [i["name"] for i in kustomization["images"]] == ["bookchat"]


def test_every_variable_the_manifests_set_is_a_bookchat_setting():
    known = {spec.env for spec in SETTINGS} | {"DATABASE_URL", "PORT", "HOST"}
    named = set()
    for _, doc in resources():
        if doc["kind"] == "ConfigMap":
            named |= set(doc["data"])
    for _, spec in pods():
        for container in spec["containers"]:
            named |= {e["name"] for e in container.get("env", [])}
    unknown = {n for n in named if re.sub(r"_FILE$", "", n) not in known}
    assert not unknown, unknown


def test_pods_run_as_the_images_user_on_a_read_only_root():
    containerfile = (REPO / "deploy" / "Containerfile").read_text(encoding="utf-8")
    uid = re.search(r"--uid (\d+)", containerfile).group(1)
    for name, spec in pods():
        assert spec["securityContext"]["runAsNonRoot"] and str(spec["securityContext"]["runAsUser"]) == uid, name
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] and not context["allowPrivilegeEscalation"], name
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/data", "/tmp"} <= mounts, f"{name}: the only places it writes"


def test_web_pods_are_probed_where_the_manual_says_and_kept_through_disruptions():
    web = dict(pods())["bookchat-web"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/api/v1/ready"
    assert web["livenessProbe"]["httpGet"]["path"] == "/api/v1/health"
    budget = next(doc for _, doc in resources() if doc["kind"] == "PodDisruptionBudget")
    deployment = next(doc for _, doc in resources() if doc["metadata"]["name"] == "bookchat-web"
                      and doc["kind"] == "Deployment")
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    assert deployment["spec"]["replicas"] > budget["spec"]["minAvailable"]
