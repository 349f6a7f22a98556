"""What staff did from the command line, where the admin's own log can't see it: API keys created and revoked
(``apikey``), lockouts lifted (``lockouts``), second factors reset (``twofactor``).

What staff do in the admin (uploads, retries, deletions, keys, review decisions, changes to users, their groups
and their books) is in Django's admin log, which the admin lists under "Admin log" for superusers; this table is
its command-line half, listed beside it as "Command-line log". A command runs as an account of the machine,
not as a bookchat user, so a row names that account.
"""

from __future__ import annotations

import getpass

from django.db import models
from django.utils import timezone


def machine_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for the process's uid (a container)
        return "unknown"


class StaffCommand(models.Model):
    at = models.DateTimeField(default=timezone.now, db_index=True)
    machine_user = models.CharField(max_length=150, help_text="The machine's account that ran the command.")
    command = models.CharField(max_length=200, help_text="The command line, without secrets.")
    action = models.CharField(max_length=100)
    target = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "command-line action"
        verbose_name_plural = "command-line log"

    def __str__(self) -> str:
        return f"{self.action} {self.target}".strip()

    @classmethod
    def record(cls, command: str, action: str, target: str = "") -> StaffCommand:
        """``command``: what was run as the operator would type it, never a secret (``apikey revoke pk_AbC12``)."""
        return cls.objects.create(machine_user=machine_user(), command=f"manage.py {command}"[:200], action=action,
                                  target=target[:300])


class TaskWorker(models.Model):
    """One django-q2 cluster's heartbeat, updated in place (``bookchat.task_workers``): which node and process it
    is, since when it runs, when its sentinel last found every process of it alive, and their memory."""

    node = models.CharField(max_length=255, help_text="The host name of the machine (or pod) it runs on.")
    pid = models.PositiveIntegerField(help_text="The cluster's main process (`qcluster`).")
    queue = models.CharField(max_length=32, default="indexing", help_text="The task queue it works on: `indexing` "
                             "or `background` (bookchat.base.queues).")
    started_at = models.DateTimeField()
    last_beat = models.DateTimeField(db_index=True)
    resident_bytes = models.PositiveBigIntegerField(default=0, help_text="Resident memory of the cluster's "
                                                    "processes together (shared pages counted in each).")
    processes = models.PositiveSmallIntegerField(default=0, help_text="The cluster's processes found alive.")
    reincarnations = models.PositiveIntegerField(default=0, help_text="Processes the sentinel restarted.")

    class Meta:
        ordering = ["node", "pid"]
        constraints = [models.UniqueConstraint(fields=["node", "pid"], name="one_heartbeat_per_task_worker")]

    def __str__(self) -> str:
        return f"{self.node}:{self.pid}"
