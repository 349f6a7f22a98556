"""`make run`'s last step, `manage.py serve`: migrate, admin login, index docs/, gunicorn + two django-q2
clusters (the indexing and the background queue); Ctrl-C stops all of them cleanly. Runs as a real subprocess
against the test database."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from chat.pipeline.editions import resolve_book
from ingestion.models import Book, Chunk, DefaultBook
from tests.conftest import REPO, committed
from tests.support.nodes import free_port

pytestmark = [pytest.mark.django_db, pytest.mark.slow, pytest.mark.drill]  # a whole `make run`: make drills


def wait_for(url: str, deadline: float) -> int:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in time")


def test_serve_indexes_the_bundled_book_and_yours_serves_the_admin_and_stops_on_ctrl_c(settings, manual_book,
                                                                                         tmp_path):
    """As `make run BOOK=path/to/book` runs it: the manual, then the user's book, which becomes the default."""
    db = settings.DATABASES["default"]
    url = f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}"
    port = free_port()
    own = tmp_path / "serve-own-book"
    own.mkdir()
    (own / "intro.md").write_text("# Orchard care\n\nPrune the apple trees in late winter, before the buds open.\n")
    env = {key: value for key, value in os.environ.items() if key != "BOOKCHAT_DEFAULT_BOOK"} | {
        "DATABASE_URL": url, "PORT": str(port), "BOOKCHAT_ADMIN_PASSWORD": "test-admin-pass",
        "BOOKCHAT_WEB_WORKERS": "1", "BOOKCHAT_DEBUG": "false"}
    started = timezone.now()
    proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--book", str(own)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert wait_for(f"http://127.0.0.1:{port}/admin/login/", time.monotonic() + 240) == 200
        children = psutil.Process(proc.pid).children(recursive=True)
        task_workers = [c for c in children if "qcluster" in " ".join(c.cmdline())]
        web_priority = psutil.Process(proc.pid).nice()
        assert task_workers and all(c.nice() > web_priority for c in task_workers), "indexing yields the cores"
        by_queue = {c.environ().get("Q_CLUSTER_NAME", "bookchat"): c.nice() for c in task_workers}
        assert set(by_queue) == {"bookchat", "background"}, "both queues' clusters run"
        assert by_queue["background"] > by_queue["bookchat"], "background work yields the cores to indexing"
        # Both books are indexed in the background by the task worker, while the page already answers.
        deadline = time.monotonic() + 120
        while (own_passages := committed(lambda: Chunk.objects.filter(book__slug="serve-own-book").count())) == 0:
            assert time.monotonic() < deadline, "your book was not indexed in the background"
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            assert b'data-book="serve-own-book"' in response.read(), "your book is the default"
        # Stored, not in serve's children's environment: this process (another shell's `manage.py ask`) reads it.
        assert committed(DefaultBook.stored) == "serve-own-book"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/?book=bookchat-manual", timeout=5) as response:
            assert b'data-book="bookchat-manual"' in response.read(), "the manual stays"
        from ingestion.models import IngestionJob

        def ended() -> int:  # this serve's jobs only: another drill's serve may have indexed the manual before
            return IngestionJob.objects.filter(source="local", book_slug__in=["serve-own-book", "bookchat-manual"],
                                               status__in=["done", "failed"], created_at__gte=started).count()

        while committed(ended) < 2:  # the first book calibrated too (its jobs end after that)
            assert time.monotonic() < deadline, "the background jobs did not end"
            time.sleep(0.5)
        # Its first run has ended (it calibrates after its passages are stored): resolved from the stored default.
        assert committed(lambda: resolve_book(None).slug) == "serve-own-book"
        time.sleep(1.5)  # serve reports the jobs' ends at its next look
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground process group
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # serve starts its workers in sessions of their own: kill each, not only its group
            for process in [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            proc.wait()
        committed(lambda: Book.objects.filter(slug="serve-own-book").delete())
        committed(lambda: DefaultBook.objects.all().delete())
    assert proc.returncode == 0, out
    # The manual went through an index run (this session had indexed it already, so its pages are unchanged),
    # then your book was indexed and holds its passage.
    assert re.search(r"bookchat is serving http://127.0.0.1:\d+/ .*\nIndexing the bundled book in .+ in the "
                     r"background …", out), out
    manual = re.search(r"\n  (\d+) pages indexed, (\d+) unchanged, \d+ passages embedded, 0 errors", out)
    assert manual, out
    assert int(manual[1]) + int(manual[2]) == manual_book["files_seen"] - manual_book["files_skipped"] > 0
    assert "Book 'serve-own-book': 1 files seen, 1 indexed, 0 unchanged, 0 skipped, 0 failed." in out
    assert own_passages >= 1
    assert "Your book 'serve-own-book' is the default book" in out
    assert "with password" not in out, "a password from BOOKCHAT_ADMIN_PASSWORD is never printed"
    assert "Stopped." in out
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left running: {[c.cmdline() for c in alive]}"
    with pytest.raises(CommandError, match=r"--book: .*nowhere does not exist"):  # before anything starts
        call_command("serve", "--book", str(tmp_path / "nowhere"))
    with pytest.raises(CommandError, match="--book is for --role all"):
        call_command("serve", "--role", "web", "--book", str(own))
    book = Book.objects.get(slug="bookchat-manual")
    assert book.documents.count() >= 8
