"""``make run`` from a clean data folder: how long until the page answers, and until the first question about the
manual is answered.

``manage.py serve`` (what ``make run`` runs, the virtualenv already built) is started with a new, empty data folder:
its own embedded PostgreSQL is created, migrated, an admin login made, gunicorn and the task worker started, and the
manual indexed in the background. The bench polls ``/`` until it answers 200, asks the manual a question (503
``book_indexing`` while it is indexed), polls ``/api/v1/ready`` (questions are rate limited, readiness is not) until a
book can answer, and asks again until it is answered. Printed by ``manage.py bench --first-start``, and
part of ``make bench``.
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
                # One question while the manual is indexed (a 503 to ask again), then readiness polled (it is not rate
                # limited, as questions are) until a book can answer, and the question asked again.
                early = httpx.post(f"{url}/api/v1/ask", json={"question": QUESTION}, timeout=30)
                _until(lambda: httpx.get(f"{url}/api/v1/ready", timeout=10).status_code == 200, started, proc,
                       output)
                answer = _until(lambda: httpx.post(f"{url}/api/v1/ask", json={"question": QUESTION},
                                                   timeout=30).status_code == 200, started, proc, output)
                log(f"  the first question is answered {answer:.1f} s after `serve` started")
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
        indexed = re.search(r"(\d+) pages indexed, \d+ unchanged, (\d+) passages embedded, \d+ errors \(([\d.]+) s\)",
                            output.read_text())
        return {"page_seconds": round(page, 1), "answer_seconds": round(answer, 1),
                "early_status": early.status_code, "early_error": early.json().get("error"), "question": QUESTION,
                "pages": int(indexed[1]) if indexed else None, "passages": int(indexed[2]) if indexed else None,
                "indexing_seconds": float(indexed[3]) if indexed else None}


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
    return (f"make run from a clean data folder: the page answers after {figures['page_seconds']:.1f} s, the first "
            f"question about the manual after {figures['answer_seconds']:.1f} s (asked before: "
            f"{figures['early_status']} {figures['early_error']}); the manual's indexing: {figures['passages']} "
            f"passages of {figures['pages']} pages in {figures['indexing_seconds']} s")
