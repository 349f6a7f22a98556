"""django-q2 tasks of the audit app (scheduled daily by a migration)."""

from __future__ import annotations

from audit.retention import purge_old_records


def purge_old_audit_records() -> dict:
    return purge_old_records().as_dict()
