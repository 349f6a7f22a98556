"""The reviewers' admin: the audit trail (read-only but for the review fields), the review queue,
a dashboard with charts, coverage gaps, and CSV export.

Nobody adds or deletes audit rows here: they are written by answering and removed only by
retention (``audit_purge``). Reviewers (the "Reviewers" group) may view rows and change
the review status and note; every other field is read-only for everyone. A reviewer restricted to
some books (``ingestion.roles``) sees, marks, exports and charts only those books' rows. The course staff's inbox
of hand-offs and the staff answers have modules of their own (``audit.handoff_admin``, ``audit.staff_answer_admin``).
"""

from __future__ import annotations

import csv
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from audit import handoff_admin, staff_answer_admin  # noqa: F401 (registers the course staff's pages)
from audit.dashboard import dashboard, review_queue_filter
from audit.gaps import coverage_gaps, gaps_markdown
from audit.models import AuditLog, ReviewQueueItem
from audit.privacy import admin_actions as privacy_actions
from audit.struggle_admin import ChapterFilter, LevelFilter, SectionFilter, StrugglePages, TopicFilter
from ingestion.roles import BookScopedAdmin, allowed_slugs

REVIEW_FIELDS = ("review_status", "reviewer_note")
CSV_COLUMNS = ("created_at", "answer_id", "channel", "book_slug", "question", "selected_text", "answer",
               "draft_answer", "status", "confidence", "confidence_level", "generator", "generation_failure",
               "sources", "feedback_rating", "feedback_comment", "review_status", "reviewer_note", "latency_ms",
               "api_key_name", "session_id")


def csv_cell(value) -> str:
    """A CSV cell that a spreadsheet will not run as a formula (=, +, -, @ and control characters)."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def safe_link(url: str) -> str | None:
    """``url`` if it is http(s) or site-relative (never ``javascript:`` or the like)."""
    parts = urlsplit(url or "")
    return url if url and (parts.scheme in ("http", "https") or (not parts.scheme and not parts.netloc)) else None


def _csv_values(row: AuditLog) -> list:
    """An audit row's values in ``CSV_COLUMNS`` order, its sources as their heading paths."""
    values = [getattr(row, c) for c in CSV_COLUMNS]
    values[CSV_COLUMNS.index("sources")] = " | ".join(s.get("heading_path", "") for s in row.sources or [])
    return values


class FeedbackFilter(admin.SimpleListFilter):
    title = "feedback"
    parameter_name = "feedback"

    def lookups(self, request, model_admin):
        return [("up", "thumbs up"), ("down", "thumbs down"), ("none", "no feedback")]

    def queryset(self, request, queryset):
        if self.value() in ("up", "down"):
            return queryset.filter(feedback_rating=self.value())
        if self.value() == "none":
            return queryset.filter(feedback_rating="")
        return queryset


