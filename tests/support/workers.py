"""A real django-q2 worker for tests: ``manage.py qcluster`` against the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from bookchat.base.queues import cluster_environment

REPO = Path(__file__).resolve().parent.parent.parent


class Cluster:
    """``manage.py qcluster`` against the test database, in a process group of its own: ``queue``'s cluster
    (``bookchat.base.queues``: indexing, the default, or background)."""

    def __init__(self, data_dir, log_dir=None, *, queue: str = "indexing"):
        from django.conf import settings
        from django.db import connection

        db = connection.settings_dict
        env = os.environ | {
            "BOOKCHAT_SECRET_KEY": settings.SECRET_KEY,  # django-q2 signs tasks with it
            "DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
            "BOOKCHAT_DATA_DIR": str(data_dir), "BOOKCHAT_TASK_WORKERS": "1", "BOOKCHAT_DEBUG": "false",
        } | cluster_environment(queue)
        self.log = open(Path(log_dir or data_dir) / f"qcluster-{queue}.log", "w+")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=REPO, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        try:
            self.kill()
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        finally:
            self.log.close()

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()
