"""bookchat deployed as IT teams deploy it, for real (``make deploy-test``; ``make test`` leaves it out): the image
run by podman from the Kubernetes manifests (``podman kube play`` of deploy/kubernetes itself) and from
deploy/compose.yaml (podman-compose). Each deployment, brought up from nothing, must show: both web replicas
answering from the manual its bootstrap indexed, an upload through the admin indexed by the worker, each web
replica's /metrics counting its answers for a scraper with the deployment's metrics token (401 without), one web
container killed and every question after that answered by the other, and after everything is stopped and started
again every book, audit row and API key still there. The how-tos' own commands run as the manual writes them: the
compose deployment is made by them (its secrets, its start behind a TLS proxy), and on both the smoke test, a key
and a backup copied out run from the page. How podman 4.3 differs from a cluster, and what each documented command
becomes here: tests/support/containers.py.
"""

from __future__ import annotations

import json
import re
import tarfile
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.containers import Compose, Deployment, KubePlay, missing, podman
from tests.test_uploads import make_zip

pytestmark = [pytest.mark.slow, pytest.mark.deploy]

CHAPTER = ("# Lanterns\n\nThe lantern room at Cape Morrow holds a brass lens that turns once every twelve "
           "seconds.\n\n## Keepers\n\nThe keepers polish the lens with chamois leather every morning at six.\n")
UPLOAD_QUESTION = "How often does the brass lens at Cape Morrow turn?"
MANUAL_QUESTIONS = ["How do I upload a book?", "What does the readiness probe report?",
                    "How do I create an API key?", "Where does bookchat keep its data?"]
AFTER_KILL = 12  # questions through the surviving replica once the other is gone


class Staff:
    """An admin session through the deployment's front door, holding its cookies itself: behind an HTTPS ingress
    they are Secure, which a client speaking plain HTTP to the pod would otherwise not send back."""

    def __init__(self, deployment: Deployment, url: str):
        self.url, self.headers, self.cookies = url, dict(deployment.headers), {}
        if deployment.headers.get("X-Forwarded-Proto") == "https":
            self.headers["Origin"] = f"https://{deployment.headers['Host']}"

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        cookie = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        headers = self.headers | ({"Cookie": cookie} if cookie else {})
        if "Origin" in headers:
            headers["Referer"] = f"{headers['Origin']}{path}"
        response = httpx.request(method, f"{self.url}{path}", headers=headers, timeout=60, **kwargs)
        for header in response.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        return response

    def csrf(self, path: str) -> str:
        page = self.request("GET", path)
        assert page.status_code == 200, (path, page.status_code, page.text[:300])
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)

    def log_in(self, user: str, password: str) -> None:
        token = self.csrf("/admin/login/")
        done = self.request("POST", "/admin/login/", data={"csrfmiddlewaretoken": token, "username": user,
                                                           "password": password, "next": "/admin/"})
        assert done.status_code == 302 and done.headers["location"].endswith("/admin/"), done.text[:500]

    def upload(self, slug: str, title: str, archive: bytes) -> None:
        token = self.csrf("/admin/ingestion/ingestionjob/add/")
        done = self.request("POST", "/admin/ingestion/ingestionjob/add/", data={
            "csrfmiddlewaretoken": token, "book": "", "new_book_slug": slug, "new_book_title": title,
            "folder": ""}, files={"upload": (f"{slug}.zip", archive, "application/zip")})
        assert done.status_code == 302, done.text[:2000]


def ask(deployment: Deployment, url: str, key: str, question: str, book: str = "bookchat-manual") -> httpx.Response:
    return httpx.post(f"{url}/api/v1/ask", json={"question": question, "book": book},
                      headers=deployment.headers | {"Authorization": f"Bearer {key}"}, timeout=60)


def answers_counted(deployment: Deployment, url: str) -> float:
    """``bookchat_answers_total`` summed over its labels, as Prometheus scrapes it from one web replica with the
    deployment's metrics token; and the same scrape without the token, or with another, refused."""
    for refused in ({}, {"Authorization": "Bearer not-the-token"}):
        response = httpx.get(f"{url}/metrics", headers=deployment.headers | refused, timeout=30)
        assert response.status_code == 401, (url, refused, response.status_code, response.text[:300])
    response = httpx.get(f"{url}/metrics", headers=deployment.headers | {
        "Authorization": f"Bearer {deployment.metrics_token}"}, timeout=30)
    assert response.status_code == 200, (url, response.status_code, response.text[:300])
    return sum(sample.value for family in text_string_to_metric_families(response.text)
               for sample in family.samples if sample.name == "bookchat_answers_total")


def database_activity(deployment: Deployment) -> str:
    """What every connection to the database is doing (pg_stat_activity), read from the surviving web container:
    for a request that hung, the statement it waited on and who held it up."""
    script = ("from django.db import connection; cursor = connection.cursor(); cursor.execute(\"SELECT pid, "
              "client_addr, state, wait_event_type, wait_event, now() - query_start, left(query, 160) FROM "
              "pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()\"); "
              "print(*cursor.fetchall(), sep='\\n')")
    try:
        return deployment.exec_web(1, "shell", "-c", script)
    except Exception as exc:  # the diagnosis must not hide the failure it explains
        return f"pg_stat_activity could not be read: {exc}"


def inventory(deployment: Deployment) -> dict:
    """What must survive a full restart, read inside a web container from the database itself."""
    script = ("import json; from ingestion.models import Book; from audit.models import AuditLog; "
              "from chat.models import ApiKey; print(json.dumps({'books': sorted(Book.objects.values_list("
              "'slug', flat=True)), 'audit_rows': AuditLog.objects.count(), 'keys': sorted(ApiKey.objects."
              "filter(active=True).values_list('prefix', flat=True))}))")
    return json.loads(deployment.exec_web(-1, "shell", "-c", script).strip().splitlines()[-1])


