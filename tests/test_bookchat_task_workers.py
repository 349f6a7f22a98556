"""The task workers' heartbeat (``bookchat.task_workers``, ``manage.py worker``): one row per worker, updated in
place, rows not seen for a day deleted, a clean stop leaving none; the sentinel's status save beats only for a
whole, running cluster whose processes are all alive, and at most every 30 s; ``/metrics`` shows how many beat
within two minutes and each one's memory and beat age; ``worker alive`` exits 0 or 1 with why. The drill: a real
django-q2 cluster beats, ``worker alive`` passes on its node, and fails once the cluster is killed, or when the
database can't be reached."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest
from django.core.management.base import CommandError
from django.utils import timezone
from django_q.conf import Conf
from django_q.signing import SignedPackage
from django_q.status import Status
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bookchat import scraping, task_workers
from bookchat.base.models import TaskWorker
from bookchat.task_workers import Beat, BeatingORM, liveness, record_beat
from tests.conftest import committed, run_command
from tests.support.workers import REPO, Cluster

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def beat(node="node-a", pid=100, *, rss=1000, processes=5, at=NOW, queue="indexing") -> TaskWorker:
    return record_beat(Beat(node=node, pid=pid, started_at=at - timedelta(hours=1), resident_bytes=rss,
                            processes=processes, reincarnations=0, queue=queue), now=at)


def test_a_worker_keeps_one_row_updated_in_place():
    beat(rss=1000)
    later = NOW + timedelta(seconds=30)
    beat(rss=2000, at=later)
    row = TaskWorker.objects.get()
    assert (row.node, row.pid, row.resident_bytes, row.last_beat) == ("node-a", 100, 2000, later)
    beat(pid=101, at=later)
    assert TaskWorker.objects.count() == 2  # another process on the same node is another worker


def test_workers_not_seen_for_a_day_are_deleted_by_any_beat():
    beat(node="gone", at=NOW - timedelta(days=1, seconds=1))
    beat(node="quiet", at=NOW - timedelta(hours=23))
    beat(node="here")
    assert set(TaskWorker.objects.values_list("node", flat=True)) == {"quiet", "here"}


def test_liveness_answers_for_this_node_only_and_by_its_newest_beat():
    indexing = ("indexing",)
    assert liveness(node="node-a", max_age=120, now=NOW, queues=indexing) == task_workers.Liveness(
        False, "no indexing task worker on node-a has beaten yet (none is recorded)", "node-a")
    beat(node="node-b")  # another machine's worker says nothing about this one
    assert not liveness(node="node-a", max_age=120, now=NOW, queues=indexing).alive
    beat(pid=1, at=NOW - timedelta(seconds=300))
    stale = liveness(node="node-a", max_age=120, now=NOW, queues=indexing)
    assert not stale.alive
    assert stale.reason == "the indexing task worker on node-a (pid 1) last beat 300 s ago, more than 120 s"
    beat(pid=2, at=NOW - timedelta(seconds=100))
    fresh = liveness(node="node-a", max_age=120, now=NOW, queues=indexing)
    assert (fresh.alive, fresh.pid, fresh.age_seconds) == (True, 2, 100.0)


def test_a_node_is_alive_only_when_both_queues_have_a_recent_beat():
    beat(pid=1, at=NOW - timedelta(seconds=10))
    missing = liveness(node="node-a", max_age=120, now=NOW)
    assert not missing.alive
    assert missing.reason == "no background task worker on node-a has beaten yet (none is recorded)"
    beat(pid=2, at=NOW - timedelta(seconds=300), queue="background")
    assert "the background task worker on node-a (pid 2) last beat 300 s ago" in liveness(
        node="node-a", max_age=120, now=NOW).reason
    beat(pid=2, at=NOW - timedelta(seconds=40), queue="background")
    both = liveness(node="node-a", max_age=120, now=NOW)
    assert (both.alive, both.pid, both.age_seconds) == (True, 2, 40.0)  # the older beat of the two
    assert "indexing task worker on node-a (pid 1)" in both.reason and "background" in both.reason


# -- the sentinel's status save beats ------------------------------------------------------------------------------
def status(state=Conf.IDLE, *, sentinel=None, workers=None, host="node-s") -> Status:
    """A django-q2 status as the sentinel saves it, naming live processes (this one) unless told otherwise."""
    me = os.getpid()
    made = Status(pid=me, cluster_id=uuid.uuid4())
    made.status, made.sentinel, made.host, made.tob = state, me if sentinel is None else sentinel, host, NOW
    made.workers = [me] * Conf.WORKERS if workers is None else workers
    made.monitor = made.pusher = me
    return made


def save(broker: BeatingORM, saved: Status) -> None:
    """As the sentinel saves it: outside a transaction (the beat checks its connection first), so committed."""
    committed(lambda: broker.set_stat("stat-key", SignedPackage.dumps(saved, True), 3))


@pytest.fixture(autouse=True)
def _no_beat_left():
    yield
    committed(lambda: TaskWorker.objects.filter(node="node-s").delete())


def test_a_running_whole_cluster_beats_at_most_every_30_seconds():
    broker = BeatingORM()
    save(broker, status())
    row = TaskWorker.objects.get()
    assert (row.node, row.pid, row.processes, row.started_at) == ("node-s", os.getpid(), 4 + Conf.WORKERS, NOW)
    assert row.resident_bytes > 0
    first = row.last_beat
    save(broker, status(Conf.WORKING))
    assert TaskWorker.objects.get().last_beat == first, "a second save within 30 s is not a beat"
    broker._beaten_at = time.monotonic() - task_workers.BEAT_SECONDS
    save(broker, status(Conf.WORKING))
    assert TaskWorker.objects.get().last_beat > first


def test_a_dead_process_a_partial_pool_or_a_cluster_starting_does_not_beat():
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # its pid names no process any more
    for saved in (status(workers=[finished.pid] * Conf.WORKERS), status(workers=[]), status(Conf.STARTING),
                  status(Conf.STOPPING), status(sentinel=os.getpid() + 1)):  # the last: not saved by the sentinel
        save(BeatingORM(), saved)
    assert not TaskWorker.objects.exists()


def test_a_beat_the_database_refuses_is_logged_once_and_the_status_is_still_saved(caplog):
    broker = BeatingORM()
    unstorable = status(host="n" * 300)  # longer than a host name column holds
    save(broker, unstorable)
    save(broker, unstorable)
    failures = [r for r in caplog.records if r.getMessage() == "the task worker's heartbeat was not recorded"]
    assert len(failures) == 1, "tried again in 30 s, not at every turn of the guard loop"
    assert broker.get_stat("stat-key") is not None, "the sentinel's own status save went ahead"
    assert not TaskWorker.objects.exists()


def test_a_clean_stop_deletes_the_workers_row():
    broker = BeatingORM()
    save(broker, status())
    save(broker, status(Conf.STOPPED))
    assert not TaskWorker.objects.exists()


# -- /metrics and the liveness check -------------------------------------------------------------------------------
def test_the_scrape_counts_recent_workers_and_shows_each_ones_memory_and_beat_age():
    now = timezone.now()
    beat(node="fresh", pid=7, rss=5_000_000, at=now - timedelta(seconds=10))
    beat(node="stale", pid=8, rss=6_000_000, at=now - timedelta(minutes=5))
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(scraping.Scrape()).decode())}
    assert [s.value for s in families["bookchat_task_workers"].samples] == [1.0]
    rss = {(s.labels["node"], s.labels["pid"]): s.value
           for s in families["bookchat_task_worker_resident_bytes"].samples}
    assert rss == {("fresh", "7"): 5_000_000, ("stale", "8"): 6_000_000}
    ages = {s.labels["node"]: s.value for s in families["bookchat_task_worker_heartbeat_age_seconds"].samples}
    assert 10 <= ages["fresh"] < 60 and 300 <= ages["stale"] < 360
    ok = {s.labels["part"]: s.value for s in families["bookchat_scrape_ok"].samples}
    assert ok["queue"] == 1


def test_worker_alive_exits_0_with_a_recent_beat_and_1_with_why_not():
    beat(node="probe-node", pid=9, at=timezone.now() - timedelta(seconds=200))
    with pytest.raises(CommandError, match=r"probe-node \(pid 9\) last beat 200 s ago, more than 120 s") as caught:
        run_command("worker", "alive", "--node", "probe-node")
    assert caught.value.returncode == 1
    with pytest.raises(CommandError, match="no background task worker on probe-node"):
        run_command("worker", "alive", "--node", "probe-node", "--max-age", "300")
    code, out, _ = run_command("worker", "alive", "--node", "probe-node", "--max-age", "300", "--queue", "indexing")
    assert code == 0 and "beat 200 s ago" in out
    beat(node="probe-node", pid=10, at=timezone.now() - timedelta(seconds=5), queue="background")
    code, out, _ = run_command("worker", "alive", "--node", "probe-node", "--max-age", "300")
    assert code == 0 and "background task worker on probe-node (pid 10)" in out
    with pytest.raises(CommandError, match="none is recorded"):
        run_command("worker", "alive", "--node", "elsewhere", "--json")
    code, out, _ = run_command("worker", "list", "--json")
    assert [(w["node"], w["pid"], w["queue"]) for w in json.loads(out)["workers"]] == [
        ("probe-node", 9, "indexing"), ("probe-node", 10, "background")]


@pytest.mark.parametrize("max_age", ["0", "-5", "soon", "nan", "inf"])
def test_worker_alive_refuses_a_max_age_that_is_not_a_positive_number(max_age):
    with pytest.raises(CommandError, match="--max-age"):
        run_command("worker", "alive", "--max-age", max_age)


# -- the drill: a real cluster -------------------------------------------------------------------------------------
def command_env(data_dir) -> dict[str, str]:
    from django.conf import settings
    from django.db import connection

    db = connection.settings_dict
    return os.environ | {"BOOKCHAT_SECRET_KEY": settings.SECRET_KEY, "BOOKCHAT_DATA_DIR": str(data_dir),
                         "DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}"}


def worker_alive(data_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", "worker", "alive", *args], cwd=REPO, env=command_env(data_dir),
                          capture_output=True, text=True, timeout=60)


def wait_for_beat(cluster: Cluster) -> TaskWorker:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert cluster.proc.poll() is None, cluster.output()
        row = committed(lambda: TaskWorker.objects.filter(pid=cluster.proc.pid).first())
        if row is not None:
            return row
        time.sleep(0.2)
    raise AssertionError(cluster.output())


@pytest.mark.drill
def test_real_clusters_beat_and_the_probe_fails_once_one_is_killed(tmp_path):
    data_dir = tmp_path
    clusters = [Cluster(data_dir), Cluster(data_dir, queue="background")]
    try:
        rows = [wait_for_beat(cluster) for cluster in clusters]
        assert [row.queue for row in rows] == ["indexing", "background"]
        for row in rows:
            assert row.node == socket.gethostname() and row.processes == 5  # main, sentinel, 1 worker, monitor, pusher
            assert row.resident_bytes > 10_000_000
        alive = worker_alive(data_dir)
        assert alive.returncode == 0, alive.stderr
        assert f"(pid {clusters[0].proc.pid}) beat" in alive.stdout
        assert f"(pid {clusters[1].proc.pid}) beat" in alive.stdout
        clusters[1].kill()
        time.sleep(1.1)
        dead = worker_alive(data_dir, "--max-age", "1")
        assert dead.returncode == 1 and dead.stderr.count("\n") == 1
        assert "last beat" in dead.stderr and "more than 1 s" in dead.stderr
        unreachable = subprocess.run([sys.executable, "manage.py", "worker", "alive"], cwd=REPO, text=True,
                                     capture_output=True, timeout=60, env=command_env(data_dir) | {
                                         "DATABASE_URL": "postgresql://bookchat@127.0.0.1:9/bookchat"})
        assert unreachable.returncode == 1 and unreachable.stderr.count("\n") == 1
        assert "the heartbeats could not be read" in unreachable.stderr
    finally:
        for cluster in clusters:
            cluster.stop()
            committed(lambda cluster=cluster: TaskWorker.objects.filter(pid=cluster.proc.pid).delete())
