"""The task workers' heartbeat: each django-q2 cluster keeps one ``TaskWorker`` row up to date, which ``/metrics``
(``bookchat.scraping``) and the liveness check (``manage.py worker alive``) read. A row names its cluster's queue
(``bookchat.base.queues``: indexing or background); a node is alive when each queue it should run has a recent beat.

The beat comes from inside the cluster. django-q2's sentinel saves the cluster's status through the broker on every
turn of its guard loop (every half second: the loop that restarts dead pool workers, the monitor and the pusher);
``broker`` is django-q2's own broker (Postgres or Redis) whose status save also beats, at most every
``BEAT_SECONDS``, and only when every process that status names (the main process, the sentinel, each pool worker,
the monitor, the pusher) is alive. A clean stop deletes the row; rows not seen for a day are deleted by any beat.

What a stale beat detects: a cluster that stopped or was killed, a sentinel whose guard loop hangs, a process of the
cluster dead and not restarted, a database the sentinel can't write to. What it doesn't: a pool worker busy for
long inside one task (the sentinel's task timeout ends that), a pusher waiting forever on a broken broker
connection, tasks failing (the task results and ``bookchat_queue_oldest_task_age_seconds`` show those).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import psutil
from django.db import close_old_connections
from django.utils import timezone
from django_q.brokers.orm import ORM

from bookchat.base.models import TaskWorker
from bookchat.base.queues import QUEUES, current_queue

logger = logging.getLogger(__name__)

BEAT_SECONDS = 30.0
RECENT = timedelta(minutes=2)  # a worker whose beat is younger counts as running (bookchat_task_workers)
FORGOTTEN = timedelta(days=1)  # rows of workers not seen for longer are deleted


@dataclass(frozen=True)
class Beat:
    """What one heartbeat records of a cluster."""

    node: str
    pid: int
    started_at: datetime
    resident_bytes: int
    processes: int
    reincarnations: int
    queue: str = "indexing"


def record_beat(beat: Beat, *, now: datetime | None = None) -> TaskWorker:
    """Store ``beat`` in its worker's row (made on the first beat, updated in place after), and delete the rows of
    workers not seen for a day."""
    now = now or timezone.now()
    worker, _ = TaskWorker.objects.update_or_create(
        node=beat.node, pid=beat.pid,
        defaults={"started_at": beat.started_at, "last_beat": now, "resident_bytes": beat.resident_bytes,
                  "processes": beat.processes, "reincarnations": beat.reincarnations, "queue": beat.queue})
    TaskWorker.objects.filter(last_beat__lt=now - FORGOTTEN).delete()
    return worker


def forget(*, node: str, pid: int) -> None:
    """A worker that stopped cleanly leaves no row behind."""
    TaskWorker.objects.filter(node=node, pid=pid).delete()


def seen(*, now: datetime | None = None, within: timedelta = FORGOTTEN):
    """The workers whose last beat is within ``within`` of ``now``, by node and pid."""
    now = now or timezone.now()
    return TaskWorker.objects.filter(last_beat__gte=now - within)


def this_node() -> str:
    return socket.gethostname()


@dataclass(frozen=True)
class Liveness:
    """The liveness check's answer for one node: ``alive``, and in one line why (not)."""

    alive: bool
    reason: str
    node: str
    pid: int | None = None
    age_seconds: float | None = None


def liveness(*, node: str, max_age: float, now: datetime | None = None,
             queues: tuple[str, ...] = QUEUES) -> Liveness:
    """Whether, for each of ``queues``, a task worker on ``node`` beat within ``max_age`` seconds (the newest one
    when several run there): the first queue without one says why not; all alive, the oldest of their beats."""
    now = now or timezone.now()
    answers = [_queue_liveness(node, queue, max_age, now) for queue in queues]
    dead = [answer for answer in answers if not answer.alive]
    if dead:
        return dead[0]
    if len(answers) == 1:
        return answers[0]
    oldest = max(answers, key=lambda answer: answer.age_seconds)
    return Liveness(True, "; ".join(answer.reason for answer in answers), node, oldest.pid, oldest.age_seconds)