class RefusedFilter(admin.SimpleListFilter):
    title = "refused"
    parameter_name = "refused"

    def lookups(self, request, model_admin):
        return [("yes", "refused (not covered)"), ("no", "answered or withheld")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(refused=self.value() == "yes")
        return queryset


class ModelFailedFilter(admin.SimpleListFilter):
    """The answers the book's own sentences gave because the language model failed: all of them, or those of one
    reason (the reasons the shown rows hold)."""

    title = "language model"
    parameter_name = "model_failed"

    def lookups(self, request, model_admin):
        reasons = (model_admin.get_queryset(request).exclude(generation_failure="").order_by()
                   .values_list("generation_failure", flat=True).distinct())
        return [("any", "model failed"), *((r, f"model failed: {r}") for r in sorted(reasons)),
                ("none", "model did not fail")]

    def queryset(self, request, queryset):
        if self.value() == "any":
            return queryset.exclude(generation_failure="")
        if self.value() == "none":
            return queryset.filter(generation_failure="")
        if self.value():
            return queryset.filter(generation_failure=self.value())
        return queryset


class ValuesFilter(admin.AllValuesFieldListFilter):
    """Django's filter by a field's values, with a name for the empty value: Django shows "" as a link with no
    text, which a screen reader can't name (WCAG 2.4.4; axe: link-name). An answer that failed has no level."""

    def choices(self, changelist):
        for choice in super().choices(changelist):
            yield {**choice, "display": choice["display"] or "(none)"}


@admin.register(AuditLog)
class AuditLogAdmin(BookScopedAdmin, StrugglePages, admin.ModelAdmin):
    list_display = ("created_at", "short_question", "channel", "book_slug", "confidence_level", "status",
                    "feedback", "review_status")
    list_filter = (("created_at", admin.DateFieldListFilter), "channel", ("confidence_level", ValuesFilter),
                   RefusedFilter, "status", ModelFailedFilter, FeedbackFilter, "review_status",
                   ("book_slug", ValuesFilter),
                   SectionFilter, ChapterFilter, LevelFilter, TopicFilter)
    list_display_links = ("created_at", "short_question")
    search_fields = ("question", "answer", "=answer_id")
    date_hierarchy = "created_at"
    list_per_page = 50
    show_full_result_count = False
    actions = ["mark_ok", "mark_wrong", "mark_needs_doc_fix", "export_csv", "export_learner_data",
               "erase_learner_data"]
    change_list_template = "admin/audit/auditlog/change_list.html"
    book_lookup = "book_slug"  # rows copy the slug: they outlive the book
    exclude = ("question_vector", "sources", "suggestions", "grounding", "retrieval", "timings_ms", "llm_usage")
    fieldsets = [
        ("Review", {"fields": ("review_status", "reviewer_note", "reviewed_by", "reviewed_at")}),
        ("Question", {"fields": ("created_at", "channel", "book_slug", "question", "selected_text",
                                 "resolved_question")}),
        ("Answer", {"fields": ("answer", "draft_answer", "sources_links", "suggestion_links", "status", "confidence",
                               "confidence_level", "generator", "generation_failure", "generation_failure_message",
                               "flagged", "grounding_summary", "error_code", "error_message")}),
        ("Feedback", {"fields": ("feedback_rating", "feedback_comment", "feedback_at")}),
        ("Request", {"fields": ("answer_id", "session_id", "api_key_id", "api_key_name", "client_ip_hash",
                                "latency_ms", "timings", "tokens", "retrieval_summary")}),
    ]

    def get_readonly_fields(self, request, obj=None):
        shown = [f for fs in self.fieldsets for f in fs[1]["fields"]]
        return [f for f in shown if f not in REVIEW_FIELDS]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj: AuditLog, form, change) -> None:
        if set(form.changed_data) & set(REVIEW_FIELDS):
            obj.reviewed_by, obj.reviewed_at = request.user, timezone.now()
        super().save_model(request, obj, form, change)

    # -- columns and read-only fields -------------------------------------------------------------
    @admin.display(description="question", ordering="question")
    def short_question(self, obj: AuditLog) -> str:
        return obj.question if len(obj.question) <= 90 else obj.question[:89] + "…"

    @admin.display(description="feedback", ordering="feedback_rating")
    def feedback(self, obj: AuditLog) -> str:
        return {"up": "👍", "down": "👎"}.get(obj.feedback_rating, "—")

    @admin.display(description="sources")
    def sources_links(self, obj: AuditLog) -> str:
        return self._links(obj.sources, score=True) or "—"

    @admin.display(description="closest sections (refused or withheld)")
    def suggestion_links(self, obj: AuditLog) -> str:
        return self._links(obj.suggestions, score=False) or "—"

    def _links(self, items: list[dict], *, score: bool) -> str:
        rows = []
        for n, item in enumerate(items or [], 1):
            title = item.get("heading_path") or item.get("title") or "(untitled)"
            link = safe_link(item.get("url", ""))
            shown = format_html('<a href="{}" target="_blank" rel="noopener">{}</a>', link, title) if link \
                else title
            chunk = item.get("chunk_id")
            passage = format_html(' · <a href="{}">passage</a>', reverse("admin:ingestion_chunk_change",
                                                                         args=[chunk])) if chunk else ""
            extra = format_html(" (score {}{})", item.get("score"), ", cited" if item.get("cited") else "") \
                if score else ""
            rows.append((item.get("n", n), shown, extra, passage))
        return format_html_join("", "<div>[{}] {}{}{}</div>", rows)

    @admin.display(description="grounding")
    def grounding_summary(self, obj: AuditLog) -> str:
        g = obj.grounding or {}
        if not g:
            return "—"
        return ", ".join(f"{k}: {v}" for k, v in g.items() if not isinstance(v, list | dict))

    @admin.display(description="timings (ms)")
    def timings(self, obj: AuditLog) -> str:
        return ", ".join(f"{k} {v}" for k, v in (obj.timings_ms or {}).items()) or "—"

    @admin.display(description="language model tokens")
    def tokens(self, obj: AuditLog) -> str:
        u = obj.llm_usage
        if not u:
            return "—"
        prompt = "?" if u.get("prompt_tokens") is None else u["prompt_tokens"]
        return f"prompt {prompt}, completion {u.get('completion_tokens')} (counted by {u.get('counted_by')})"

    @admin.display(description="retrieval")
    def retrieval_summary(self, obj: AuditLog) -> str:
        return ", ".join(f"{k} {v}" for k, v in (obj.retrieval or {}).items()) or "—"

    # -- actions ----------------------------------------------------------------------------------------
    def _mark(self, request, queryset, status: str) -> None:
        if not self.has_change_permission(request):
            raise PermissionDenied
        rows = list(queryset)
        count = queryset.update(review_status=status, reviewed_by=request.user, reviewed_at=timezone.now())
        LogEntry.objects.log_actions(request.user.pk, rows, CHANGE, f"Marked {AuditLog.Review(status).label}.")
        messages.success(request, f"Marked {count} answer(s) {AuditLog.Review(status).label}.")

    @admin.action(description="Mark reviewed: ok", permissions=["change"])
    def mark_ok(self, request, queryset) -> None:
        self._mark(request, queryset, AuditLog.Review.OK)

    @admin.action(description="Mark wrong", permissions=["change"])
    def mark_wrong(self, request, queryset) -> None:
        self._mark(request, queryset, AuditLog.Review.WRONG)

    @admin.action(description="Mark needs doc fix", permissions=["change"])
    def mark_needs_doc_fix(self, request, queryset) -> None:
        self._mark(request, queryset, AuditLog.Review.NEEDS_DOC_FIX)

    @admin.action(description="Export selected to CSV", permissions=["view"])
    def export_csv(self, request, queryset) -> HttpResponse:
        rows = queryset.order_by("created_at").iterator(chunk_size=500)
        return self._csv(f"bookchat-audit-{timezone.now():%Y%m%d-%H%M}", CSV_COLUMNS, map(_csv_values, rows))

    # -- a learner's data (audit.privacy) --------------------------------------------------------------
    def has_learner_data_permission(self, request) -> bool:
        return request.user.has_perm(privacy_actions.PERMISSION)

    @admin.action(description="Export the learner's data (JSON)", permissions=["learner_data"])
    def export_learner_data(self, request, queryset):
        return privacy_actions.export_action(self, request, queryset)

    @admin.action(description="Erase the learner's data…", permissions=["learner_data"])
    def erase_learner_data(self, request, queryset):
        return privacy_actions.erase_action(self, request, queryset)

    # -- dashboard and coverage gaps ----------------------------------------------------------------
    def get_urls(self):
        own = [path("dashboard/", self.admin_site.admin_view(self.dashboard_view), name="audit_dashboard"),
               path("gaps/", self.admin_site.admin_view(self.gaps_view), name="audit_gaps")]
        return own + self.struggle_urls() + super().get_urls()

    def _check_dashboard(self, request) -> None:
        if not request.user.has_perm("audit.view_dashboard"):
            raise PermissionDenied

    def _choice(self, request, name: str, allowed: tuple[int, ...], default: int) -> int:
        try:
            value = int(request.GET.get(name, default))
        except ValueError:
            return default
        return value if value in allowed else default

    def _csv(self, name: str, header, rows) -> HttpResponse:
        """``rows`` under ``header`` as a CSV download ``name``.csv (UTF-8 that spreadsheets read, no formulas)."""
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
        response.write("\ufeff")  # so that spreadsheets read UTF-8
        writer = csv.writer(response)
        writer.writerow(header)
        writer.writerows([csv_cell(value) for value in row] for row in rows)
        return response

    def _books(self, request) -> list[str]:
        return list(self.get_queryset(request).order_by().values_list("book_slug", flat=True).distinct())

    def dashboard_view(self, request):
        self._check_dashboard(request)
        days = self._choice(request, "days", (7, 30, 90), 30)
        book = request.GET.get("book") or None
        context = {**self.admin_site.each_context(request), "title": "Answers dashboard", "opts": self.model._meta,
                   "data": dashboard(days=days, book=book, within=allowed_slugs(request.user)),
                   "books": self._books(request), "day_choices": (7, 30, 90)}
        return TemplateResponse(request, "admin/audit/dashboard.html", context)

    def gaps_view(self, request):
        self._check_dashboard(request)
        days = self._choice(request, "days", (7, 30, 90, 365), 90)
        book = request.GET.get("book") or None
        gaps = coverage_gaps(days=days, book=book, within=allowed_slugs(request.user))
        if request.GET.get("export") == "markdown":  # for an issue in the book's repository
            response = HttpResponse(gaps_markdown(gaps, book=book, days=days),
                                    content_type="text/markdown; charset=utf-8")
            name = f"coverage-gaps-{book or 'all-books'}-{days}d.md"
            response["Content-Disposition"] = f'attachment; filename="{name}"'
            return response
        context = {**self.admin_site.each_context(request), "title": "Coverage gaps", "opts": self.model._meta,
                   "gaps": gaps, "days": days, "book": book or "", "books": self._books(request),
                   "day_choices": (7, 30, 90, 365), "questions": sum(g.count for g in gaps)}
        return TemplateResponse(request, "admin/audit/gaps.html", context)


@admin.register(ReviewQueueItem)
class ReviewQueueAdmin(AuditLogAdmin):
    """The same rows and tools, narrowed to what still needs a reviewer (see ``review_queue_filter``)."""

    list_filter = ("status", ModelFailedFilter, FeedbackFilter, ("confidence_level", ValuesFilter), "channel",
                   ("book_slug", ValuesFilter), ("created_at", admin.DateFieldListFilter))

    def get_queryset(self, request):
        return super().get_queryset(request).filter(review_queue_filter())

    def get_urls(self):
        return admin.ModelAdmin.get_urls(self)
