"""Publishing from CI: how long a sync takes from the POST to ``done``, as a book's CI sees it.

A web server (gunicorn, as ``serve --role web`` starts it) and a task worker (``serve --role worker``) run on the
development database; the whole docusaurus-docs site (92 pages) is published once as a new book, then one page is
edited (a paragraph appended) and published again, ``repeats`` times, and the same edit as a dry run. Each figure is
the time from just before the POST to the first status poll (every 0.1 s) that says ``done``: the upload and its
checks, the wait in the queue, the worker's run (reading every page's bytes, embedding the edited page, the switch).
What the worker does after it (the book's sentence vectors and recalibration, tasks of their own) is timed apart,
until the task queue is empty, and the next sync waits for that. Printed by ``manage.py bench --publishing``, and part
of ``make bench``.

``behind_background`` (``manage.py bench --publishing-behind-background``): a small book (docusaurus-docs' first
``SMALL_PAGES`` pages) is published and settled; then the whole site is published as another new book and, as soon
as that sync is done (its sentence vectors just queued), one page of the small book is edited and published, without
waiting for the queue. Its POST to ``done`` is what a CI publish right after another book's first publish waits:
behind that background work on one queue, beside it on two (``bookchat.base.queues``).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import httpx
from django.conf import settings
from django_q.models import OrmQ

from bench.latency import Gunicorn, database_environment
from chat.channels.keys import api_key_create
from chat.models import ApiKey
from ingestion.models import Book, IngestionJob

BOOK = "bench-publish"
SMALL_BOOK = "bench-publish-small"
SMALL_PAGES = 5
POLL_SECONDS = 0.1


def publishing(data: Path, *, repeats: int, log) -> dict:
    Book.objects.filter(slug=BOOK).delete()
    ApiKey.objects.filter(publish_book=BOOK).delete()
    _, key = api_key_create(kind=ApiKey.SECRET, publish_book=BOOK)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/gzip"}
    with tempfile.TemporaryDirectory(prefix="bookchat-bench-publish-") as scratch, Worker(Path(scratch)) as worker, \
            Gunicorn(workers=1, env={"BOOKCHAT_DATA_DIR": worker.data_dir}) as web:
        site = Path(scratch) / "site"
        shutil.copytree(data / "docusaurus-docs" / "docs", site / "docs")
        pages = sum(1 for _ in (site / "docs").rglob("*.md*"))
        log(f"  publishing docusaurus-docs ({pages} files) as a new book …")
        first = sync(web.url, site, headers)
        edited_file = max((site / "docs").rglob("*.mdx"), key=lambda p: p.stat().st_size)
        edits = []
        for n in range(repeats):
            edited_file.write_text(edited_file.read_text() + f"\n\nA paragraph added by the benchmark, edit {n}.\n")
            edits.append(sync(web.url, site, headers))
            log(f"  one page edited and published: {edits[-1]['seconds']:.1f} s")
        edited_file.write_text(edited_file.read_text() + "\n\nOne more paragraph, for the dry run.\n")
        dry = sync(web.url, site, headers, dry_run=True)
    Book.objects.filter(slug=BOOK).delete()
    ApiKey.objects.filter(publish_book=BOOK).delete()
    seconds = [edit["seconds"] for edit in edits]
    return {"pages": pages, "first": first, "edits": edits, "dry_run": dry, "edited_file": edited_file.name,
            "edited_median": statistics.median(seconds), "edited_max": max(seconds)}


def behind_background(data: Path, *, log) -> dict:
    """One edited page of a small book published right after the whole site's first publish as another book."""
    books = (BOOK, SMALL_BOOK)
    Book.objects.filter(slug__in=books).delete()
    ApiKey.objects.filter(publish_book__in=books).delete()
    headers = {slug: {"Authorization": f"Bearer {api_key_create(kind=ApiKey.SECRET, publish_book=slug)[1]}",
                      "Content-Type": "application/gzip"} for slug in books}
    with tempfile.TemporaryDirectory(prefix="bookchat-bench-publish-") as scratch, Worker(Path(scratch)) as worker, \
            Gunicorn(workers=1, env={"BOOKCHAT_DATA_DIR": worker.data_dir}) as web:
        site, small = Path(scratch) / "site", Path(scratch) / "small"
        shutil.copytree(data / "docusaurus-docs" / "docs", site / "docs")
        pages = sorted(p for p in (site / "docs").rglob("*.md*") if not p.name.startswith("_"))
        (small / "docs").mkdir(parents=True)
        for page in pages[:SMALL_PAGES]:
            shutil.copy(page, small / "docs" / page.name)
        log(f"  publishing {SMALL_PAGES} pages as a small book, then docusaurus-docs ({len(pages)} files) …")
        sync(web.url, small, headers[SMALL_BOOK], book=SMALL_BOOK)
        first = sync(web.url, site, headers[BOOK], settle_after=False)
        waiting = OrmQ.objects.count()  # the work after the first publish, queued as it ended
        edited = sorted((small / "docs").iterdir())[0]
        edited.write_text(edited.read_text() + "\n\nA paragraph added by the benchmark.\n")
        edit = sync(web.url, small, headers[SMALL_BOOK], book=SMALL_BOOK, settle_first=False)
        log(f"  one page of the small book edited and published behind {waiting} queued tasks: "
            f"{edit['seconds']:.1f} s")
    Book.objects.filter(slug__in=books).delete()
    ApiKey.objects.filter(publish_book__in=books).delete()
    return {"pages": len(pages), "first": first, "tasks_waiting": waiting, "edit": edit}