def _queue_liveness(node: str, queue: str, max_age: float, now: datetime) -> Liveness:
    newest = TaskWorker.objects.filter(node=node, queue=queue).order_by("-last_beat").first()
    if newest is None:
        return Liveness(False, f"no {queue} task worker on {node} has beaten yet (none is recorded)", node)
    age = max((now - newest.last_beat).total_seconds(), 0.0)
    if age > max_age:
        return Liveness(False, f"the {queue} task worker on {node} (pid {newest.pid}) last beat {age:.0f} s ago, "
                        f"more than {max_age:g} s", node, newest.pid, age)
    return Liveness(True, f"the {queue} task worker on {node} (pid {newest.pid}) beat {age:.0f} s ago", node,
                    newest.pid, age)


def cluster_processes(status) -> list[int]:
    """The pids a django-q2 status (``django_q.status.Stat``) names: main process, sentinel, pool, monitor, pusher."""
    named = [status.pid, status.sentinel, *status.workers, status.monitor, status.pusher]
    return [pid for pid in named if pid]


def complete(status, *, workers: int) -> bool:
    """Whether a django-q2 status names a whole cluster: its pool of ``workers``, a monitor and a pusher."""
    return len(status.workers) == workers and bool(status.monitor) and bool(status.pusher)


def measure(pids: list[int]) -> tuple[int, int] | None:
    """(resident bytes together, processes) of ``pids``, or None when one of them is gone or a zombie."""
    total = 0
    for pid in pids:
        try:
            process = psutil.Process(pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            total += process.memory_info().rss
        except psutil.Error:
            return None
    return total, len(pids)


class Beating:
    """Mixed into django-q2's broker: its ``set_stat`` (called by the sentinel's guard loop) also beats."""

    _beaten_at: float | None = None

    def set_stat(self, key: str, value: str, timeout: int):
        try:  # first: a status the broker can't store (Redis away) still beats, or deletes the row at a stop
            self._beat(value)
        except Exception:  # the guard loop must go on whatever the heartbeat meets
            logger.exception("the task worker's heartbeat was not recorded")
        return super().set_stat(key, value, timeout)

    def _beat(self, value: str) -> None:
        from django_q.conf import Conf
        from django_q.signing import SignedPackage

        status = SignedPackage.loads(value)
        if status.sentinel != os.getpid():
            return  # only the sentinel beats (anything else saving a status is not the guard loop)
        if status.status == Conf.STOPPED:
            close_old_connections()
            forget(node=status.host, pid=status.pid)
            return
        if self._beaten_at is not None and time.monotonic() - self._beaten_at < BEAT_SECONDS:
            return
        if status.status not in (Conf.IDLE, Conf.WORKING) or not complete(status, workers=Conf.WORKERS):
            return  # starting, stopping, or a process the sentinel has yet to restart
        measured = measure(cluster_processes(status))
        if measured is None:
            return  # the sentinel restarts what died; the next turn of its loop beats if that worked
        self._beaten_at = time.monotonic()  # also when the write fails: tried (and logged) again in 30 s
        close_old_connections()  # the connection may be one the database closed since the last beat
        record_beat(Beat(node=status.host, pid=status.pid, started_at=status.tob, resident_bytes=measured[0],
                         processes=measured[1], reincarnations=status.reincarnations, queue=current_queue()))


class BeatingORM(Beating, ORM):
    """django-q2's Postgres broker, beating."""


def broker(list_key: str | None = None):
    """django-q2's broker for ``Q_CLUSTER["broker_class"]``: the one ``Q_CLUSTER`` names (Postgres or Redis),
    beating."""
    from django_q.conf import Conf

    return (BeatingORM if Conf.ORM else _beating_redis())(list_key=list_key)  # as django-q2 picks its own


@functools.cache
def _beating_redis() -> type:
    from django_q.brokers.redis_broker import Redis  # the redis extra: only where BOOKCHAT_Q_BROKER names Redis

    return type("BeatingRedis", (Beating, Redis), {"__module__": __name__,
                                                   "__doc__": "django-q2's Redis broker, beating."})


def __getattr__(name: str):
    if name == "BeatingRedis":  # where a pickled cluster status names it (django-q2 pickles its broker in it)
        return _beating_redis()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
