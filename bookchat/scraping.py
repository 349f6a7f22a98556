"""``/metrics``: what ``bookchat.base.metrics`` counted, plus what is read when Prometheus scrapes (the task queue and
the task workers' heartbeats, the books' passages, index runs and jobs, the hand-offs waiting for the course staff,
the web workers' memory), in Prometheus' text format.

Off unless ``METRICS_TOKEN`` is set (404); then a scrape must send it as a bearer token (401 otherwise, compared
in constant time) and, with ``METRICS_ALLOW``, come from a listed address (403). Under gunicorn the counts are
every worker's (prometheus_client's multiprocess files); elsewhere this process's. A part that can't be read (the
database down) is left out and logged, and ``bookchat_scrape_ok`` says so; the scrape itself still answers.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Iterator

import psutil
from django.db.models import Count, Min, Q
from django.http import Http404, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from audit.handoffs import open_by_book
from bookchat import task_workers
from bookchat.base import metrics, queues
from bookchat.base.broker import queue_in_database
from bookchat.base.conf import setting
from bookchat.base.errors import ConfigurationError
from bookchat.base.security import client_ip
from ingestion.models import Book, IndexRun, IngestionJob

logger = logging.getLogger(__name__)

REALM = 'Bearer realm="bookchat metrics"'
MAX_AUTHORIZATION_CHARS = 1024  # a token is a line of a secret file, not a document


@require_safe
def metrics_view(request) -> HttpResponse:
    token = setting("METRICS_TOKEN")
    if not token:
        raise Http404("metrics are off")
    if not address_allowed(client_ip(request)):
        return _plain(403, "this address may not read the metrics (BOOKCHAT_METRICS_ALLOW)\n")
    if not token_matches(request.META.get("HTTP_AUTHORIZATION", ""), token):
        response = _plain(401, "send the metrics token as `Authorization: Bearer TOKEN`\n")
        response["WWW-Authenticate"] = REALM
        return response
    encode, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
    response = HttpResponse(encode(Scrape()), content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response


def _plain(status: int, text: str) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


def token_matches(header: str, token: str) -> bool:
    """Whether an ``Authorization`` header is ``Bearer <token>`` (the scheme in any case), compared in constant
    time. Anything else (no header, another scheme, no token, an overlong or undecodable value) is False."""
    if not header or len(header) > MAX_AUTHORIZATION_CHARS:
        return False
    scheme, _, sent = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    try:
        # WSGI hands headers over as Latin-1; what the client sent were bytes, compared as such.
        return hmac.compare_digest(sent.strip().encode("latin-1"), token.encode("utf-8"))
    except UnicodeEncodeError:
        return False


def allowed_networks(value: str | None = None) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``METRICS_ALLOW`` as networks (an address alone is a network of one), or ConfigurationError naming the
    entry that is neither (checked at start, ``bookchat.checks``)."""
    value = setting("METRICS_ALLOW") if value is None else value
    networks = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ConfigurationError(f"BOOKCHAT_METRICS_ALLOW: {entry!r} is neither an address nor a network "
                                     "like 10.0.0.0/8", code="bad_setting") from None
    return networks


def address_allowed(address: str) -> bool:
    networks = allowed_networks()
    if not networks:
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks if network.version == ip.version)


class Scrape:
    """What one scrape shows (a prometheus_client collector): the counts, then what is read now."""

    def collect(self) -> Iterator[Metric]:
        parts = {"database": database_metrics, "queue": queue_metrics, "memory": memory_metrics}
        ok = GaugeMetricFamily("bookchat_scrape_ok", "Whether this part of the scrape could be read (1) or was "
                               "left out (0, logged).", labels=["part"])
        yield from counted().collect()
        for name, part in parts.items():
            try:
                families = list(part())
            except Exception:
                logger.exception("reading the %s metrics failed; left out of this scrape", name)
                ok.add_metric([name], 0)
                continue
            ok.add_metric([name], 1)
            yield from families
        yield ok


def counted():
    """What ``bookchat.base.metrics`` counted: every gunicorn worker's, summed, in multiprocess mode; else this
    process's (with prometheus_client's own process and Python metrics)."""
    folder = metrics.multiprocess_dir()
    if folder is None:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)
    return registry


def database_metrics() -> Iterator[Metric]:
    passages = GaugeMetricFamily("bookchat_book_passages", "Passages (chunks) stored per book or edition.",
                                 labels=["book"])
    pages = GaugeMetricFamily("bookchat_book_pages", "Pages stored per book or edition.", labels=["book"])
    for slug, page_count, passage_count in Book.objects.with_counts().values_list(
            "slug", "document_count", "chunk_count"):
        passages.add_metric([slug], passage_count)
        pages.add_metric([slug], page_count)
    runs = CounterMetricFamily("bookchat_index_runs", "Indexing runs recorded, by status and what started them "
                               "(a deleted book's runs go with it).", labels=["status", "trigger"])
    for status, trigger, n in (IndexRun.objects.order_by().values_list("status", "trigger")
                               .annotate(n=Count("pk"))):
        runs.add_metric([status, trigger], n)
    jobs = CounterMetricFamily("bookchat_indexing_jobs", "Background indexing jobs by source (upload: the admin; "
                               "publish: a sync from a book's CI; local: a folder on the server) and status.",
                               labels=["source", "status"])
    for source, status, n in (IngestionJob.objects.order_by().values_list("source", "status")
                              .annotate(n=Count("pk"))):
        jobs.add_metric([source, status], n)
    yield from (passages, pages, runs, jobs)
    yield from handoff_metrics()