@pytest.fixture(params=["kubernetes", "compose"])
def deployment(request, tmp_path):
    why = missing()
    if why:
        pytest.fail(why)
    deployed = {"kubernetes": KubePlay, "compose": Compose}[request.param](tmp_path)
    try:
        deployed.up()
        yield deployed
    finally:
        deployed.down()


def test_a_deployment_answers_indexes_uploads_survives_losing_a_web_replica_and_restarts_intact(deployment):
    figures = {"deployment": deployment.name, "setup": deployment.phases}
    created = json.loads(deployment.exec_web(0, "apikey", "create", "--kind", "secret", "--name", "deploy test",
                                             "--json"))
    key = created["key"]

    # The how-to's own commands, as the page writes them (tests/support/containers.py, AS_RUN_HERE): the smoke
    # test and a publishable key for a docs site.
    for start in deployment.how_to:
        deployment.run(start)

    # Both web replicas answer from the manual the bootstrap indexed.
    answers = [0] * len(deployment.webs)  # answers each replica gave, for its /metrics to count
    for index, url in enumerate(deployment.webs):
        answered = ask(deployment, url, key, MANUAL_QUESTIONS[index])
        assert answered.status_code == 200, (url, answered.text[:500])
        assert answered.json()["sources"], answered.json()
        answers[index] += 1

    # An upload through the admin: the web replica stores it, the worker indexes it.
    staff = Staff(deployment, deployment.webs[0])
    staff.log_in(deployment.admin, deployment.admin_password)
    staff.upload("lanterns", "Lanterns", make_zip({"docs/lanterns.md": CHAPTER.encode()}))
    deadline = time.monotonic() + 300
    while True:
        answered = ask(deployment, deployment.webs[1], key, UPLOAD_QUESTION, book="lanterns")
        if answered.status_code == 200:
            break
        assert answered.status_code in (404, 503), answered.text[:500]  # not there yet, or still indexing
        assert time.monotonic() < deadline, "the upload was never indexed:\n" + deployment.worker_logs()[-3000:]
        time.sleep(2)
    assert "twelve seconds" in answered.json()["answer"], answered.json()
    assert "book lanterns" in deployment.worker_logs(), "the worker did not index the upload"
    answers[1] += 1

    # Prometheus scrapes each web replica with the metrics token the deployment gives it: each counts its own.
    counted = [answers_counted(deployment, url) for url in deployment.webs]
    assert all(seen >= given for seen, given in zip(counted, answers, strict=True)), (counted, answers)
    figures["answers_counted"] = counted

    # The worker's liveness check, run as the deployment's own file runs it, in the worker's container: its task
    # cluster has been beating since it started.
    probe = podman("exec", deployment.worker_container(), *deployment.worker_probe(), check=False)
    assert probe.returncode == 0, (deployment.worker_probe(), probe.stdout, probe.stderr)
    figures["worker_alive"] = probe.stdout.strip()

    # One web container killed (and its network gone: tests/support/containers.py): every question after that is
    # answered by the other.
    deployment.kill_web(0)
    survivor = deployment.webs[1]
    failures, seconds = [], []
    for n in range(AFTER_KILL):
        started = time.monotonic()
        try:
            answered = ask(deployment, survivor, key, MANUAL_QUESTIONS[n % len(MANUAL_QUESTIONS)])
        except httpx.TimeoutException as exc:  # say which question hung, what the database did then, and the logs
            failures.append((n, type(exc).__name__, database_activity(deployment), deployment.diagnosis()))
            print("\nno answer:", json.dumps(failures[-1], indent=1, default=str))
            continue
        finally:
            seconds.append(round(time.monotonic() - started, 2))
        if answered.status_code != 200:
            failures.append((n, answered.status_code, answered.text[:200]))
    assert failures == [], (seconds, failures)
    figures["answered_after_kill"] = AFTER_KILL
    figures["seconds_after_kill"] = seconds

    # Everything stopped and started again: books, audit rows and the key are where they were.
    time.sleep(2)  # audit rows are written after the answer is sent
    before = inventory(deployment)
    assert {"bookchat-manual", "lanterns"} <= set(before["books"]) and before["audit_rows"] >= 2 + AFTER_KILL
    assert created["prefix"] in before["keys"], before
    deployment.stop_all()
    deployment.start_all()
    after = inventory(deployment)
    assert after == before
    for url in deployment.webs:
        answered = ask(deployment, url, key, UPLOAD_QUESTION, book="lanterns")
        assert answered.status_code == 200 and "twelve seconds" in answered.json()["answer"], answered.text[:500]

    # The how-to's backup, made in a web container and copied off the host; and, where the page gives the commands,
    # restored over the running install: everything is as it was when the backup was made.
    time.sleep(2)  # the audit rows of the answers just given
    before = inventory(deployment)
    for start in deployment.backup:
        deployment.run(start)
    with tarfile.open(deployment.workdir / "bookchat-backup.tar.gz") as archive:
        figures["backup_files"] = len(archive.getnames())
    assert figures["backup_files"] > 1, "the backup the page copies out holds the database and its files"
    if deployment.restore:
        for start in deployment.restore:
            deployment.run(start)
        deployment.wait_ready()
        assert inventory(deployment) == before
        answered = ask(deployment, deployment.webs[0], key, UPLOAD_QUESTION, book="lanterns")
        assert answered.status_code == 200 and "twelve seconds" in answered.json()["answer"], answered.text[:500]
        figures["restored"] = before
    print(f"\ndeployed ({deployment.name}):", json.dumps(figures | {"after_restart": after}))
