"""The chat page at ``/``: server-rendered, usable without JavaScript, streamed with it.

Above the conversation, a search box finds the book's sections (``?q=``, a GET form: the same search as
``/api/v1/search``), each result with "Ask about this", which puts the query in the question box.
Without JavaScript the ask form posts here and the browser is sent back to the page, which
now shows the answer (post/redirect/get, so a reload never asks twice); with
it, ``static/bookchat/chat.js`` streams the answer from ``/api/v1/ask/stream`` (on the
page's own session and CSRF token, no key) and then swaps in the answer's server-rendered
HTML from ``answers/<id>``, so both paths show the same markup. The conversation of each
book lives in the Django session; "New conversation" forgets it.

Under every answer, "Ask the course staff" (standing out under a refused, withheld, unsure or voted-down answer)
posts to audit's hand-off form (``chat-handoff``), which the page reaches by its URL name only: chat imports nothing
of audit, and the form's facts come from audit's context processor. An answer of the course staff (level
``staff``) is labelled "Answered by the course staff" with its date, and shows no confidence note.
"""

from __future__ import annotations

from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError, RequestError
from bookchat.base.languages import script_messages
from chat.channels.access import PAGE_BOUND_BOOK, PAGE_SESSION_FLAG, PageClient
from chat.channels.asking import ClientRequests
from chat.channels.error_responses import error_reply
from chat.channels.feedback import record_feedback
from chat.channels.responses import answer_data
from chat.channels.serializers import validate_feedback
from chat.channels.throttling import RateLimited, limited
from chat.models import Feedback, Turn
from chat.pipeline.conversations import live_conversation
from chat.pipeline.editions import BookIndexing, first_build, pick_edition
from chat.pipeline.rendering import render_answer
from chat.pipeline.source_cards import Source
from ingestion.models import Book, DefaultBook, IngestionJob
from ingestion.reading.outline import book_outline

# In the reader's language (bookchat/locale); the notes under them come from the pipeline, in the question's.
LEVEL_LABELS = {"high": gettext_lazy("High confidence"), "medium": gettext_lazy("Medium confidence"),
                "unsure": gettext_lazy("Not sure"), "low": gettext_lazy("Low confidence"),
                "staff": gettext_lazy("Answered by the course staff")}
REFUSAL_LABELS = {"unsure": gettext_lazy("Not answered directly")}  # any other refusal: NOT_COVERED
NOT_COVERED = gettext_lazy("Not covered")


def _books(request=None) -> list[Book]:
    """The books the page offers: all of them, or a launched session's course book alone (``chat.lti``)."""
    books = Book.objects.roots().order_by("title", "slug")
    bound = request.session.get(PAGE_BOUND_BOOK) if request is not None else None
    return list(books.filter(slug=bound) if bound else books)


def launch_required(request) -> bool:
    """``BOOKCHAT_LTI_REQUIRE_LAUNCH`` and this session was not launched by an LMS."""
    return bool(setting("LTI_REQUIRE_LAUNCH")) and not request.session.get(PAGE_BOUND_BOOK)


def _current_book(request, books: list[Book], slug: str | None) -> Book | None:
    by_slug = {b.slug: b for b in books}
    for candidate in (slug, request.session.get("bookchat_book"), DefaultBook.in_force()):
        if candidate in by_slug:
            return by_slug[candidate]
    return books[0] if books else None


def turn_context(turn: Turn, feedback: str | None) -> dict:
    """What ``_turn.html`` shows of one question and its answer (``feedback``: the reader's vote, if any), from the
    answer's JSON that the turn kept, as the contract shows it."""
    response = answer_data(turn.response) if turn.response else {}
    sources = [Source(**source) for source in response.get("sources", [])]
    refused, flagged, level = response.get("refused", turn.refused), response.get("flagged_for_review", False), \
        response.get("confidence_level")
    staff = response.get("staff_answer")  # the course staff's answer, served again: labelled with its date
    return {
        "answer_id": str(turn.answer_id),
        "question": turn.question,
        # On the page a citation marker jumps to its source card, which opens the book.
        "answer_html": render_answer(turn.answer, sources, href=lambda s: f"#answer-{turn.answer_id}-source-{s.n}"),
        "sources": sources,
        "refused": refused,
        "suggestions": response.get("suggestions", []),
        "level": level,
        "level_label": LEVEL_LABELS.get(level, ""),
        "level_note": response.get("confidence_note"),
        "refusal_label": REFUSAL_LABELS.get(response.get("refusal_reason"), NOT_COVERED),
        # The answer's language and its book's (the pipeline's, when it says): the text's lang, the quotes'.
        "language": response.get("language"),
        "book_language": response.get("book_language"),
        "confidence": response.get("confidence"),
        "disclaimer": response.get("disclaimer"),
        "notice": response.get("notice"),
        "flagged": flagged,
        "generator": response.get("generator"),
        "feedback": feedback,
        "staff": level == "staff" or staff is not None,
        "staff_answered_at": parse_datetime(staff["answered_at"]) if staff and staff.get("answered_at") else None,
        # "Ask the course staff" stands out where the book fell short: refused, withheld, unsure, or voted down.
        "handoff_prominent": bool(refused or flagged or level in ("unsure", "low") or feedback == "down"),
    }


def _search(request, book: Book) -> dict:
    """The page's search box (``?q=``): the sections found, or the error saying why not; a reader's search counts
    against their search limit, never their questions."""
    client = PageClient(session=request.session)
    query = request.GET.get("q", "")
    try:
        asking = ClientRequests(client, request)
        params = {"q": query, "book": book.slug}
        if request.GET.get("report_opens"):  # the page's script adds it: it reports the section opened
            params["report_opens"] = request.GET["report_opens"]
        ask = asking.validate_section_search(params)
        with limited(request, client, searching=True):
            return {"query": query, "result": asking.find(ask)}
    except (RequestError, BookchatError, RateLimited) as exc:
        reply = error_reply(exc)
        return {"query": query, "error": reply.body["message"], "status": reply.status, "headers": reply.headers}