def describe_behind_background(figures: dict) -> str:
    edit = figures["edit"]
    return (f"one edited page of a {SMALL_PAGES}-page book published right after docusaurus-docs' first publish "
            f"({figures['pages']} files, {figures['first']['seconds']:.1f} s, {figures['tasks_waiting']} tasks "
            f"queued after it): POST to done {edit['seconds']:.1f} s, of which queued {edit['queued_seconds']:.1f} s "
            f"and the worker's run {edit['worker_seconds']:.1f} s; the queue emptied {edit['after_seconds']:.1f} s "
            "later")


def sync(url: str, site: Path, headers: dict, *, dry_run: bool = False, book: str = BOOK, settle_first: bool = True,
         settle_after: bool = True) -> dict:
    """Publish ``site`` as ``book`` and wait for the sync to end; its figures. ``settle_first``/``settle_after``:
    wait for the task queue to empty before the POST, and after the sync (``after_seconds``)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(site, arcname=".")
    body = buffer.getvalue()
    if settle_first:
        settle()
    started = time.monotonic()
    response = httpx.post(f"{url}/api/v1/books/{book}/sources", params={"dry_run": str(dry_run).lower()},
                          content=body, headers=headers, timeout=120)
    response.raise_for_status()
    accepted = time.monotonic() - started
    status_url = response.json()["status_url"]
    while True:
        status = httpx.get(status_url, headers=headers, timeout=60).json()
        if status["status"] in ("done", "failed"):
            break
        time.sleep(POLL_SECONDS)
    seconds = time.monotonic() - started
    if status["status"] != "done":
        raise RuntimeError(f"sync {status['sync']} failed: {status['error']}")
    job = IngestionJob.objects.get(pk=status["sync"])
    report = status["report"]
    after = settle() if settle_after else 0.0
    return {"seconds": round(seconds, 2), "after_seconds": round(after, 2), "accepted_seconds": round(accepted, 2),
            "bytes": len(body),
            "queued_seconds": round((job.started_at - job.created_at).total_seconds(), 2),
            "worker_seconds": job.index_seconds, "indexing_seconds": report["seconds"],
            "pages": report["pages"], "embedded": report["passages"]["embedded"], "dry_run": dry_run}


def settle(limit: float = 900.0) -> float:
    """Wait until the task queue is empty (the work queued after a sync has run); the seconds waited."""
    started = time.monotonic()
    while OrmQ.objects.exists() and time.monotonic() - started < limit:
        time.sleep(POLL_SECONDS)
    return time.monotonic() - started


class Worker:
    """``serve --role worker`` on the development database, with a data folder of its own (shared with the web
    server: the uploads wait there)."""

    def __init__(self, scratch: Path):
        self.data_dir = str(scratch / "data")
        env = database_environment() | {"BOOKCHAT_DATA_DIR": self.data_dir, "BOOKCHAT_TASK_WORKERS": "1",
                                        "BOOKCHAT_DEBUG": "false"}
        self.log = open(scratch / "worker.log", "w")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--role", "worker"],
                                     cwd=Path(settings.BASE_DIR), env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def __enter__(self) -> Worker:
        time.sleep(3.0)  # the cluster starts in a second or two; a sync queued before it waits in the queue anyway
        if self.proc.poll() is not None:
            raise RuntimeError(f"the worker exited: {Path(self.log.name).read_text()[-2000:]}")
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def describe(figures: dict) -> str:
    first, dry = figures["first"], figures["dry_run"]
    edits = ", ".join(f"{edit['seconds']:.1f}" for edit in figures["edits"])
    return (f"docusaurus-docs ({figures['pages']} files) published as a new book in {first['seconds']:.1f} s "
            f"({first['embedded']} passages embedded); one page ({figures['edited_file']}) edited and published: "
            f"{edits} s (median {figures['edited_median']:.1f}), of which queued "
            f"{statistics.median(e['queued_seconds'] for e in figures['edits']):.1f} s and the worker's run "
            f"{statistics.median(e['worker_seconds'] for e in figures['edits']):.1f} s, then the work after it "
            f"{statistics.median(e['after_seconds'] for e in figures['edits']):.1f} s; the same edit as a dry run "
            f"{dry['seconds']:.1f} s")
