"""Retention: audit rows older than ``AUDIT_RETENTION_DAYS`` are archived, then deleted.

The archive is one gzip-compressed JSON Lines file per run under ``DATA_DIR/archive/``
(``audit-<run time>-before-<cutoff date>.jsonl.gz``), one row per line with every field
but the question's embedding (derived data, recomputed when needed). The file is written
under a temporary name, flushed to disk, read back and counted, and only then renamed and
the rows it holds deleted, by id: if the disk fills up or anything else fails, nothing
is deleted that is not safely in an archive.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.models import AuditLog
from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError

logger = logging.getLogger(__name__)

DELETE_BATCH = 1000
ARCHIVED_FIELDS = [f.attname for f in AuditLog._meta.concrete_fields if f.name != "question_vector"]


class ArchiveError(BookchatError):
    code = "archive_failed"


@dataclass
class PurgeReport:
    cutoff: str
    retention_days: int
    dry_run: bool
    matched: int = 0
    archived: int = 0
    deleted: int = 0
    archive: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def archive_dir() -> Path:
    return Path(settings.DATA_DIR) / "archive"


def purge_old_records(*, days: int | None = None, dry_run: bool = False, now: datetime | None = None,
                      directory: Path | None = None) -> PurgeReport:
    """Archive and delete the audit rows older than ``days`` (default ``AUDIT_RETENTION_DAYS``)."""
    days = setting("AUDIT_RETENTION_DAYS") if days is None else days
    if days < 1:
        raise ArchiveError(f"the retention must be at least 1 day (got {days})", code="bad_retention")
    now = now or timezone.now()
    cutoff = now - timedelta(days=days)
    old = AuditLog.objects.filter(created_at__lt=cutoff).order_by("id")
    report = PurgeReport(cutoff=cutoff.isoformat(), retention_days=days, dry_run=dry_run, matched=old.count())
    if dry_run or not report.matched:
        return report
    directory = directory or archive_dir()
    final = directory / f"audit-{now:%Y%m%dT%H%M%SZ}-before-{cutoff:%Y-%m-%d}.jsonl.gz"
    ids = _write_archive(old, final)
    report.archived, report.archive = len(ids), str(final)
    for start in range(0, len(ids), DELETE_BATCH):
        with transaction.atomic():
            deleted, _ = AuditLog.objects.filter(id__in=ids[start:start + DELETE_BATCH]).delete()
        report.deleted += deleted
    logger.info("archived %d audit records older than %s to %s and deleted them", report.archived,
                cutoff.date(), final)
    return report


def _write_archive(rows, final: Path) -> list[int]:
    """Write ``rows`` to ``final`` (gzip JSONL), check it, and return the ids it holds."""
    partial = final.with_name(final.name + ".partial")
    ids: list[int] = []
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(partial, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", filename="") as archive:
                for row in rows.values(*ARCHIVED_FIELDS).iterator(chunk_size=500):
                    archive.write(json.dumps(row, default=str, ensure_ascii=False).encode() + b"\n")
                    ids.append(row["id"])
            raw.flush()
            os.fsync(raw.fileno())
        with gzip.open(partial, "rb") as check:
            written = sum(1 for _ in check)
        if written != len(ids):
            raise OSError(f"the archive holds {written} rows, expected {len(ids)}")
        os.replace(partial, final)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ArchiveError(f"writing the audit archive {final} failed ({exc}); no audit record was deleted") \
            from exc
    return ids


def read_archive(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as archive:
        return [json.loads(line) for line in archive]