def _page(request, *, book: Book | None, books: list[Book], status: int = 200, error: RequestError | None = None,
          form: dict | None = None):
    request.session[PAGE_SESSION_FLAG] = True
    conversation = edition = None
    if book is not None:
        request.session["bookchat_book"] = book.slug
        edition = pick_edition(book, version=None, locale=None)  # a versioned book answers from its latest
        conversation = live_conversation(PageClient(session=request.session).conversation(book.slug), edition)
    search = _search(request, book) if book is not None and request.GET.get("q", "").strip() else None
    if search is not None and "status" in search:
        status = search["status"]
    if book is not None and "ask" in request.GET and not form:  # "Ask about this" from a search result
        form = {"question": request.GET["ask"][:setting("MAX_QUESTION_CHARS")]}
    turns = list(conversation.turns.order_by("created_at", "id")) if conversation else []
    votes = votes_on(turns)
    turns = [turn_context(t, votes.get(t.answer_id)) for t in turns]
    # Books being indexed for the first time (make run's manual, a first publish): said above the page, which, with
    # no book to ask yet, refreshes itself until there is one.
    indexing = [{"title": job.book_title or job.book_slug, "progress": job.progress_note}
                for job in IngestionJob.objects.first_builds()[:3]]
    context = {
        "books": books, "book": book, "turns": turns, "error": error, "form": form or {}, "search": search,
        "indexing": indexing,
        "outline": book_outline(edition) if book is not None else [],
        "session_id": str(conversation.id) if conversation else "",
        "max_question_chars": setting("MAX_QUESTION_CHARS"), "max_selected_chars": setting("MAX_SELECTED_CHARS"),
        "page_messages": script_messages(get_language() or "en"),  # chat.js's strings, in the page's language
    }
    page = render(request, "bookchat/chat.html", context, status=status)
    for header, value in (search or {}).get("headers", {}).items():  # a refused search's Retry-After
        page[header] = value
    return page


def votes_on(turns: list[Turn]) -> dict:
    """{answer id: "up"/"down"} for the turns that got feedback, in one query."""
    return dict(Feedback.objects.filter(answer_id__in=[t.answer_id for t in turns]).values_list("answer_id", "rating"))


@require_http_methods(["GET", "HEAD", "POST"])
def chat_page(request):
    if launch_required(request):
        return render(request, "bookchat/lti_message.html", {
            "title": _("Open bookchat from your course"),
            "paragraphs": [_("This chat is open to the students of a course: open it from your course's page in your "
                             "learning platform.")]}, status=403)
    books = _books(request)
    if request.method != "POST":
        return _page(request, book=_current_book(request, books, request.GET.get("book")), books=books)
    form = {"question": request.POST.get("question", ""), "selected_text": request.POST.get("selected_text", "")}
    book = _current_book(request, books, request.POST.get("book"))
    if book is None:
        build = first_build()
        if build is not None:  # the first book is being indexed: ask again shortly
            exc = BookIndexing(build)
            page = _page(request, book=None, books=books, status=exc.status, form=form, error=exc)
            page["Retry-After"] = str(exc.retry_after)
            return page
        return _page(request, book=None, books=books, status=404, form=form,
                     error=RequestError("no book has been indexed yet", code="no_books"))
    client = PageClient(session=request.session)
    try:
        asking = ClientRequests(client, request)
        ask = asking.validate({**form, "book": book.slug})
        with limited(request, client):
            answer = asking.answer(ask)
    except (RequestError, BookchatError, RateLimited) as exc:  # a server-side condition is a 503, not a 500
        reply = error_reply(exc)
        error = RequestError(reply.body["message"], code=reply.code, status=reply.status)
        page = _page(request, book=book, books=books, status=reply.status, form=form, error=error)
        for header, value in reply.headers.items():
            page[header] = value
        return page
    # Post/redirect/get: reloading or going back to the answer never asks the question again.
    return HttpResponseRedirect(f"{reverse('chat')}?{urlencode({'book': book.slug})}#answer-{answer.answer_id}")


@require_POST
def new_conversation(request):
    book = request.POST.get("book", "")
    PageClient(session=request.session).remember(book, None)
    return HttpResponseRedirect(reverse("chat") + ("?" + urlencode({"book": book}) if book else ""))


@require_GET
def answer_fragment(request, answer_id):
    """One answer of this session's conversations as HTML, for chat.js to put in the page."""
    conversations = PageClient(session=request.session).conversations()
    turn = Turn.objects.filter(answer_id=answer_id, conversation_id__in=conversations).first()
    if turn is None:
        raise Http404("no such answer in this session")
    context = {"turn": turn_context(turn, votes_on([turn]).get(turn.answer_id))}
    return render(request, "bookchat/_turn.html", context)


@require_POST
def feedback(request, answer_id):
    """The no-JavaScript thumbs: record the vote and go back to the answer."""
    try:
        rating, comment, _ = validate_feedback({"rating": request.POST.get("rating"),
                                                "comment": request.POST.get("comment")})
        record_feedback(answer_id, rating=rating, comment=comment,
                        session_ids=PageClient(session=request.session).conversations(), channel="page")
    except RequestError as exc:
        books = _books(request)
        return _page(request, book=_current_book(request, books, None), books=books, status=exc.status, error=exc)
    back = request.POST.get("next") or reverse("chat")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("chat")
    return HttpResponseRedirect(f"{back}#answer-{answer_id}")
