"""The Kubernetes manifests (``deploy/kubernetes/``) against the Kubernetes API's own schemas (kubernetes-validate
bundles them: no cluster, no network), and against bookchat: every variable they set is a setting, the pods run as
the image's non-root user on a read-only root, the web pods are probed where the manual says and the worker by its
heartbeat. Both deployments,
the manifests and ``deploy/compose.yaml``, give every web replica the metrics token that turns on /metrics, and the
manual's Prometheus scrape configs find those replicas."""

from __future__ import annotations

import copy
import re

import kubernetes_validate
import pytest
import yaml

from bookchat.base.conf import SETTINGS
from bookchat.task_workers import BEAT_SECONDS
from tests.conftest import REPO

MANIFESTS = REPO / "deploy" / "kubernetes"
COMPOSE = REPO / "deploy" / "compose.yaml"
MANUAL = REPO / "docs" / "operating"
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


def test_the_bare_hosts_files_set_only_settings_and_agree_on_where_they_live():
    """deploy/bare: every variable the settings file sets (or leaves commented for the reader) is a setting, and the
    unit and the ``manage`` wrapper read the same settings file from the same checkout."""
    bare = REPO / "deploy" / "bare"
    known = {spec.env for spec in SETTINGS} | {"DATABASE_URL"}
    named = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", (bare / "bookchat.env").read_text(), re.M))
    assert "BOOKCHAT_SECRET_KEY_FILE" in named and "DATABASE_URL" in named
    unknown = {n for n in named if re.sub(r"_FILE$", "", n) not in known}
    assert not unknown, unknown
    unit = dict(line.split("=", 1) for line in (bare / "bookchat.service").read_text().splitlines()
                if "=" in line and not line.startswith("#"))
    manage = (bare / "manage").read_text()
    assert f"${{BOOKCHAT_ENV_FILE:-{unit['EnvironmentFile']}}}" in manage
    assert unit["ExecStart"].startswith(f"{unit['WorkingDirectory']}/.venv/bin/python manage.py serve ")
    assert unit["ReadWritePaths"] in (bare / "bookchat.env").read_text()  # BOOKCHAT_DATA_DIR


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


def test_the_worker_is_checked_by_its_heartbeat_in_both_deployments_as_the_manual_says():
    probe = dict(pods())["bookchat-worker"]["containers"][0]["livenessProbe"]
    command = probe["exec"]["command"]
    assert command[:3] == ["bookchat", "worker", "alive"]
    assert compose_file()["services"]["worker"]["healthcheck"]["test"] == ["CMD", *command]
    max_age = float(command[command.index("--max-age") + 1])
    assert max_age >= 2 * BEAT_SECONDS, "at least two of the heartbeat's intervals"
    assert ", ".join(f'"{part}"' for part in command) in (MANUAL / "running.md").read_text(encoding="utf-8")


# -- /metrics: the token each deployment gives its web replicas, and the manual's way for Prometheus to them ---
def compose_file() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def kubernetes_web_and_secret() -> tuple[dict, dict]:
    docs = [doc for _, doc in resources()]
    web = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "bookchat-web")
    return web, next(d for d in docs if d["kind"] == "Secret")


def compose_metrics_problems(compose: dict) -> list[str]:
    """Why a web replica of ``compose`` (deploy/compose.yaml, parsed) would not serve /metrics: no
    BOOKCHAT_METRICS_TOKEN_FILE naming a secret file, or that secret not given to it or not declared."""
    webs = [name for name in compose["services"] if name.startswith("web-")]
    problems = [] if len(webs) >= 2 else [f"two web replicas expected, found {webs}"]
    for name in webs:
        service = compose["services"][name]
        path = (service.get("environment") or {}).get("BOOKCHAT_METRICS_TOKEN_FILE", "")
        secret = path.removeprefix("/run/secrets/")
        if not path.startswith("/run/secrets/") or not secret:
            problems.append(f"{name}: no BOOKCHAT_METRICS_TOKEN_FILE under /run/secrets/ ({path!r})")
        elif secret not in service.get("secrets", []):
            problems.append(f"{name}: the secret {secret!r} is not given to it")
        elif secret not in (compose.get("secrets") or {}):
            problems.append(f"{name}: the secret {secret!r} is not declared")
    return problems


def kubernetes_metrics_problems(web: dict, secret: dict) -> list[str]:
    """Why the web Deployment would not be scraped: BOOKCHAT_METRICS_TOKEN not from a key the Secret holds, or
    pod annotations that don't send Prometheus (kubernetes_sd, the manual's relabelling) to /metrics on its port."""
    template = web["spec"]["template"]
    container = template["spec"]["containers"][0]
    ref = next((e.get("valueFrom", {}).get("secretKeyRef", {}) for e in container.get("env", [])
                if e["name"] == "BOOKCHAT_METRICS_TOKEN"), {})
    problems = []
    if ref.get("name") != secret["metadata"]["name"] or ref.get("key") not in secret["stringData"]:
        problems.append(f"BOOKCHAT_METRICS_TOKEN is not a key of the Secret: {ref}")
    annotations = template["metadata"].get("annotations") or {}
    wanted = {"prometheus.io/scrape": "true", "prometheus.io/path": "/metrics",
              "prometheus.io/port": str(container["readinessProbe"]["httpGet"]["port"])}
    problems += [f"annotation {k}={annotations.get(k)!r}, not {v!r}" for k, v in wanted.items()
                 if annotations.get(k) != v]
    return problems