def handoff_metrics(now=None) -> Iterator[Metric]:
    """Each book's open hand-offs to the course staff and the age of the oldest: every book students read (a root
    book; 0 when none waits, so that an alert has a series), and any other slug a hand-off still names."""
    now = now or timezone.now()
    waiting = GaugeMetricFamily("bookchat_handoffs_open", "Hand-offs to the course staff not yet answered, declined "
                                "or marked for the book, per book.", labels=["book"])
    oldest = GaugeMetricFamily("bookchat_handoff_oldest_open_seconds", "How long the oldest open hand-off of each "
                               "book has waited (0: none waits).", labels=["book"])
    found = open_by_book()
    for slug in sorted(set(Book.objects.roots().values_list("slug", flat=True)) | set(found)):
        row = found.get(slug)
        waiting.add_metric([slug], row["open"] if row else 0)
        oldest.add_metric([slug], max((now - row["oldest"]).total_seconds(), 0.0) if row else 0.0)
    yield from (waiting, oldest)


def queue_metrics() -> Iterator[Metric]:
    """django-q2's two queues together (indexing and background): tasks waiting, tasks a worker has taken, and how
    long the oldest has waited (the Postgres queue only; a Redis list keeps no times); then the task workers'
    heartbeats."""
    waiting = GaugeMetricFamily("bookchat_queue_tasks", "Tasks waiting in the task queue for a worker.")
    taken = GaugeMetricFamily("bookchat_queue_tasks_taken", "Tasks a worker has taken and not yet finished.")
    if queue_in_database():
        from django_q.models import OrmQ

        now = timezone.now()
        row = OrmQ.objects.filter(key__in=queues.CLUSTER_NAMES.values()).aggregate(
            waiting=Count("pk", filter=Q(lock__lte=now)), taken=Count("pk", filter=Q(lock__gt=now)),
            oldest=Min("lock", filter=Q(lock__lte=now)))
        waiting.add_metric([], row["waiting"])
        taken.add_metric([], row["taken"])
        age = GaugeMetricFamily("bookchat_queue_oldest_task_age_seconds", "How long the oldest waiting task has "
                                "waited (0: none waits).")
        age.add_metric([], (now - row["oldest"]).total_seconds() if row["oldest"] else 0.0)
        yield from (waiting, taken, age)
        yield from task_worker_metrics()
        return
    from django_q.brokers import get_broker

    brokers = [get_broker(name) for name in queues.CLUSTER_NAMES.values()]
    waiting.add_metric([], sum(broker.queue_size() for broker in brokers))
    taken.add_metric([], sum(broker.lock_size() or 0 for broker in brokers))
    yield from (waiting, taken)
    yield from task_worker_metrics()


def task_worker_metrics(now=None) -> Iterator[Metric]:
    """The task workers' heartbeats (``bookchat.task_workers``): how many beat within two minutes, and each one's
    memory and the age of its last beat (every worker seen in the last day, so that one that stopped beating shows)."""
    now = now or timezone.now()
    running = GaugeMetricFamily("bookchat_task_workers", "Task workers (django-q2 clusters, every node) whose "
                                "heartbeat came within the last 2 minutes.")
    rss = GaugeMetricFamily("bookchat_task_worker_resident_bytes", "Resident memory of each task worker's "
                            "processes together, at its last heartbeat.", labels=["node", "pid"])
    age = GaugeMetricFamily("bookchat_task_worker_heartbeat_age_seconds", "Seconds since each task worker's last "
                            "heartbeat (it beats every 30 s while all its processes are alive).",
                            labels=["node", "pid"])
    recent = 0
    for worker in task_workers.seen(now=now):
        seconds = max((now - worker.last_beat).total_seconds(), 0.0)
        recent += seconds <= task_workers.RECENT.total_seconds()
        rss.add_metric([worker.node, str(worker.pid)], worker.resident_bytes)
        age.add_metric([worker.node, str(worker.pid)], seconds)
    running.add_metric([], recent)
    yield from (running, rss, age)


def memory_metrics() -> Iterator[Metric]:
    """Resident memory of each web worker of this gunicorn (read now, from the operating system), or of this
    process when it is not one."""
    rss = GaugeMetricFamily("bookchat_worker_resident_bytes", "Resident memory of each web worker process.",
                            labels=["pid"])
    me = psutil.Process(os.getpid())
    parent = me.parent()
    workers = [me]
    if metrics.multiprocess_dir() and parent is not None and _is_gunicorn(parent):
        workers = parent.children()
    for process in workers:
        try:
            rss.add_metric([str(process.pid)], process.memory_info().rss)
        except psutil.Error:  # it ended meanwhile
            continue
    yield rss


def _is_gunicorn(process: psutil.Process) -> bool:
    try:
        return any("gunicorn" in part for part in process.cmdline()[:4])
    except psutil.Error:
        return False
