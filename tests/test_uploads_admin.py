"""Unit tests of the upload jobs' admin (ingestion/uploads/admin.py): what its columns and the job's page say of a
job, from unsaved jobs; the upload itself, through the admin, is tests/test_uploads.py's."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.utils import timezone

from ingestion.models import IngestionJob
from ingestion.uploads.admin import MAX_LISTED, IngestionJobAdmin

JOBS = IngestionJobAdmin(IngestionJob, admin.site)


def job(**fields) -> IngestionJob:
    return IngestionJob(book_slug="guide", **fields)


def test_a_publish_names_its_revision_and_a_dry_run_says_so():
    assert JOBS.source_column(job(source=IngestionJob.Source.UPLOAD)) == "upload"
    assert JOBS.source_column(job(source=IngestionJob.Source.PUBLISH, revision="0123456789abcdef")) == \
        "publish 0123456789ab"
    assert JOBS.source_column(job(source=IngestionJob.Source.PUBLISH, dry_run=True)) == "publish (dry run)"


def test_the_list_shows_three_files_and_counts_the_rest():
    assert JOBS.files_short(job(files=["a.md", "b.md"])) == "a.md, b.md"
    assert JOBS.files_short(job(files=["a.md", "b.md", "c.md", "d.md", "e.md"])) == "a.md, b.md, c.md (+2)"
    assert JOBS.files_list(job(files=[])) == "—"


def test_progress_is_a_dash_while_queued_and_counts_failures_after():
    assert JOBS.progress_short(job(status=IngestionJob.Status.QUEUED, files_total=4)) == "—"
    running = job(status=IngestionJob.Status.RUNNING, files_done=2, files_total=4)
    assert JOBS.progress_short(running) == "2/4 files"
    done = job(status=IngestionJob.Status.DONE, files_done=4, files_total=4, report={"files_failed": 1})
    assert JOBS.progress_short(done) == "4/4 files, 1 failed"


def test_the_progress_bar_never_runs_past_its_total():
    html = JOBS.progress(job(files_done=9, files_total=4))
    assert "value='4' max='4'" in html and "4 of 4 files" in html


def test_duration_is_the_stored_total_else_the_time_since_it_started():
    assert JOBS.duration(job(total_seconds=12.34)) == "12.3 s"
    started = timezone.now() - timedelta(seconds=30)
    assert JOBS.duration(job(started_at=started, finished_at=started + timedelta(seconds=5))) == "5.0 s"
    assert JOBS.duration(job()) == "—"


def test_who_is_the_staff_user_else_the_publisher():
    assert JOBS.who(job(published_by="ci key")) == "ci key"
    assert JOBS.who(job()) == "—"


def test_a_new_books_job_names_the_book_it_will_make():
    assert JOBS.book_link(job(book_title="The Guide")) == "guide (new: The Guide)"


def test_long_lists_of_ignored_files_and_issues_are_cut_with_a_count_and_escaped():
    names = [f"<b>{n}</b>.png" for n in range(MAX_LISTED + 3)]
    html = JOBS.ignored_list(job(ignored=names))
    assert html.count("<li>") == MAX_LISTED + 1 and "… and 3 more" in html
    assert "&lt;b&gt;0&lt;/b&gt;.png" in html and "<b>0</b>" not in html
    assert JOBS.ignored_list(job(ignored=[])) == "none"
    errors = [{"file": "a.md", "line": n, "message": "<script>"} for n in range(MAX_LISTED + 2)]
    table = JOBS.report_errors(job(report={"errors": errors}))
    assert table.count("<tr><td>") == MAX_LISTED and "… and 2 more" in table and "<script>" not in table
    assert JOBS.report_warnings(job(report={})) == "none"


def test_figures_are_not_yet_while_active_and_none_when_a_finished_job_has_no_report():
    assert JOBS.report_figures(job(status=IngestionJob.Status.RUNNING)) == "not yet"
    assert JOBS.report_figures(job(status=IngestionJob.Status.FAILED)) == "none"
    figures = JOBS.report_figures(job(status=IngestionJob.Status.DONE, report={"files_indexed": 3}))
    assert "<th>files indexed</th><td>3</td>" in figures and "<th>pages removed</th><td>0</td>" in figures


def test_no_job_is_edited_after_it_is_made_and_its_page_is_read_only():
    assert JOBS.has_change_permission(None) is False
    assert JOBS.get_readonly_fields(None, job()) and JOBS.get_readonly_fields(None, None) == ()
