"""``make run`` from a clean data folder: how long until the page answers, and until the first question about the
manual is answered.

``manage.py serve`` (what ``make run`` runs, the virtualenv already built) is started with a new, empty data folder:
its own embedded PostgreSQL is created, migrated, an admin login made, gunicorn and the task worker started, and the
manual indexed in the background. The bench polls ``/`` until it answers 200, asks the manual a question (503
``book_indexing`` while it is indexed) every second, as a student would, until it is answered, while ``/api/v1/ready``
is polled beside it: how long after the book is ready the first answer comes (the 503s count against no limit).
Printed by ``manage.py bench --first-start``, and part of ``make bench``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from django.conf import settings

QUESTION = "How do I add the widget to my Docusaurus site?"
LIMIT_SECONDS = 600


def first_start(*, log) -> dict:
    with tempfile.TemporaryDirectory(prefix="bookchat-bench-first-start-") as scratch:
        port = _free_port()
        env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL",)
               and not key.startswith("BOOKCHAT_")} | {
            "BOOKCHAT_DATA_DIR": str(Path(scratch) / "var"), "PORT": str(port), "BOOKCHAT_DEBUG": "true",
            "BOOKCHAT_ADMIN_PASSWORD": "bench-first-start", "PYTHONUNBUFFERED": "1"}
        output = Path(scratch) / "serve.log"
        url = f"http://127.0.0.1:{port}"
        with open(output, "w") as out:
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "manage.py", "serve"], cwd=Path(settings.BASE_DIR), env=env,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                page = _until(lambda: httpx.get(f"{url}/", timeout=10).status_code == 200, started, proc, output)
                log(f"  the page answers {page:.1f} s after `serve` started")
                # A client asks every second from then on, as a student would (503 book_indexing while the manual is
                # indexed; refusals that did no work count against no limit), while readiness is polled beside it.
                ready: list[float] = []
                poller = threading.Thread(target=lambda: ready.append(_until(
                    lambda: httpx.get(f"{url}/api/v1/ready", timeout=10).status_code == 200, started, proc, output)),
                    daemon=True)
                poller.start()
                statuses: dict[int, int] = {}
                early = None
                while True:
                    asked = time.monotonic()
                    reply = _ask(url)
                    early = early or reply
                    statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
                    if reply.status_code == 200:
                        answer = time.monotonic() - started
                        break
                    if time.monotonic() - started > LIMIT_SECONDS or proc.poll() is not None:
                        raise RuntimeError(f"no answer: {statuses}; {output.read_text()[-2000:]}")
                    time.sleep(max(0.0, 1.0 - (time.monotonic() - asked)))
                poller.join(timeout=30)
                log(f"  the book is ready {ready[0]:.1f} s and the first question is answered {answer:.1f} s after "
                    f"`serve` started (asked every second: {statuses})")
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
        indexed = re.search(r"(\d+) pages indexed, \d+ unchanged, (\d+) passages embedded, \d+ errors \(([\d.]+) s\)",
                            output.read_text())
        return {"page_seconds": round(page, 1), "ready_seconds": round(ready[0], 1) if ready else None,
                "answer_seconds": round(answer, 1), "asked": {str(k): v for k, v in sorted(statuses.items())},
                "early_status": early.status_code, "early_error": early.json().get("error"), "question": QUESTION,
                "pages": int(indexed[1]) if indexed else None, "passages": int(indexed[2]) if indexed else None,
                "indexing_seconds": float(indexed[3]) if indexed else None}


def _ask(url: str) -> httpx.Response:
    try:
        return httpx.post(f"{url}/api/v1/ask", json={"question": QUESTION}, timeout=30)
    except httpx.HTTPError:
        return httpx.Response(599)


def _until(check, started: float, proc: subprocess.Popen, output: Path, *, pause: float = 0.2) -> float:
    while time.monotonic() - started < LIMIT_SECONDS:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited: {output.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if check():
                return time.monotonic() - started
        time.sleep(pause)
    raise RuntimeError(f"not reached in {LIMIT_SECONDS} s: {output.read_text()[-2000:]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def describe(figures: dict) -> str:
    ready = figures.get("ready_seconds")
    after_ready = f", {figures['answer_seconds'] - ready:.1f} s after the book was ready" if ready is not None else ""
    return (f"make run from a clean data folder: the page answers after {figures['page_seconds']:.1f} s, the first "
            f"question about the manual, asked every second, is answered after {figures['answer_seconds']:.1f} s"
            f"{after_ready} (replies: {figures.get('asked')}; the first: {figures['early_status']} "
            f"{figures['early_error']}); the manual's indexing: {figures['passages']} passages of {figures['pages']} "
            f"pages in {figures['indexing_seconds']} s")
