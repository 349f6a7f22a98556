"""``manage.py worker``: the task workers' heartbeats (``bookchat.task_workers``).

``worker alive`` is a liveness check for an exec probe: exit 0 when a task worker of each queue (indexing and
background, or the one ``--queue`` names) on this machine (its host name, or ``--node``) beat within ``--max-age``
seconds (120), else exit 1 with one line saying why (none recorded, the last beat too old, the database
unreadable). ``worker list`` shows every worker seen in the last day. Human text,
or one JSON object with ``--json``; wrong options exit 2.
"""

from __future__ import annotations

import argparse
import json
import math

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from django.utils import timezone

from bookchat import task_workers
from bookchat.base.queues import QUEUES


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


class Command(BaseCommand):
    help = ("The task workers' heartbeats: `alive` exits 0 when this machine's task workers (indexing and "
            "background) beat recently, 1 with why not (a liveness probe); `list` shows every worker seen in the "
            "last day.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=("alive", "list"))
        parser.add_argument("--max-age", type=seconds, default=task_workers.RECENT.total_seconds(),
                            help="alive: the oldest beat that still counts, in seconds (default 120).")
        parser.add_argument("--node", help="alive: the machine's host name (default: this machine's).")
        parser.add_argument("--queue", choices=QUEUES, help="alive: only this queue's worker (default: both, as "
                            "`serve --role worker` runs them).")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        try:
            if options["action"] == "list":
                self._list(as_json=options["json"])
                return
            answer = task_workers.liveness(node=options["node"] or task_workers.this_node(),
                                           max_age=options["max_age"],
                                           queues=(options["queue"],) if options["queue"] else QUEUES)
        except DatabaseError as exc:
            raise CommandError(f"the heartbeats could not be read: {exc}".splitlines()[0], returncode=1) from None
        if options["json"]:
            self.stdout.write(json.dumps({"alive": answer.alive, "reason": answer.reason, "node": answer.node,
                                          "pid": answer.pid, "age_seconds": answer.age_seconds}))
        if not answer.alive:
            raise CommandError(answer.reason, returncode=1)
        if not options["json"]:
            self.stdout.write(answer.reason)

    def _list(self, *, as_json: bool) -> None:
        now = timezone.now()
        rows = [{"node": w.node, "pid": w.pid, "queue": w.queue, "started_at": w.started_at.isoformat(),
                 "age_seconds": round((now - w.last_beat).total_seconds(), 1), "resident_bytes": w.resident_bytes,
                 "processes": w.processes, "reincarnations": w.reincarnations}
                for w in task_workers.seen(now=now)]
        if as_json:
            self.stdout.write(json.dumps({"workers": rows}))
            return
        if not rows:
            self.stdout.write("No task worker has beaten in the last day.")
        for row in rows:
            self.stdout.write(f"{row['node']} pid {row['pid']} ({row['queue']}): last beat "
                              f"{row['age_seconds']:.0f} s ago, {row['processes']} processes, "
                              f"{row['resident_bytes'] / 1e6:.0f} MB resident, "
                              f"{row['reincarnations']} restarted, running since {row['started_at']}")
