"""The two task queues: ``indexing`` (what a reader or a publisher waits for: uploads, publishes and syncs from CI,
``make run``'s books) and ``background`` (what may wait: a book's sentence vectors, its queued calibration, its
staff answers following it, topics, and every schedule: retention, the session purge, the upload sweep, the
hand-off e-mail). Each is a django-q2 cluster of its own, so that a publish never waits behind background work.

Decisions (the manual, "Deploying and running"; BENCHMARKS.md, "Publishing behind background work"):
- Two clusters, not priorities: django-q2 takes tasks in the order they were queued, and a worker busy with a book's
  sentence vectors (a minute and more for a big book) holds them until it ends, whatever comes after. A second
  cluster with its own worker starts a publish at once; the background one runs at a lower CPU priority
  (``BACKGROUND_EXTRA_NICENESS`` above ``TASK_NICENESS``), so the publish's embedding gets the cores first.
- The indexing queue keeps django-q2's cluster name ``bookchat`` (``Q_CLUSTER["name"]``): tasks queued before an
  upgrade still run, and a deployment's ``serve --role worker`` starts both clusters with the same command line.
  The background cluster is ``Q_CLUSTER["ALT_CLUSTERS"]["background"]``, chosen by the ``Q_CLUSTER_NAME``
  environment variable of its ``qcluster`` (django-q2's multi-queue: an ORM queue's ``key``, a Redis list of its
  own). Tasks name their queue explicitly (``queue_task``): inside a cluster django-q2's default is that cluster's.
- Schedules run on the background cluster (``Schedule.cluster``); only its scheduler takes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

INDEXING = "indexing"
BACKGROUND = "background"
QUEUES = (INDEXING, BACKGROUND)
# django-q2's cluster (and queue) name of each queue.
CLUSTER_NAMES = {INDEXING: "bookchat", BACKGROUND: "background"}
BACKGROUND_WORKERS = 1  # background work is never waited for: one task at a time, beside indexing
BACKGROUND_EXTRA_NICENESS = 5  # the background cluster's CPU niceness above TASK_NICENESS
# Processes of a cluster besides its pool that may hold a database connection: sentinel, monitor, pusher.
CLUSTER_OVERHEAD = 3


def cluster_name(queue: str) -> str:
    return CLUSTER_NAMES[queue]


def queue_of(cluster: str) -> str:
    """The queue a django-q2 cluster name stands for (a name of neither: the indexing one, django-q2's default)."""
    return next((queue for queue, name in CLUSTER_NAMES.items() if name == cluster), INDEXING)


def current_queue() -> str:
    """The queue of the cluster this process belongs to (``Q_CLUSTER_NAME``); the indexing one outside a cluster."""
    from django_q.conf import Conf

    return queue_of(Conf.CLUSTER_NAME)


def alt_clusters(*, timeout: int, retry: int) -> dict:
    """``Q_CLUSTER["ALT_CLUSTERS"]``: what the background cluster changes of ``Q_CLUSTER``."""
    return {CLUSTER_NAMES[BACKGROUND]: {"workers": BACKGROUND_WORKERS, "timeout": timeout, "retry": retry}}


def cluster_environment(queue: str) -> dict[str, str]:
    """What a ``qcluster`` process's environment needs to be ``queue``'s cluster."""
    return {"Q_CLUSTER_NAME": CLUSTER_NAMES[queue]}


def workers(queue: str) -> int:
    from bookchat.base.conf import setting

    return setting("TASK_WORKERS") if queue == INDEXING else BACKGROUND_WORKERS


def niceness(queue: str) -> int:
    """The CPU niceness ``serve`` gives ``queue``'s cluster (0: none)."""
    from bookchat.base.conf import setting

    base = setting("TASK_NICENESS")
    return base if queue == INDEXING else min(base + BACKGROUND_EXTRA_NICENESS, 19)


def queue_task(queue: str, func: str | Callable, *args: Any, **kwargs: Any) -> str:
    """``django_q.tasks.async_task`` on ``queue`` (its task id)."""
    from django_q.tasks import async_task

    return async_task(func, *args, cluster=CLUSTER_NAMES[queue], **kwargs)
