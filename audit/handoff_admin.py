"""The course staff's inbox in the admin: the hand-offs of their books, open ones first and oldest first, and each
hand-off's page, where a reviewer replies (Markdown, previewed as the student will read it, citing sections found
as they type), marks that the book should cover it, or declines with a reason the student reads.

Who sees what is ``ingestion.roles``: a reviewer restricted to some books lists only their hand-offs, and another
book's hand-off is a 404 (on a GET and on a POST alike, as a row that doesn't exist). Reviewers (the group) may view
and act; nobody adds or deletes a hand-off here (students hand off; retention removes them). Every act is logged
as the admin logs a change (``LogEntry``), with what was done.

``CitingAdmin`` is what the hand-off's page and a staff answer's page (``audit.staff_answer_admin``) share: the
section search (JSON, ``audit.citing``), the preview (JSON for the page's script, or the page again without
JavaScript), and the conversation's answers rendered through the answers' sanitiser.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Case, IntegerField, Value, When
from django.http import Http404, HttpResponseBadRequest, HttpResponseNotAllowed, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.timesince import timesince

from audit import handoffs
from audit.citing import MAX_QUERY_CHARS, citable_sections
from audit.handoff_forms import DeclineForm, ReplyForm, preview, refusal_on
from audit.models import Handoff
from bookchat.base.errors import RequestError
from chat.models import StaffAnswer
from chat.pipeline import staff_answers
from chat.pipeline.rendering import render_answer, safe_url
from chat.pipeline.source_cards import Source
from ingestion.models import Book
from ingestion.roles import BookScopedAdmin, allowed_slugs, within_books

H = Handoff.Status
OPEN_FIRST = Case(When(status=H.OPEN, then=Value(0)), default=Value(1), output_field=IntegerField())
SCRIPT = "bookchat/staff-reply.js"


def visible_book(user, slug: str) -> Book:
    """The book ``slug`` if ``user`` may see it (their roles), else a 404 as for a book that doesn't exist."""
    book = within_books(Book.objects.all(), user, "pk").filter(slug=slug[:64]).first()
    if book is None:
        raise Http404("No such book among yours.")
    return book


def turn_view(turn: dict) -> dict:
    """A turn of a copied conversation as the page shows it: the answer rendered through the answers' sanitiser
    (its ``[n]`` linked to the sources), and each source as a link when its URL is a web address."""
    sources = [s for s in turn.get("sources") or [] if isinstance(s, dict)]
    cards = [Source(n=int(s.get("n") or i), chapter=s.get("chapter") or "", section=s.get("section") or "",
                    heading_path=s.get("heading_path") or "", url=s.get("url") or "", excerpt="",
                    score=float(s.get("score") or 0), chunk_id=str(s.get("chunk_id") or ""), cited=bool(s.get("cited")),
                    document=s.get("document") or "") for i, s in enumerate(sources, 1)]
    return {**turn, "answer_html": render_answer(str(turn.get("answer") or ""), cards),
            "links": [{"n": card.n, "title": card.heading_path or card.section or "(untitled)",
                       "url": card.url if safe_url(card.url) else "", "cited": card.cited} for card in cards]}


def citation_links(citations: list[dict]) -> list[dict]:
    return [{"n": c.get("n"), "title": c.get("heading_path") or c.get("section") or "(untitled)",
             "url": c.get("url") if safe_url(c.get("url") or "") else ""} for c in citations]


def citing_context(request, book_slug: str, form) -> dict:
    """What a page's answer fields need: the section search's and the preview's URLs, and the preview of what was
    posted (the page without JavaScript: its Preview button posts the form)."""
    shown = None
    if form.is_bound and request.POST.get("_action") == "preview":
        book = Book.objects.filter(slug=book_slug).first()
        refs = [line.strip() for line in form.data.get("citations", "").splitlines() if line.strip()]
        shown = preview(book, form.data.get("answer", ""), refs) if book else None
    return {"sections_url": reverse("admin:audit_citable_sections", args=[book_slug]),
            "preview_url": reverse("admin:audit_answer_preview", args=[book_slug]),
            "preview": shown, "script": SCRIPT}


