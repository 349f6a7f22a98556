"""Staff answers in the admin (``chat.models.StaffAnswer``, listed under Chat): per book (``ingestion.roles``), each
with how often it was served and its thumbs; a page to edit one (question, answer, citations, previewed as the
student reads it), retire it, or serve it again: confirm one that waits for review (its citations re-read from the
book as it is now), or bring back a retired one.

Registered here rather than in chat's admin because the staff's pages are one workspace: the inbox lists the
answers that wait for review, and this page shares the hand-off page's citation search and preview
(``audit.handoff_admin.CitingAdmin``). Staff answers are kept from replies or added with ``manage.py staffanswers
add``; nobody adds or deletes one here (retire it instead: its counts stay). Every act is logged (``LogEntry``).
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseBadRequest, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from audit.handoff_admin import citation_links, citing_context
from audit.handoff_forms import StaffAnswerForm, refusal_on
from audit.models import Handoff
from audit.staff_answer_actions import citation_refs, edit_staff_answer, retire_staff_answer, serve_again
from bookchat.base.errors import RequestError
from chat.models import StaffAnswer
from chat.pipeline import staff_answers
from chat.pipeline.rendering import render_answer
from ingestion.roles import BookScopedAdmin, within_books

S = StaffAnswer.Status
ACTS = {  # what each button does: the service, the log's message, what the page then says
    "retire": (retire_staff_answer, "Retired.", "Retired: it is no longer served."),
    "serve": (serve_again, "Served again, its citations read from the book as it is now.",
              "Served again: its citations were read from the book as it is now."),
}


@admin.register(StaffAnswer)
class StaffAnswerAdmin(BookScopedAdmin, admin.ModelAdmin):
    list_display = ("short_question", "book", "status", "served", "thumbs_up", "thumbs_down", "answered_at")
    list_display_links = ("short_question",)
    list_filter = ("status", ("book", admin.RelatedOnlyFieldListFilter))
    search_fields = ("question", "answer")
    list_select_related = ("book",)
    list_per_page = 50

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="question", ordering="question")
    def short_question(self, obj: StaffAnswer) -> str:
        return obj.question if len(obj.question) <= 90 else obj.question[:89] + "…"

    def change_view(self, request, object_id, form_url="", extra_context=None):
        found = self.get_object(request, unquote(object_id))
        if found is None:
            raise Http404("No such staff answer.")
        if not self.has_view_or_change_permission(request, found):
            raise PermissionDenied
        form = StaffAnswerForm(initial={"question": found.question, "answer": found.answer,
                                        "citations": citation_refs(found.citations)})
        if request.method == "POST":
            if not self.has_change_permission(request, found):
                raise PermissionDenied
            action = request.POST.get("_action")
            if action in ("save", "preview"):
                form = StaffAnswerForm(request.POST)
                if action == "save" and self._save(request, found, form):
                    return HttpResponseRedirect(reverse("admin:chat_staffanswer_changelist"))
            elif action in ACTS:
                if self._act(request, found, *ACTS[action]):
                    return HttpResponseRedirect(reverse("admin:chat_staffanswer_change", args=[found.pk]))
            else:
                return HttpResponseBadRequest("unknown action")
        return self._page(request, found, form)

    def _save(self, request, found: StaffAnswer, form: StaffAnswerForm) -> bool:
        if not form.is_valid():
            return False
        waited = found.status == S.NEEDS_REVIEW
        try:
            edit_staff_answer(found, question=form.cleaned_data["question"], answer=form.cleaned_data["answer"],
                              citations=form.cleaned_data["citations"])
        except RequestError as exc:
            refusal_on(form, exc)
            return False
        self.log_change(request, found, "Edited" + (" (it waited for review: served again)." if waited else "."))
        messages.success(request, "Saved: later students who ask the same thing get it as it is now.")
        return True

    def _act(self, request, found: StaffAnswer, act, logged: str, said: str) -> bool:
        try:
            act(found)
        except RequestError as exc:  # (a button, no field: the page says why above it)
            messages.error(request, exc.message)
            return False
        self.log_change(request, found, logged)
        messages.success(request, said)
        return True

    def _page(self, request, found: StaffAnswer, form: StaffAnswerForm):
        may_change = self.has_change_permission(request, found)
        sources = within_books(Handoff.objects.filter(staff_answer=found), request.user, "book_slug")
        citing = citing_context(request, found.book.slug, form)
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "original": found, "staff_answer": found,
            "title": f"Staff answer {found.pk}: {found.question[:60]}", "has_change_permission": may_change,
            "answer_html": render_answer(found.answer, staff_answers.cards(found.citations)),
            "citations": citation_links(found.citations), "form": form,
            "handoffs": [(h, reverse("admin:audit_handoff_change", args=[h.pk])) for h in sources]
            if request.user.has_perm("audit.view_handoff") else [],
            "may_serve": may_change and found.status != S.ACTIVE,
            "may_retire": may_change and found.status != S.RETIRED,
            **citing,
        }
        return TemplateResponse(request, "admin/audit/staff_answer.html", context)
