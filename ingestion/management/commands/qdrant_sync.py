"""``manage.py qdrant_sync [--check] [--json] [--book SLUG]``: compare the Qdrant mirror with Postgres and repair it.

Exit status: 0 when the mirror is in sync (or was repaired), 1 with ``--check`` when it has
drifted, 2 when Qdrant is not configured or not reachable, or the book is unknown.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from ingestion.indexing.qdrant import QdrantError
from ingestion.indexing.qdrant_sync import SyncReport, sync_mirror

SHOWN_EXAMPLES = 3


class Command(BaseCommand):
    help = "Compare the Qdrant mirror with Postgres per book; repair it (or, with --check, only report drift)."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--check", action="store_true",
                            help="Only report; exit 1 when the mirror has drifted, 0 when it is in sync.")
        parser.add_argument("--book", help="Book slug (default: every book, and the points of deleted books).")
        parser.add_argument("--json", action="store_true", help="Print the report as one JSON object.")

    def handle(self, *args, **options) -> None:
        try:
            report = sync_mirror(book=options["book"], repair=not options["check"])
        except QdrantError as exc:
            if options["json"]:
                self.stdout.write(json.dumps({"error": exc.code, "message": exc.message}))
            else:
                self.stderr.write(f"qdrant_sync: {exc.message}")
            sys.exit(2)
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict(), ensure_ascii=False))
        else:
            self.stdout.write(self._summary(report))
        if options["check"] and not report.in_sync:
            sys.exit(1)

    def _summary(self, r: SyncReport) -> str:
        lines = [f"Qdrant mirror: {r.qdrant} (collections: {', '.join(r.collections) or 'none yet'})"]
        for b in r.books:
            if b.in_postgres:
                line = f"  {b.book}: {b.chunks} passages, {b.points} points"
            else:
                line = f"  {b.book} (not in Postgres): {b.points} points"
            counts = [f"{len(items)} {kind}" for kind, items in
                      (("missing", b.missing), ("extra", b.extra), ("stale", b.stale)) if items]
            lines.append(f"{line}: {', '.join(counts) if counts else 'in sync'}")
            if b.missing:
                lines.append(f"    missing: {', '.join(b.missing[:SHOWN_EXAMPLES])}{self._more(b.missing)}")
            if b.extra:
                shown = ", ".join(str(e.chunk_id or e.point_id) for e in b.extra[:SHOWN_EXAMPLES])
                lines.append(f"    extra: {shown}{self._more(b.extra)}")
            if b.stale:
                shown = ", ".join(f"{cid} ({', '.join(fields)})" for cid, fields in b.stale[:SHOWN_EXAMPLES])
                lines.append(f"    stale: {shown}{self._more(b.stale)}")
        totals = r.totals()
        found = f"{totals['missing']} missing, {totals['extra']} extra, {totals['stale']} stale"
        if r.in_sync:
            lines.append(f"In sync ({r.seconds:.1f} s).")
        elif r.repair:
            lines.append(f"Repaired {found}: {r.upserted} points written, {r.deleted} deleted ({r.seconds:.1f} s).")
        else:
            lines.append(f"Out of sync: {found}. Run `manage.py qdrant_sync` to repair.")
        return "\n".join(lines)

    @staticmethod
    def _more(items: list) -> str:
        return f" (and {len(items) - SHOWN_EXAMPLES} more)" if len(items) > SHOWN_EXAMPLES else ""