class CitingAdmin:
    """The JSON views a page that writes a cited answer calls (a hand-off's, a staff answer's): the section search
    and the preview, for the books the user may see (mixed into a ModelAdmin)."""

    def may_cite(self, request) -> bool:
        return request.user.has_perm("audit.change_handoff") or request.user.has_perm("chat.change_staffanswer")

    def citing_urls(self) -> list:
        wrap = self.admin_site.admin_view
        return [path("sections/<slug:book>/", wrap(self.sections_view), name="audit_citable_sections"),
                path("preview/<slug:book>/", wrap(self.preview_view), name="audit_answer_preview")]

    def sections_view(self, request, book: str):
        """``?q=`` as typed → the sections of the book to cite (JSON, for the page's script)."""
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        if not self.may_cite(request):
            raise PermissionDenied
        found = visible_book(request.user, book)
        query = request.GET.get("q", "")
        if len(query) > MAX_QUERY_CHARS:
            return JsonResponse({"error": "query_too_long", "message": f"at most {MAX_QUERY_CHARS} characters"},
                                status=400)
        return JsonResponse({"book": found.slug, "query": query, "sections": citable_sections(found, query)})

    def preview_view(self, request, book: str):
        """The answer and citations posted → the answer as the student will read it (JSON: ``html``, ``error``,
        ``citations``). Nothing is saved."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.may_cite(request):
            raise PermissionDenied
        found = visible_book(request.user, book)
        refs = [line.strip() for line in request.POST.get("citations", "").splitlines() if line.strip()]
        return JsonResponse(preview(found, request.POST.get("answer", ""), refs))


@admin.register(Handoff)
class HandoffAdmin(CitingAdmin, BookScopedAdmin, admin.ModelAdmin):
    list_display = ("asked", "book_slug", "short_question", "status", "waiting", "channel")
    list_display_links = ("asked", "short_question")
    list_filter = ("status", "book_slug", "channel")
    search_fields = ("note", "reply", "declined_reason", "=answer_id")
    ordering = (OPEN_FIRST.asc(), "created_at")
    list_per_page = 50
    show_full_result_count = False
    change_list_template = "admin/audit/handoff_inbox.html"
    book_lookup = "book_slug"  # the root book's slug, copied: a hand-off outlives its book

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="handed off", ordering="created_at")
    def asked(self, obj: Handoff) -> str:
        return timezone.localtime(obj.created_at).strftime("%Y-%m-%d %H:%M")

    @admin.display(description="question")
    def short_question(self, obj: Handoff) -> str:
        question = obj.question or "(no question)"
        return question if len(question) <= 90 else question[:89] + "…"

    @admin.display(description="waiting")
    def waiting(self, obj: Handoff) -> str:
        if obj.status != H.OPEN:
            return f"closed {timezone.localtime(obj.replied_at):%Y-%m-%d}" if obj.replied_at else "closed"
        return timesince(obj.created_at)

    # -- the inbox ------------------------------------------------------------------------------------------------
    def changelist_view(self, request, extra_context=None):
        slugs = allowed_slugs(request.user)
        now = timezone.now()
        books = [{"book": slug, "open": row["open"], "waiting": timesince(row["oldest"], now),
                  "oldest": row["oldest"]} for slug, row in sorted(handoffs.open_by_book(slugs).items())]
        review = within_books(StaffAnswer.objects.filter(status=StaffAnswer.Status.NEEDS_REVIEW), request.user,
                              "book").select_related("book").order_by("updated_at")
        context = {"open_books": books, "needs_review": list(review[:50]), "needs_review_count": review.count(),
                   "may_view_staff_answers": request.user.has_perm("chat.view_staffanswer")}
        return super().changelist_view(request, {**context, **(extra_context or {})})

    def get_urls(self):
        return self.citing_urls() + super().get_urls()

    # -- a hand-off's page ----------------------------------------------------------------------------------------
    def change_view(self, request, object_id, form_url="", extra_context=None):
        handoff = self.get_object(request, unquote(object_id))
        if handoff is None:
            raise Http404("No such hand-off.")
        if not self.has_view_or_change_permission(request, handoff):
            raise PermissionDenied
        reply_form, decline_form = ReplyForm(initial=self._reply_initial(handoff)), DeclineForm()
        if request.method == "POST":
            if not self.has_change_permission(request, handoff):
                raise PermissionDenied
            action = request.POST.get("_action")
            if action in ("reply", "preview"):
                reply_form = ReplyForm(request.POST)
                if action == "reply" and self._reply(request, handoff, reply_form):
                    return self._done(request, handoff)
            elif action == "decline":
                decline_form = DeclineForm(request.POST)
                if self._decline(request, handoff, decline_form):
                    return self._done(request, handoff)
            elif action == "coverage":
                if self._coverage(request, handoff):
                    return self._done(request, handoff)
            else:
                return HttpResponseBadRequest("unknown action")
        return self._page(request, handoff, reply_form, decline_form)

    def _reply_initial(self, handoff: Handoff) -> dict:
        if handoff.status != H.ANSWERED:
            return {}
        return {"answer": handoff.reply, "citations": [c.get("url") or c.get("chunk_id") for c in handoff.citations],
                "keep": handoff.staff_answer_id is not None}

    def _reply(self, request, handoff: Handoff, form: ReplyForm) -> bool:
        if not form.is_valid():
            return False
        editing = handoff.status == H.ANSWERED
        try:
            handoffs.reply(handoff, answer=form.cleaned_data["answer"], citations=form.cleaned_data["citations"],
                           user=request.user, keep=form.cleaned_data["keep"])
        except RequestError as exc:
            refusal_on(form, exc)
            return False
        kept = f"; kept as staff answer {handoff.staff_answer_id}" if handoff.staff_answer_id else ""
        self.log_change(request, handoff, f"{'Edited the reply' if editing else 'Replied'}, citing "
                                          f"{len(handoff.citations)} section(s){kept}.")
        messages.success(request, "The reply is sent: the student reads it on their hand-off's page.")
        return True

    def _decline(self, request, handoff: Handoff, form: DeclineForm) -> bool:
        if not form.is_valid():
            return False
        try:
            handoffs.decline(handoff, reason=form.cleaned_data["reason"], user=request.user)
        except RequestError as exc:
            refusal_on(form, exc)
            return False
        self.log_change(request, handoff, "Declined.")
        messages.success(request, "Declined: the student reads your reason.")
        return True

    def _coverage(self, request, handoff: Handoff) -> bool:
        try:
            handoffs.note_coverage(handoff, user=request.user)
        except RequestError as exc:  # (a button, no field: the page says why above it)
            messages.error(request, exc.message)
            return False
        self.log_change(request, handoff, "Marked: the book should cover this.")
        messages.success(request, "Marked: it joins the book's coverage gaps, and the student is told.")
        return True

    def _done(self, request, handoff: Handoff) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:audit_handoff_changelist"))

    def _page(self, request, handoff: Handoff, reply_form: ReplyForm, decline_form: DeclineForm):
        may_change = self.has_change_permission(request, handoff)
        context = {
            **self.admin_site.each_context(request), "opts": self.opts, "original": handoff, "handoff": handoff,
            "title": f"Hand-off {handoff.pk}: {handoff.question[:60]}", "has_change_permission": may_change,
            "turns": [turn_view(turn) for turn in handoff.conversation if isinstance(turn, dict)],
            "reply_html": render_answer(handoff.reply, staff_answers.cards(handoff.citations)),
            "citations": citation_links(handoff.citations), "waiting": timesince(handoff.created_at),
            "may_reply": may_change and handoff.status in (H.OPEN, H.ANSWERED),
            "may_close": may_change and handoff.status == H.OPEN,
            "reply_form": reply_form, "decline_form": decline_form,
            "staff_answer_url": reverse("admin:chat_staffanswer_change", args=[handoff.staff_answer_id])
            if handoff.staff_answer_id and request.user.has_perm("chat.view_staffanswer") else "",
            **citing_context(request, handoff.book_slug, reply_form),
        }
        return TemplateResponse(request, "admin/audit/handoff.html", context)
