"""django-q2 tasks of the ingestion app: run an upload job, and notice jobs whose worker died (scheduled every
minute by migration 0003)."""

from __future__ import annotations

from ingestion.uploads import jobs


def run_ingestion_job(job_id: int) -> dict:
    return jobs.run_job(job_id)


def sweep_stale_jobs() -> int:
    return jobs.sweep_stale_jobs()