def test_compose_gives_both_web_replicas_the_metrics_token_as_a_secret_file():
    compose = compose_file()
    assert compose_metrics_problems(compose) == []
    assert compose["secrets"]["metrics-token"]["file"].endswith("/metrics-token")
    assert "metrics-token" not in compose["services"]["worker"]["secrets"], "the worker serves no HTTP"


def test_the_kubernetes_web_pods_get_the_metrics_token_and_the_scrape_annotations():
    web, secret = kubernetes_web_and_secret()
    assert kubernetes_metrics_problems(web, secret) == []


def _without_web2_token(compose):
    del compose["services"]["web-2"]["environment"]["BOOKCHAT_METRICS_TOKEN_FILE"]


def _web1_not_given_the_secret(compose):
    compose["services"]["web-1"]["secrets"].remove("metrics-token")


def _secret_undeclared(compose):
    del compose["secrets"]["metrics-token"]


def _token_in_the_environment(compose):
    compose["services"]["web-1"]["environment"]["BOOKCHAT_METRICS_TOKEN_FILE"] = "the-token-itself"


@pytest.mark.parametrize("breaks", [_without_web2_token, _web1_not_given_the_secret, _secret_undeclared,
                                    _token_in_the_environment], ids=lambda f: f.__name__.strip("_"))
def test_a_compose_file_that_loses_the_token_is_caught(breaks):
    compose = compose_file()
    breaks(compose)
    assert compose_metrics_problems(compose), "a web replica without its token went unnoticed"


@pytest.mark.parametrize(("path", "value"), [
    (("spec", "template", "spec", "containers", 0, "env", -1, "valueFrom", "secretKeyRef", "key"), "metrics"),
    (("spec", "template", "metadata", "annotations", "prometheus.io/port"), "8080"),
    (("spec", "template", "metadata", "annotations", "prometheus.io/scrape"), True),
])
def test_a_web_deployment_that_loses_the_token_or_its_scrape_annotations_is_caught(path, value):
    web, secret = kubernetes_web_and_secret()
    broken = copy.deepcopy(web)
    assert broken["spec"]["template"]["spec"]["containers"][0]["env"][-1]["name"] == "BOOKCHAT_METRICS_TOKEN"
    target = broken
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    assert kubernetes_metrics_problems(broken, secret)


def secret_files_made(text: str) -> set[str]:
    """The files a shell block in ``text`` writes into secrets/: the loop's names and each ``> secrets/NAME``."""
    loop = re.search(r"for name in ([\w -]+); do", text).group(1).split()
    return set(loop) | set(re.findall(r"> secrets/([\w-]+)\b", text)) - {"name"}


@pytest.mark.parametrize("source", [COMPOSE, MANUAL / "deployment.md"], ids=lambda p: p.name)
def test_the_secrets_the_instructions_make_are_the_ones_compose_reads(source):
    assert secret_files_made(source.read_text(encoding="utf-8")) == set(compose_file()["secrets"])


def scrape_configs(section: str) -> list[dict]:
    """The YAML blocks of the Metrics page's section ``{#section}``, parsed."""
    page = (MANUAL / "metrics.md").read_text(encoding="utf-8")
    body = page.split(f"{{#{section}}}", 1)[1].split("\n#", 1)[0]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", body, re.S)]


def test_the_manuals_compose_scrape_config_scrapes_both_web_replicas_with_the_token():
    [config] = scrape_configs("scrape-compose")
    job = config["scrape_configs"][0]
    assert job["authorization"]["type"] == "Bearer" and job["authorization"]["credentials_file"]
    ports = [port.rsplit(":", 2) for name, service in compose_file()["services"].items() if name.startswith("web-")
             for port in service["ports"]]
    published = sorted(f"{host}:{port}" for host, port, _ in ports)
    assert sorted(t for static in job["static_configs"] for t in static["targets"]) == published


def test_the_manuals_kubernetes_scrape_config_keeps_the_annotated_web_pods():
    [config] = scrape_configs("scrape-kubernetes")
    job = config["scrape_configs"][0]
    assert job["kubernetes_sd_configs"][0]["role"] == "pod" and job["authorization"]["credentials_file"]
    web, _ = kubernetes_web_and_secret()
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text(encoding="utf-8"))
    labels = kustomization["labels"][0]["pairs"] | web["spec"]["template"]["metadata"]["labels"]
    meta = {f"__meta_kubernetes_pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', k)}": str(v) for k, v in labels.items()}
    meta |= {f"__meta_kubernetes_pod_annotation_{re.sub(r'[^a-zA-Z0-9_]', '_', k)}": str(v)
             for k, v in web["spec"]["template"]["metadata"]["annotations"].items()}
    meta |= {"__meta_kubernetes_pod_ip": "10.1.2.3", "__address__": "10.1.2.3", "__metrics_path__": "/metrics-x"}
    for rule in job["relabel_configs"]:  # Prometheus' relabelling, the parts the manual uses
        value = ";".join(meta.get(label, "") for label in rule["source_labels"])
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        if rule.get("action") == "keep":
            assert match, f"the web pod is dropped by {rule}"
        elif match:
            meta[rule["target_label"]] = match.expand(rule.get("replacement", "$1").replace("$", "\\"))
    assert (meta["__address__"], meta["__metrics_path__"]) == ("10.1.2.3:8000", "/metrics")
