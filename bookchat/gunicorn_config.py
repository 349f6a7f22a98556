"""gunicorn's server hooks for bookchat (``gunicorn -c python:bookchat.gunicorn_config``, which
``serve.gunicorn_command`` passes): with ``/metrics`` on, the workers count in prometheus_client's multiprocess
files, so that a scrape any worker answers shows them all.

- ``on_starting`` (the arbiter, before any worker is forked): ``PROMETHEUS_MULTIPROC_DIR`` names a fresh folder,
  made here and removed at exit, or the operator's own, emptied of the previous run's files: counts begin at
  zero with each start, as one process's do. The variable must be set before prometheus_client is imported
  (it chooses how to store values then), hence nothing here imports it at the top.
- ``child_exit``: a worker that ended (restarted, killed) leaves its counts in the sums, but its per-worker
  gauges go (``mark_process_dead``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
_made_here: dict[str, str] = {}


def metrics_on() -> bool:
    from bookchat.base.conf import environment_value
    from bookchat.base.errors import ConfigurationError

    try:
        return bool((environment_value("BOOKCHAT_METRICS_TOKEN") or "").strip())
    except ConfigurationError:  # the workers' settings name it when they load
        return False


def on_starting(server) -> None:
    if not metrics_on():
        return
    folder = os.environ.get(MULTIPROCESS_DIR)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for stale in Path(folder).glob("*.db"):
            stale.unlink(missing_ok=True)
    else:
        folder = tempfile.mkdtemp(prefix="bookchat-metrics-")
        _made_here["folder"] = folder
        os.environ[MULTIPROCESS_DIR] = folder


def child_exit(server, worker) -> None:
    if os.environ.get(MULTIPROCESS_DIR):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def on_exit(server) -> None:
    if "folder" in _made_here:
        shutil.rmtree(_made_here.pop("folder"), ignore_errors=True)
