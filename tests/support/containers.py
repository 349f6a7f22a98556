"""bookchat's deployments run for real with podman (``make deploy-test``, tests/test_deployed.py): the Kubernetes
manifests in deploy/kubernetes played by ``podman kube play``, and deploy/compose.yaml brought up by podman-compose.

Podman here is Debian bookworm's 4.3, whose ``kube play`` differs from a cluster in four ways this module makes up
for, and nothing else: it skips a Job (the bootstrap Job's pod template is played as a Pod), it can't read a Secret
it made itself (the Secret's values are handed to ``podman secret create`` as the JSON it reads), it has no
Services (each web pod is reached at its own address, with the Host and X-Forwarded-Proto headers the ConfigMap's
ingress would send), and its probes need systemd timers (they don't run; the test polls /api/v1/ready itself).

And one way both deployments differ from a cluster, which ``kill_web`` waits out: a killed container's network is
torn down after it exits (with kube play, its whole pod's: the pod stops when its only container dies), and while
netavark rewrites the shared network's rules, a connection in flight to another container on that network can lose
its response for good: the surviving replica answers and writes its audit row, and the client waits for a reply
that never comes.

The how-tos' own commands (the page's lines, read by tests/support/howto.py) run here with the replacements of
``AS_RUN_HERE`` made, and nothing else changed: ``docker compose`` becomes the podman-compose invocation the page
gives for podman 4.3, ``docker compose exec web-1`` and ``kubectl exec deploy/bookchat-web --`` a ``podman exec`` on
a web container, the ingress's ``https://chat.example.org`` a web pod's address with the headers the ingress would
send, and ``my-book`` the bundled manual. A line that fails, or that still names docker or kubectl after them, fails
the test with the line and where the page has it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

from tests.support import howto

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"
COMPOSE_FILE = REPO / "deploy" / "compose.yaml"
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
IMAGES = {"bookchat": "localhost/bookchat:latest", "postgres": "localhost/bookchat-postgres:latest",
          "redis": "localhost/bookchat-redis:latest"}
READY_SECONDS = 600  # the bootstrap indexes the manual first (~2 minutes on 2 busy cores)
# The vectors the test sessions kept (tests/conftest.py, VECTOR_CACHE): each deployment's bootstrap reads them as
# BOOKCHAT_EMBEDDING_CACHE, so that indexing the manual takes seconds after `make test` has run on this checkout
# (without them it embeds every passage, as a real first start does). The sessions index without sentence vectors,
# which a deployment's bootstrap makes (~2 minutes of the manual's on 2 cores): the folder is mounted writable, so
# that the first deployment's bootstrap keeps them there and the second's, and the next run's, read them back.
VECTORS = REPO / "var" / "cache" / "vectors"
VECTORS_IN_CONTAINER = "/var/cache/bookchat-vectors"
IMAGE_UID = 10001  # the image's user (deploy/Containerfile), who writes the vectors it makes


def vectors_env() -> dict[str, str]:
    return {"BOOKCHAT_EMBEDDING_CACHE": VECTORS_IN_CONTAINER} if VECTORS.is_dir() else {}


def writable_vectors() -> None:
    """The cache's folders writable by the image's user (they are the sessions', made by root)."""
    for folder in [VECTORS, *(path for path in VECTORS.iterdir() if path.is_dir())]:
        if folder.stat().st_uid != IMAGE_UID and folder.stat().st_mode & 0o777 != 0o777:
            folder.chmod(0o777)


# What the manual's how-tos write → what runs here, replaced in this order in each line the test runs ({…} are
# the running deployment's: its first web container, that web's address, the podman-compose invocation).
AS_RUN_HERE = {
    "compose": [
        ("docker compose exec web-1 ", "{podman} exec {web} "),
        ("docker compose cp ", "{podman} cp "),
        ("web-1:/data/", "{web}:/data/"),
        ("docker compose ", "{compose} "),
        ("--book my-book", "--book bookchat-manual"),
    ],
    "kubernetes": [
        ("kubectl exec deploy/bookchat-web -- ", "{podman} exec {web} "),
        ('kubectl cp "$(kubectl get pod -l app.kubernetes.io/component=web -o name | head -n 1 | cut -d/ -f2)":',
         "{podman} cp {web}:"),
        ("https://chat.example.org/", "-H 'Host: chat.example.org' -H 'X-Forwarded-Proto: https' {url}/"),
        ("--book my-book", "--book bookchat-manual"),
    ],
}
# The compose project's name and files, given to the page's podman-compose invocation: the project's containers
# are named after it (bookchat-deploy-test_web-1_1), apart from a real deployment's on the same host.
COMPOSE_PROJECT = "bookchat-deploy-test"


def shell(line: howto.Line, script: str, cwd: Path, env: dict[str, str]) -> str:
    """``script`` (``line`` as it runs here) run by bash in ``cwd``: its output, or a failure naming the line."""
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=os.environ | env,
                          capture_output=True, text=True, timeout=READY_SECONDS)
    assert done.returncode == 0, (f"the manual's command failed: {line}\n  ran here as: {script}\n  exit "
                                  f"{done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


SETTLE_SECONDS = 2  # after a killed container's network is torn down, for podman's clean-up to end


def podman(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done


def missing() -> str | None:
    """Why these deployments can't run here, or None."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install -y podman runc)"
    for image in IMAGES.values():
        if podman("image", "exists", image, check=False).returncode != 0:
            return f"the image {image} is missing: build it with deploy/image.sh --services (make deploy-test does)"
    return None


class Deployment:
    """One running deployment: its web replicas' URLs and the headers a request through its front door carries."""

    name = ""
    admin = "admin"
    admin_password = "change-me-too"
    metrics_token = ""  # what the web replicas take as BOOKCHAT_METRICS_TOKEN: Prometheus' bearer token

    def __init__(self) -> None:
        self.webs: list[str] = []
        self.headers: dict[str, str] = {}
        self.phases: dict[str, float | str] = {}  # seconds from the start of up(), for the test's figures
        self.started = time.monotonic()

    def phase(self, name: str) -> None:
        self.phases[name] = round(time.monotonic() - self.started, 1)

    def bootstrapped(self, container: str) -> None:
        """The bootstrap container's exit awaited (it must be 0), its phases' times kept."""
        exit_code = podman("wait", container, timeout=READY_SECONDS).stdout.strip()
        logs = podman("logs", container, check=False).stderr
        assert exit_code == "0", f"the bootstrap failed ({exit_code}):\n{logs[-5000:]}"
        self.phase("bootstrapped")
        sentences = re.search(r"sentence vectors of book bookchat-manual: .*", logs)
        self.phases["sentence_vectors"] = sentences.group(0) if sentences else "none made"

    def up(self) -> None: ...
    def down(self) -> None: ...
    def stop_all(self) -> None: ...
    def start_all(self) -> None: ...
    def web_container(self, index: int) -> str: ...
    def worker_container(self) -> str: ...
    def worker_probe(self) -> list[str]: ...

    def kill_web(self, index: int) -> None:
        """Kill a web replica, and return once its network is gone (the module's docstring says why)."""
        container = self.web_container(index)
        podman("kill", container)
        podman("wait", container, check=False, timeout=60)
        self.wait_gone(container)
        time.sleep(SETTLE_SECONDS)

    def wait_gone(self, container: str) -> None:
        """Until what runs ``container``'s network has stopped (the container itself, by default)."""

    section = ""  # the manual's section whose commands run against this deployment
    # How the section's commands the test runs begin, in the page's order: once it is up, to make and copy out a
    # backup, and to restore it (the Kubernetes page gives no restore command to run).
    how_to: list[str] = []
    backup: list[str] = []
    restore: list[str] = []
    workdir: Path

    def page(self) -> list[howto.Line]:
        return howto.commands(section=self.section)

    def substitutions(self) -> dict[str, str]:
        return {"podman": " ".join(PODMAN), "web": self.web_container(0), "url": self.webs[0]}

    def as_run_here(self, line: howto.Line) -> str:
        """``line`` with ``AS_RUN_HERE``'s replacements made; a docker or kubectl left over has no equivalent."""
        values, script = self.substitutions(), line.text
        for written, run in AS_RUN_HERE[self.name]:
            script = script.replace(written, run.format(**values))
        left = re.search(r"\b(docker|kubectl)\b", script.split(" #")[0])
        assert not left, f"the manual's command has no equivalent here ({left.group(1)}): {line}\n  {script}"
        return script

    def run(self, start: str, cwd: Path | None = None) -> str:
        """The section's one command that starts with ``start``, run as the page writes it (``AS_RUN_HERE``)."""
        line = howto.find(self.page(), start)
        return shell(line, self.as_run_here(line), cwd or self.workdir, self.environment())

    def environment(self) -> dict[str, str]:
        return {}

    def exec_web(self, index: int, *command: str) -> str:
        return podman("exec", self.web_container(index), "bookchat", *command).stdout

    def worker_logs(self) -> str:
        return podman("logs", self.worker_container()).stderr

    def wait_ready(self, seconds: float = READY_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        for url in self.webs:
            while True:
                try:
                    if httpx.get(f"{url}/api/v1/ready", headers=self.headers, timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"{url} not ready after {seconds} s:\n{self.diagnosis()}")
                time.sleep(2)

    def diagnosis(self) -> str:
        listing = podman("ps", "-a", "--format", "{{.Names}} {{.Status}}", check=False).stdout
        logs = []
        for name in listing.split():
            if name.startswith(("bookchat", "postgres", "redis")) and not name.endswith("-infra"):
                logs.append(f"--- {name}\n" + podman("logs", "--tail", "20", name, check=False).stderr[-3000:])
        return listing + "\n".join(logs)


class KubePlay(Deployment):
    """deploy/kubernetes played by ``podman kube play`` on a network of its own, beside tests/deploy/services.yaml
    (the external PostgreSQL and Redis the manifests expect)."""

    name = "kubernetes"
    section = "kubernetes"
    how_to = ["curl -fsS ", "kubectl exec deploy/bookchat-web -- bookchat apikey create "]
    backup = ["kubectl exec deploy/bookchat-web -- bookchat backup ", "kubectl cp "]
    network = "bookchat-deploy-test"
    host = "chat.example.org"  # the ConfigMap's BOOKCHAT_ALLOWED_HOSTS: requests come as its ingress sends them

    def __init__(self, workdir: Path) -> None:
        super().__init__()
        self.workdir = workdir
        self.headers = {"Host": self.host, "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}
        self.secret = yaml.safe_load((MANIFESTS / "secret.yaml").read_text())
        self.admin_password = self.secret["stringData"]["admin-password"]
        self.metrics_token = self.secret["stringData"]["metrics-token"]

    def wait_gone(self, container: str) -> None:
        """Until the killed container's pod has stopped: its infra container held the network."""
        pod = podman("inspect", container, "--format", "{{.Pod}}").stdout.strip()
        deadline = time.monotonic() + 60
        while podman("pod", "inspect", pod, "--format", "{{.State}}").stdout.strip() not in ("Exited", "Stopped"):
            assert time.monotonic() < deadline, f"the pod of {container} still runs 60 s after it was killed"
            time.sleep(0.5)

    def worker_probe(self) -> list[str]:
        """The worker's liveness probe command, as worker.yaml gives it."""
        manifest = yaml.safe_load((MANIFESTS / "worker.yaml").read_text())
        return manifest["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["exec"]["command"]

    def play(self, path: Path) -> None:
        podman("kube", "play", "--network", self.network, "--configmap", str(MANIFESTS / "configmap.yaml"),
               str(path))

    def up(self) -> None:
        self.down()
        self.started = time.monotonic()
        podman("network", "create", self.network)
        self.play(REPO / "tests" / "deploy" / "services.yaml")
        values = {key: base64.b64encode(value.encode()).decode()
                  for key, value in self.secret["stringData"].items()}
        secret_file = self.workdir / "secret.json"
        secret_file.write_text(json.dumps(values))
        podman("secret", "create", self.secret["metadata"]["name"], str(secret_file))
        self.play(MANIFESTS / "data.yaml")
        job = yaml.safe_load((MANIFESTS / "bootstrap-job.yaml").read_text())
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": job["metadata"]["name"]},
               "spec": with_vectors(job["spec"]["template"]["spec"]) | {"restartPolicy": "Never"}}
        pod_file = self.workdir / "bootstrap-pod.yaml"
        pod_file.write_text(yaml.safe_dump(pod))
        writable_vectors()
        self.play(pod_file)
        self.phase("bootstrap_started")
        self.bootstrapped(f"{job['metadata']['name']}-{pod['spec']['containers'][0]['name']}")
        self.play(MANIFESTS / "web.yaml")
        self.play(MANIFESTS / "worker.yaml")
        self.find_webs()
        self.wait_ready()
        self.phase("ready")

    def web_containers(self) -> list[str]:
        names = podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
        return sorted(name for name in names if name.startswith("bookchat-web-pod-") and name.endswith("-web"))

    def find_webs(self) -> None:
        self.webs = []
        for container in self.web_containers():
            address = podman("inspect", container, "--format",
                             "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}").stdout.strip()
            self.webs.append(f"http://{address}:8000")
        assert len(self.webs) == 2, f"the web Deployment's 2 replicas: {self.web_containers()}"

    def web_container(self, index: int) -> str:
        return self.web_containers()[index]

    def worker_container(self) -> str:
        return "bookchat-worker-pod-0-worker"

    def pods(self) -> list[str]:
        return podman("pod", "ps", "--format", "{{.Name}}").stdout.split()

    def stop_all(self) -> None:
        podman("pod", "stop", "--all", timeout=300)

    def start_all(self) -> None:
        ours = [pod for pod in self.pods() if pod.startswith(("bookchat-web", "bookchat-worker"))]
        for pod in ["postgres", "redis", *ours]:
            podman("pod", "start", pod)
        self.find_webs()
        self.wait_ready()

    def down(self) -> None:
        for pod in self.pods():
            if pod.startswith(("bookchat-", "postgres", "redis")):
                podman("pod", "rm", "--force", pod, check=False)
        for volume in ("bookchat-data", "bookchat-postgres-data"):
            podman("volume", "rm", "--force", volume, check=False)
        podman("secret", "rm", self.secret["metadata"]["name"], check=False)
        podman("network", "rm", "--force", self.network, check=False)


def with_vectors(spec: dict) -> dict:
    """The bootstrap pod's spec with the sessions' vectors mounted into its container (``VECTORS``)."""
    if not vectors_env():
        return spec
    container = spec["containers"][0]
    env = [*container.get("env", []), {"name": "BOOKCHAT_EMBEDDING_CACHE", "value": VECTORS_IN_CONTAINER}]
    mounts = [*container.get("volumeMounts", []), {"name": "vectors", "mountPath": VECTORS_IN_CONTAINER}]
    volumes = [*spec.get("volumes", []),
               {"name": "vectors", "hostPath": {"path": str(VECTORS), "type": "Directory"}}]
    return spec | {"containers": [container | {"env": env, "volumeMounts": mounts}, *spec["containers"][1:]],
                   "volumes": volumes}


class Compose(Deployment):
    """deploy/compose.yaml brought up as the manual's how-to does it, by its own commands (``AS_RUN_HERE``): its
    secrets made by the page's script in a copy of deploy/ of the test's own, then started with the page's proxy
    settings by the podman-compose invocation it gives for podman 4.3, with the PostgreSQL and Redis images
    deploy/image.sh --services builds."""

    name = "compose"
    section = "compose"
    how_to = ["curl -fsS ", "docker compose exec web-1 bookchat apikey create "]
    backup = ["docker compose exec web-1 bookchat backup ", "docker compose cp web-1:"]
    restore = ["docker compose cp bookchat-backup.tar.gz ", "docker compose stop web-1 ",
               "docker compose run --rm bootstrap restore ", "docker compose start web-1 "]

    def __init__(self, workdir: Path) -> None:
        super().__init__()
        self.workdir = workdir / "deploy"  # where the page's `cd deploy` leads: compose.yaml and secrets/
        self.webs = ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
        self.exported: dict[str, str] = {}

    def environment(self) -> dict[str, str]:
        """The images deploy/image.sh --services built, and what the page's step exported (its proxy settings)."""
        return {"BOOKCHAT_IMAGE": IMAGES["bookchat"], "BOOKCHAT_POSTGRES_IMAGE": IMAGES["postgres"],
                "BOOKCHAT_REDIS_IMAGE": IMAGES["redis"]} | self.exported

    def invocation(self) -> str:
        """The page's podman-compose command for podman 4.3 (before its ``up -d``), with this project's name and
        files."""
        written = howto.find(self.page(), "podman-compose --podman-args=").text
        assert written.endswith(" up -d"), written
        files = "--file compose.yaml" + (" --file compose.vectors.yaml" if vectors_env() else "")
        return written.removesuffix(" up -d").replace(
            "podman-compose", f"{Path(sys.executable).with_name('podman-compose')} --project-name {COMPOSE_PROJECT} "
                              f"{files}", 1)

    def substitutions(self) -> dict[str, str]:
        return super().substitutions() | {"compose": self.invocation()}

    def compose(self, *args: str) -> str:
        line = howto.Line(f"docker compose {' '.join(args)}", "tests/support/containers.py", fenced=False)
        return shell(line, self.as_run_here(line), self.workdir, self.environment())

    def vectors_file(self) -> None:
        """An override of compose.yaml's bootstrap: the sessions' vectors mounted (``VECTORS``)."""
        (self.workdir / "compose.vectors.yaml").write_text(yaml.safe_dump({"services": {"bootstrap": {
            "environment": vectors_env(), "volumes": [f"{VECTORS}:{VECTORS_IN_CONTAINER}"]}}}))

    def container(self, service: str) -> str:
        return f"{COMPOSE_PROJECT}_{service}_1"

    def web_container(self, index: int) -> str:
        return self.container(f"web-{index % len(self.webs) + 1}")

    def worker_container(self) -> str:
        return self.container("worker")

    def worker_probe(self) -> list[str]:
        """The worker's health check command, as compose.yaml gives it (after its ``CMD``)."""
        test = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["worker"]["healthcheck"]["test"]
        assert test[0] == "CMD", test
        return test[1:]

    def up(self) -> None:
        """Steps 3 and 4 of the how-to: the secrets, then the start behind a TLS proxy; then its smoke test."""
        self.started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.copy(COMPOSE_FILE, self.workdir / "compose.yaml")
        page = self.page()
        secrets = [line for line in page if line.fenced and ("secrets/" in line.text)]
        assert secrets and secrets[0].text.startswith("cd deploy && "), "\n".join(map(str, page))
        shell(secrets[0], "\n".join(line.text for line in secrets), self.workdir.parent, {})
        for name in ("admin-password", "metrics-token"):
            assert (self.workdir / "secrets" / name).stat().st_size > 0, f"the page's secrets made no {name}"
        self.admin_password = (self.workdir / "secrets" / "admin-password").read_text().strip()
        self.metrics_token = (self.workdir / "secrets" / "metrics-token").read_text().strip()
        export = howto.find(page, "export BOOKCHAT_ALLOWED_HOSTS=")
        self.exported = dict(word.split("=", 1) for word in shlex.split(export.text)[1:])
        self.headers = {"Host": self.exported["BOOKCHAT_ALLOWED_HOSTS"].split(",")[0], "X-Forwarded-For": "203.0.113.7"}
        if self.exported.get("BOOKCHAT_HTTPS") == "true":
            self.headers["X-Forwarded-Proto"] = "https"
        if vectors_env():
            writable_vectors()
            self.vectors_file()
        self.down()
        self.phase("secrets_made")
        self.run("docker compose up -d")
        self.phase("containers_started")
        self.bootstrapped(self.container("bootstrap"))
        self.wait_ready()
        self.phase("ready")

    def stop_all(self) -> None:
        self.compose("stop")

    def start_all(self) -> None:
        self.compose("start")
        self.wait_ready()

    def down(self) -> None:
        if (self.workdir / "secrets").exists():
            self.compose("down", "--volumes")
