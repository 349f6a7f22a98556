"""The admin of upload jobs: the *add* page is the upload form; a job's page is read-only and follows its run.
Publishes from a book's CI (``ingestion.uploads.publishing``) are listed with them, refused ones included: the
record of who published what, when, and what came of it.

Saving the upload form stores its checked files (``intake.store_upload``), then saves and queues the job; a store
that fails on the server (a full disk) comes back as an error message on the upload page, nothing saved or queued.
Uploading (and Retry) needs the ``ingestion.add_ingestionjob`` permission; seeing jobs needs it or the
view permission. Listing jobs or opening one first fails jobs whose worker stopped (``sweep_stale_jobs``).
A staff member restricted to some books (``ingestion.roles``) sees their books' jobs only and uploads only
into those books (not into a new one: an administrator creates it, or gives them the book).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ingestion.models import IngestionJob
from ingestion.roles import BookScopedAdmin, allowed_books
from ingestion.uploads.forms import UploadForm
from ingestion.uploads.intake import UploadError, store_upload
from ingestion.uploads.jobs import delete_job_files, job_folder, retry_job, start_job, sweep_stale_jobs

REFRESH_SECONDS = 2
MAX_LISTED = 200  # errors, warnings or ignored files shown on a job's page (the rest are counted)

REPORT_FIGURES = (
    ("files_seen", "files seen"), ("files_indexed", "files indexed"), ("files_unchanged", "files unchanged"),
    ("files_skipped", "files skipped"), ("files_failed", "files failed"), ("documents_removed", "pages removed"),
    ("chunks_added", "passages added"), ("chunks_kept", "passages kept"), ("chunks_removed", "passages removed"),
    ("chunks_embedded", "passages embedded"), ("tokens", "tokens embedded"), ("embed_seconds", "embedding (s)"),
    ("total_seconds", "indexing (s)"),
)


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def _issue_table(items: list[dict]) -> str:
    if not items:
        return "none"
    rows = format_html_join(
        "", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
        ((item.get("file") or "—", item.get("line") or "", item.get("message", "")) for item in items[:MAX_LISTED]),
    )
    more = format_html("<p>… and {} more (see the index run's report).</p>", len(items) - MAX_LISTED) \
        if len(items) > MAX_LISTED else ""
    return format_html("<table class='upload-issues'><thead><tr><th>file</th><th>line</th><th>message</th></tr>"
                       "</thead><tbody>{}</tbody></table>{}", rows, more)


@admin.register(IngestionJob)
class IngestionJobAdmin(BookScopedAdmin, admin.ModelAdmin):
    list_display = ("id", "book_column", "source_column", "files_short", "status", "progress_short", "created",
                    "duration", "who")
    list_display_links = ("id", "book_column")
    list_filter = ("status", "source", "dry_run", ("book", admin.RelatedOnlyFieldListFilter))
    search_fields = ("book_slug", "files", "error", "published_by", "revision")
    list_select_related = ("created_by",)
    date_hierarchy = "created_at"
    actions = ["retry_jobs"]
    add_fieldsets = (
        ("Book", {"fields": ["book", "new_book_slug", "new_book_title", "language"]}),
        ("Files", {"fields": ["upload", "folder", "prune"]}),
    )
    book_lookup = "book_slug"  # a job for a new book has no book yet
    view_fieldsets = (
        ("Status", {"fields": ["status", "progress", "stage", "error_message", "index_run_link"]}),
        ("Upload", {"fields": ["book_link", "source", "published_by", "revision", "dry_run", "files_list", "folder",
                               "prune", "language", "ignored_list", "created_by", "created_at"]}),
        ("Report", {"fields": ["report_figures", "report_errors", "report_warnings"]}),
        ("Timing", {"fields": ["timings", "queued_at", "started_at", "finished_at", "heartbeat_at", "attempts",
                               "task_id"]}),
    )

    # -- permissions: uploading is adding; nothing is edited afterwards -----------------------------------
    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_view_permission(self, request, obj=None) -> bool:
        return super().has_view_permission(request, obj) or self.has_add_permission(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and not (obj is not None and obj.is_active)

    # -- the upload form -------------------------------------------------------------------------------------
    def get_fieldsets(self, request, obj=None):
        return self.add_fieldsets if obj is None else self.view_fieldsets

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else [f for _, opts in self.view_fieldsets for f in opts["fields"]]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = UploadForm.within(allowed_books(request.user))
        return super().get_form(request, obj, change=change, **kwargs)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "book" and formfield is not None:  # a plain choice: no edit/delete/view book icons
            formfield.widget = formfield.widget.widget if hasattr(formfield.widget, "widget") else formfield.widget
        return formfield

    def add_view(self, request, form_url="", extra_context=None):
        context = {"title": "Upload chapters", "show_save_and_add_another": False, "show_save_and_continue": False,
                   **(extra_context or {})}
        return super().add_view(request, form_url, context)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except UploadError as exc:  # from save_model: the view's transaction rolled back, so nothing is queued
            self.message_user(request, f"The upload was not stored, and nothing is queued: {exc.message}",
                              messages.ERROR)
            return redirect(request.get_full_path())

    def save_model(self, request, obj, form, change) -> None:
        """Store the checked upload's files, then save and queue the job (``changeform_view`` reports a failure)."""
        intake = store_upload(form.checked)
        try:
            start_job(job=obj, intake=intake, user=request.user)
        except BaseException:
            intake.discard()
            raise

    def response_add(self, request, obj, post_url_continue=None):
        self.message_user(request, f"Upload #{obj.pk} is queued; this page follows its progress.", messages.SUCCESS)
        return redirect(reverse("admin:ingestion_ingestionjob_change", args=[obj.pk]))

    # -- pages that show jobs first notice dead workers ------------------------------------------------------
    def changelist_view(self, request, extra_context=None):
        sweep_stale_jobs()
        return super().changelist_view(request, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        sweep_stale_jobs()
        job = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if job is not None:
            context["refresh_seconds"] = REFRESH_SECONDS if job.is_active else 0
            context["can_retry"] = (job.status == IngestionJob.Status.FAILED and self.has_add_permission(request)
                                    and job_folder(job.pk).is_dir())
        return super().change_view(request, object_id, form_url, context)

    # -- Retry and delete ----------------------------------------------------------------------------------
    @admin.action(description="Retry the selected failed uploads", permissions=["add"])
    def retry_jobs(self, request, queryset):
        retried = []
        for job in queryset.order_by("pk"):
            try:
                retry_job(job)
                self.log_change(request, job, "Retried.")
                retried.append(job)
            except UploadError as exc:
                self.message_user(request, exc.message, messages.WARNING)
        if retried:
            self.message_user(request, f"Queued again: {', '.join(f'#{j.pk}' for j in retried)}.", messages.SUCCESS)
        if len(retried) == 1:
            return redirect(reverse("admin:ingestion_ingestionjob_change", args=[retried[0].pk]))
        return None

    def delete_model(self, request, obj) -> None:
        delete_job_files(obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        queryset = queryset.exclude(status__in=IngestionJob.ACTIVE)
        for job in queryset:
            delete_job_files(job)
        super().delete_queryset(request, queryset)

    # -- list columns -----------------------------------------------------------------------------------
    @admin.display(description="book", ordering="book_slug")
    def book_column(self, obj: IngestionJob) -> str:
        return obj.book_slug

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: IngestionJob):
        return obj.created_at

    @admin.display(description="by", ordering="created_by__username")
    def who(self, obj: IngestionJob) -> str:
        return obj.created_by.get_username() if obj.created_by else obj.published_by or "—"

    @admin.display(description="source", ordering="source")
    def source_column(self, obj: IngestionJob) -> str:
        if obj.source != IngestionJob.Source.PUBLISH:
            return "upload"
        what = "publish (dry run)" if obj.dry_run else "publish"
        return f"{what} {obj.revision[:12]}" if obj.revision else what

    @admin.display(description="files")
    def files_short(self, obj: IngestionJob) -> str:
        names = obj.files or []
        return ", ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else "")

    @admin.display(description="progress")
    def progress_short(self, obj: IngestionJob) -> str:
        if obj.status == IngestionJob.Status.QUEUED:
            return "—"
        failed = (obj.report or {}).get("files_failed")
        text = f"{obj.files_done}/{obj.files_total} files"
        return f"{text}, {failed} failed" if failed else text

    @admin.display(description="duration")
    def duration(self, obj: IngestionJob) -> str:
        if obj.total_seconds is not None:
            return _seconds(obj.total_seconds)
        if obj.started_at is not None:
            end = obj.finished_at or timezone.now()
            return _seconds((end - obj.started_at).total_seconds())
        return "—"

    # -- the job's page ------------------------------------------------------------------------------------
    @admin.display(description="progress")
    def progress(self, obj: IngestionJob) -> str:
        total = max(obj.files_total, 0)
        done = min(obj.files_done, total) if total else obj.files_done
        return format_html("<progress value='{}' max='{}' style='width:20em'></progress> {} of {} files", done,
                           total or 1, done, total)

    @admin.display(description="error")
    def error_message(self, obj: IngestionJob) -> str:
        return format_html("<strong class='upload-error'>{}</strong>", obj.error) if obj.error else "—"

    @admin.display(description="index run")
    def index_run_link(self, obj: IngestionJob) -> str:
        if obj.index_run_id is None:
            return "—"
        url = reverse("admin:ingestion_indexrun_change", args=[obj.index_run_id])
        return format_html("<a href='{}'>index run #{}</a>", url, obj.index_run_id)

    @admin.display(description="book")
    def book_link(self, obj: IngestionJob) -> str:
        if obj.book_id is None:
            return f"{obj.book_slug} (new: {obj.book_title or obj.book_slug})"
        url = reverse("admin:ingestion_book_change", args=[obj.book_id])
        return format_html("<a href='{}'>{}</a>", url, obj.book_slug)

    @admin.display(description="uploaded files")
    def files_list(self, obj: IngestionJob) -> str:
        return ", ".join(obj.files or []) or "—"

    @admin.display(description="ignored (not pages)")
    def ignored_list(self, obj: IngestionJob) -> str:
        names = obj.ignored or []
        if not names:
            return "none"
        shown = format_html_join("", "<li>{}</li>", ((n,) for n in names[:MAX_LISTED]))
        more = format_html("<li>… and {} more</li>", len(names) - MAX_LISTED) if len(names) > MAX_LISTED else ""
        return format_html("<ul class='upload-ignored' style='margin:0;padding-left:1.2em'>{}{}</ul>", shown, more)

    @admin.display(description="figures")
    def report_figures(self, obj: IngestionJob) -> str:
        report = obj.report or {}
        if not report:
            return "not yet" if obj.is_active else "none"
        rows = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>",
                                ((label, report.get(key, 0)) for key, label in REPORT_FIGURES))
        return format_html("<table class='upload-figures'>{}</table>", rows)

    @admin.display(description="errors")
    def report_errors(self, obj: IngestionJob) -> str:
        return _issue_table((obj.report or {}).get("errors", []))

    @admin.display(description="warnings")
    def report_warnings(self, obj: IngestionJob) -> str:
        return _issue_table((obj.report or {}).get("warnings", []))

    @admin.display(description="timings")
    def timings(self, obj: IngestionJob) -> str:
        indexing = (obj.report or {}).get("total_seconds")
        return (f"unpacking {_seconds(obj.extract_seconds)}; indexing {_seconds(indexing)}; the worker's whole run "
                f"{_seconds(obj.index_seconds)} (indexing, a new book's first calibration, and any wait for a busy "
                f"book; sentence vectors and a later recalibration follow as tasks of their own); total "
                f"{_seconds(obj.total_seconds)} (from the upload to the end, queue included)")
