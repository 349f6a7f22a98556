"""The course staff's pages in the admin (``audit.handoff_admin``, ``audit.staff_answer_admin``, their forms
``audit.handoff_forms`` and the section search ``audit.citing``), on the real database and the bundled manual: the
inbox (a reviewer's books only, open ones first and oldest first, staff answers waiting for review), a hand-off's
page (the whole conversation, the note, the contact), a reply citing a section (kept as a staff answer, logged),
the preview (sanitised), "the book should cover this", a decline; the staff answers' pages (served count and
thumbs, edit, retire, bring back, confirm with the citations re-read); and the bad input each refuses, in tables,
with nothing changed."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.urls import reverse
from django.utils import timezone

from audit import handoff_admin, staff_answer_admin
from audit.citing import by_heading, citable_sections
from audit.handoff_forms import CitationsField, ReplyForm, preview
from audit.models import AuditLog, Handoff
from audit.staff_answer_actions import check_question, citation_refs
from chat.models import StaffAnswer
from chat.pipeline.staff_answers import MAX_ANSWER_CHARS, MAX_CITATIONS, section_text
from ingestion.models import Book, BookAccess, Chunk

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
H = Handoff.Status


@pytest.fixture(autouse=True)
def manual(manual_book, no_llm) -> Book:
    return Book.objects.get(slug=BOOK)


@pytest.fixture
def beta() -> Book:
    return Book.objects.create(slug="beta", title="Beta", embedder_name="test", embedder_dimension=3)


def a_section(manual: Book, path: str = "using/01-ingest.md") -> Chunk:
    return Chunk.objects.filter(book=manual, document__path=path, anchor__gt="").order_by("ordinal").first()


def handoff(book_slug: str = BOOK, question: str = "Can I import pages from Notion?", **fields) -> Handoff:
    conversation = [
        {"answer_id": str(uuid.uuid4()), "asked_at": "2026-11-01T10:00:00+00:00",
         "question": "How do I ingest a folder?", "selected_text": "Point ingest at the folder.",
         "answer": "Run `manage.py ingest PATH` [1].",
         "sources": [{"n": 1, "heading_path": "Ingest a book > Ingest a folder", "cited": True,
                      "url": "https://docs.example.org/ingest#folders"},
                     {"n": 2, "heading_path": "Evil", "url": "javascript:alert(1)"}],
         "confidence_level": "high", "status": "answered"},
        {"answer_id": str(uuid.uuid4()), "asked_at": "2026-11-01T10:01:00+00:00", "question": question,
         "selected_text": "", "answer": "The book doesn't mention “Notion”.", "sources": [],
         "confidence_level": "low", "status": "not_covered"},
    ]
    values = {"answer_id": uuid.uuid4(), "book_slug": book_slug, "channel": "page", "conversation": conversation,
              "note": "I tried <b>twice</b>.", "contact_email": "student@example.edu"}
    return Handoff.objects.create(**(values | fields))


def staff(name: str, *, books=None, groups=("Reviewers",)) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True, email=f"{name}@example.edu")
    user.groups.set(Group.objects.filter(name__in=groups))
    if books is not None:
        BookAccess.objects.create(user=user).books.set(books)
    return user


@pytest.fixture
def rita(client, manual):
    """A reviewer restricted to the manual."""
    client.force_login(staff("rita", books=[manual]))
    return client


def change(h: Handoff) -> str:
    return reverse("admin:audit_handoff_change", args=[h.pk])


def reply_data(manual: Book, **fields) -> dict:
    return {"_action": "reply", "answer": "Not directly: export them as Markdown, then upload them [1].",
            "citations": a_section(manual).url, "keep": "on", **fields}


# -- the inbox -----------------------------------------------------------------------------------------------------
def test_the_inbox_lists_a_reviewers_books_open_first_and_oldest_first(rita, beta):
    now = timezone.now()
    newer = handoff(question="newer open", created_at=now - timedelta(hours=1))
    older = handoff(question="older open", created_at=now - timedelta(days=2))
    closed = handoff(question="answered long ago", status=H.DECLINED, declined_reason="no",
                     created_at=now - timedelta(days=9), replied_at=now)
    handoff(book_slug="beta", question="another book's")
    page = rita.get(reverse("admin:audit_handoff_changelist"))
    assert page.status_code == 200
    assert [h.pk for h in page.context["cl"].result_list] == [older.pk, newer.pk, closed.pk]
    assert b"another book" not in page.content and b"beta" not in page.content, "not even the book filter"
    assert [(b["book"], b["open"]) for b in page.context["open_books"]] == [(BOOK, 2)]
    assert "2\xa0days" in page.context["open_books"][0]["waiting"]
    filtered = rita.get(reverse("admin:audit_handoff_changelist"), {"status__exact": "open"})
    assert filtered.context["cl"].result_count == 2


def test_staff_without_the_reviewers_group_see_no_hand_offs(client, manual):
    client.force_login(staff("sam", groups=()))
    h = handoff()
    assert client.get(reverse("admin:audit_handoff_changelist")).status_code == 403
    assert client.get(change(h)).status_code == 403
    assert client.post(change(h), {"_action": "coverage"}).status_code == 403
    assert client.get(reverse("admin:audit_citable_sections", args=[BOOK]), {"q": "ingest"}).status_code == 403
    assert Handoff.objects.get(pk=h.pk).status == H.OPEN


def test_nobody_adds_or_deletes_hand_offs_or_staff_answers(admin_client):
    h = handoff()
    assert admin_client.get(reverse("admin:audit_handoff_add")).status_code == 403
    assert admin_client.get(reverse("admin:audit_handoff_delete", args=[h.pk])).status_code == 403
    assert admin_client.get(reverse("admin:chat_staffanswer_add")).status_code == 403


def test_a_hand_offs_page_shows_the_whole_conversation_the_note_and_the_contact(rita):
    h = handoff()
    page = rita.get(change(h))
    assert page.status_code == 200
    html = page.content.decode()
    for text in ("How do I ingest a folder?", "Can I import pages from Notion?", "Point ingest at the folder.",
                 "mention “Notion”", "<code>manage.py ingest PATH</code>",
                 'href="https://docs.example.org/ingest#folders"', "I tried &lt;b&gt;twice&lt;/b&gt;.",
                 'href="mailto:student@example.edu"', "The question handed off"):
        assert text in html, text
    assert "javascript:alert" not in html and "<b>twice" not in html
    assert 'id="reply-form"' in html and 'id="close-form"' in html
    assert 'src="/static/bookchat/staff-reply.js"' in html and "<script>" not in html, "no inline script"


def test_another_books_hand_off_is_not_found_on_a_get_and_on_a_post(rita, beta):
    other = handoff(book_slug="beta")
    assert rita.get(change(other)).status_code == 404
    assert rita.get(reverse("admin:audit_handoff_history", args=[other.pk])).status_code == 404
    for data in ({"_action": "decline", "reason": "no"}, {"_action": "coverage"},
                 {"_action": "reply", "answer": "x", "citations": ""}):
        assert rita.post(change(other), data).status_code == 404
    assert Handoff.objects.get(pk=other.pk).status == H.OPEN
    assert rita.get(reverse("admin:audit_citable_sections", args=["beta"]), {"q": "x"}).status_code == 404
    assert rita.post(reverse("admin:audit_answer_preview", args=["beta"]), {"answer": "x"}).status_code == 404


# -- acting on a hand-off ------------------------------------------------------------------------------------------
def test_a_reply_citing_a_section_reaches_the_student_is_kept_and_logged(rita, manual):
    h = handoff()
    section = a_section(manual)
    response = rita.post(change(h), reply_data(manual))
    assert response.status_code == 302 and response["Location"] == reverse("admin:audit_handoff_changelist")
    h.refresh_from_db()
    assert h.status == H.ANSWERED and h.replied_by.username == "rita"
    assert [c["url"] for c in h.citations] == [section.url]
    kept = StaffAnswer.objects.get(pk=h.staff_answer_id)
    assert kept.question == "Can I import pages from Notion?" and kept.status == StaffAnswer.Status.ACTIVE
    entry = LogEntry.objects.get(object_id=str(h.pk))
    assert entry.user.username == "rita" and entry.get_change_message() == (
        f"Replied, citing 1 section(s); kept as staff answer {kept.pk}.")
    page = rita.get(change(h)).content.decode()
    assert "Edit the reply" in page and f"staff answer {kept.pk}" in page and section.url in page
    assert 'id="close-form"' not in page, "an answered hand-off is not declined"
    response = rita.post(change(h), reply_data(manual, answer="Export them as Markdown first [1]."))
    assert response.status_code == 302
    kept.refresh_from_db()
    assert kept.answer == "Export them as Markdown first [1]." and StaffAnswer.objects.count() == 1


def test_a_reply_not_kept_makes_no_staff_answer_and_the_default_follows_the_setting(rita, manual, settings):
    h = handoff()
    data = reply_data(manual)
    del data["keep"]
    assert rita.post(change(h), data).status_code == 302
    assert not StaffAnswer.objects.exists()
    settings.BOOKCHAT = {**settings.BOOKCHAT, "STAFF_ANSWERS": False}
    assert ReplyForm().fields["keep"].initial is False
    settings.BOOKCHAT = {**settings.BOOKCHAT, "STAFF_ANSWERS": True}
    assert ReplyForm().fields["keep"].initial is True


def test_markup_and_script_in_a_reply_are_sanitised_where_it_is_shown(rita, manual):
    from audit.handoffs import status

    h = handoff()
    sneaky = ("<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) "
              "**Export** them [1].")
    assert rita.post(change(h), reply_data(manual, answer=sneaky)).status_code == 302
    h.refresh_from_db()
    page = rita.get(change(h)).content.decode()
    shown = page.split('class="bookchat-answer bookchat-reply">')[1].split("</div>")[0]
    assert "javascript:alert(3)" in page.split("</textarea>")[0], "the form holds the Markdown as written, as text"
    for html in (status(h)["reply"]["answer_html"], shown):
        assert "<strong>Export</strong>" in html
        assert "<script>alert" not in html and "<img" not in html and "javascript:alert(3)" not in html
        assert "&lt;script&gt;" in html


def test_the_preview_renders_what_the_student_will_read_and_saves_nothing(rita, manual):
    h = handoff()
    data = reply_data(manual, _action="preview", answer="<script>alert(1)</script> **Export** them [1].")
    page = rita.post(change(h), data)
    assert page.status_code == 200
    html = page.content.decode()
    preview_part = html.split('class="bookchat-preview-body">')[1].split("</section>")[0]
    assert "<strong>Export</strong>" in preview_part and "<script>alert" not in preview_part
    assert a_section(manual).url.split("#")[0] in preview_part, "[1] links to the section"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, "the form keeps what was typed"
    assert Handoff.objects.get(pk=h.pk).status == H.OPEN and not StaffAnswer.objects.exists()
    url = reverse("admin:audit_answer_preview", args=[BOOK])
    shown = rita.post(url, {"answer": "See [1] <i>x</i>", "citations": a_section(manual).url}).json()
    assert shown["error"] == "" and "<em>x</em>" not in shown["html"] and "&lt;i&gt;" in shown["html"]
    assert shown["citations"][0]["url"] == a_section(manual).url
    wrong = rita.post(url, {"answer": "See [1]", "citations": "https://elsewhere.example/x"}).json()
    assert "is not a section of" in wrong["error"]
    assert rita.get(url).status_code == 405


REPLY_REFUSALS = [  # (what is posted besides a valid reply, what the page says)
    ({"citations": "https://elsewhere.example/page#part"}, "is not a section of"),
    ({"citations": "not-a-passage-id"}, "is not a section of"),
    ({"answer": ""}, "This field is required."),
    ({"answer": "   "}, "This field is required."),
    ({"answer": "x" * (MAX_ANSWER_CHARS + 1)}, f"at most {MAX_ANSWER_CHARS} characters"),
    ({"answer": "See [2]."}, "the answer cites [2], but 1 section(s) are cited"),
    ({"citations": "\n".join(f"/docs/x{n}" for n in range(MAX_CITATIONS + 1))},
     f"Cite at most {MAX_CITATIONS} sections."),
]


@pytest.mark.parametrize(("posted", "said"), REPLY_REFUSALS)
def test_a_reply_the_page_refuses_says_why_and_changes_nothing(rita, manual, posted, said):
    h = handoff()
    page = rita.post(change(h), reply_data(manual, **posted))
    assert page.status_code == 200 and said in page.content.decode()
    h.refresh_from_db()
    assert h.status == H.OPEN and not h.reply and not StaffAnswer.objects.exists()
    assert not LogEntry.objects.exists()


def test_the_book_should_cover_this_closes_it_and_joins_the_coverage_gaps(rita):
    h = handoff()
    AuditLog.objects.create(answer_id=h.answer_id, channel="page", book_slug=BOOK, question=h.question,
                            answer="…", status="answered", confidence=0.9, confidence_level="high")
    assert rita.post(change(h), {"_action": "coverage"}).status_code == 302
    h.refresh_from_db()
    assert h.status == H.COVERAGE and h.replied_by.username == "rita"
    assert LogEntry.objects.get(object_id=str(h.pk)).get_change_message() == "Marked: the book should cover this."
    gaps = rita.get(reverse("admin:audit_gaps")).context["gaps"]
    assert [(g.count, g.staff, g.examples) for g in gaps] == [(1, 1, [h.question])]
    exported = rita.get(reverse("admin:audit_gaps"), {"export": "markdown"}).content.decode()
    assert "1 marked by the course staff: the book should cover this" in exported


def test_a_decline_with_a_reason_closes_it_and_is_logged(rita):
    h = handoff()
    assert rita.post(change(h), {"_action": "decline", "reason": "This course doesn't use Notion."}).status_code == 302
    h.refresh_from_db()
    assert (h.status, h.declined_reason) == (H.DECLINED, "This course doesn't use Notion.")
    assert LogEntry.objects.get(object_id=str(h.pk)).get_change_message() == "Declined."
    page = rita.get(change(h)).content.decode()
    assert "This course doesn&#x27;t use Notion." in page and 'id="reply-form"' not in page


CLOSE_REFUSALS = [  # (the hand-off's state, what is posted, what the page says)
    ({}, {"_action": "decline", "reason": ""}, "This field is required."),
    ({}, {"_action": "decline", "reason": "   "}, "This field is required."),
    ({}, {"_action": "decline", "reason": "x" * 2001}, "at most 2000 characters"),
    ({"status": H.DECLINED, "declined_reason": "no"}, {"_action": "decline", "reason": "again"}, "declined already"),
    ({"status": H.DECLINED, "declined_reason": "no"}, {"_action": "coverage"}, "declined already"),
    ({"status": H.COVERAGE}, {"_action": "reply", "answer": "x", "citations": ""}, "takes a reply"),
    ({"status": H.ANSWERED, "reply": "y"}, {"_action": "coverage"}, "answered already"),
]


@pytest.mark.parametrize(("state", "posted", "said"), CLOSE_REFUSALS)
def test_closing_refused_says_why_and_changes_nothing(rita, state, posted, said):
    h = handoff(**state)
    page = rita.post(change(h), posted)
    assert page.status_code == 200 and said in page.content.decode()
    fresh = Handoff.objects.get(pk=h.pk)
    assert (fresh.status, fresh.declined_reason, fresh.reply) == (h.status, h.declined_reason, h.reply)
    assert not LogEntry.objects.exists()


def test_an_unknown_action_is_a_bad_request(rita):
    h = handoff()
    assert rita.post(change(h), {"_action": "delete"}).status_code == 400
    assert rita.post(change(h), {}).status_code == 400
    assert Handoff.objects.get(pk=h.pk).status == H.OPEN


def test_a_hand_off_id_that_is_no_number_or_no_row_is_not_found(rita):
    assert rita.get(reverse("admin:audit_handoff_change", args=["99999999"])).status_code == 404
    assert rita.get("/admin/audit/handoff/not-a-number/change/").status_code == 404


# -- the section search --------------------------------------------------------------------------------------------
def test_sections_are_found_by_their_headings_then_by_their_text(rita, manual):
    url = reverse("admin:audit_citable_sections", args=[BOOK])
    found = rita.get(url, {"q": "ingest fold"}).json()["sections"]
    assert found and found[0]["matched"] == "heading" and "Ingest a folder" in found[0]["heading_path"]
    by_text = rita.get(url, {"q": "how do readers vote thumbs down"}).json()["sections"]
    assert any(s["matched"] == "text" for s in by_text)
    for section in found + by_text:
        assert (Chunk.objects.filter(book=manual, url=section["ref"]).exists()
                or Chunk.objects.filter(book=manual, pk=section["ref"]).exists()), section
    assert rita.get(url, {"q": "x"}).json()["sections"] == [], "one letter finds nothing yet"
    assert rita.get(url, {"q": "x" * 201}).status_code == 400
    assert rita.post(url, {"q": "ingest"}).status_code == 405
    before = AuditLog.objects.count()
    rita.get(url, {"q": "publish"})
    assert AuditLog.objects.count() == before, "a reviewer's search is no reader's search"


def test_a_heading_search_wants_every_word_and_ranks_the_sections_own_heading_first():
    sections = [{"chapter": "Using", "page": "Publish from CI", "heading_path": "Publish from CI > GitHub Actions"},
                {"chapter": "Using", "page": "Publish from CI", "heading_path": "Publish from CI"},
                {"chapter": "Operating", "page": "Commands", "heading_path": "Commands > make targets"}]
    assert [s["heading_path"] for s in by_heading(sections, ["git", "publ"])] == ["Publish from CI > GitHub Actions"]
    assert [s["heading_path"] for s in by_heading(sections, ["publish"])] == [
        "Publish from CI", "Publish from CI > GitHub Actions"]
    assert by_heading(sections, ["nothing"]) == []
    assert citable_sections(Book(slug="empty", title="Empty"), "  ") == []


def test_citation_lines_are_refs_and_a_citations_ref_is_its_url_else_its_passage():
    field = CitationsField(required=False)
    assert field.clean(" https://a.example/x#y \n\n  abc123  \n") == ["https://a.example/x#y", "abc123"]
    assert field.prepare_value(["a", "b"]) == "a\nb"
    assert citation_refs([{"url": "https://a.example/x", "chunk_id": "c1"}, {"url": "", "chunk_id": "c2"}]) == [
        "https://a.example/x", "c2"]
    assert check_question("  How   do I\nask?  ") == "How do I ask?"


def test_a_preview_of_citations_that_are_not_sections_says_so(manual):
    shown = preview(manual, "See [1].", ["nowhere"])
    assert "is not a section of" in shown["error"] and shown["citations"] == []


# -- staff answers -------------------------------------------------------------------------------------------------
def kept_answer(manual: Book, **fields) -> StaffAnswer:
    section = a_section(manual)
    citation = {"n": 1, "chapter": "Using", "section": "Ingest a folder", "heading_path": section.heading_path,
                "url": section.url, "excerpt": "…", "score": 1.0, "chunk_id": section.id, "cited": True,
                "document": section.document.path, "anchor": section.anchor, "text": "the section's text then"}
    values = {"book": manual, "question": "Can I import pages from Notion?", "answer": "Export them first [1].",
              "citations": [citation], "served": 7, "thumbs_up": 3, "thumbs_down": 1}
    return StaffAnswer.objects.create(**(values | fields))


def staff_change(found: StaffAnswer) -> str:
    return reverse("admin:chat_staffanswer_change", args=[found.pk])


def test_staff_answers_are_listed_per_book_with_how_often_served_and_their_thumbs(rita, manual, beta):
    mine = kept_answer(manual)
    theirs = kept_answer(manual, book=beta, question="beta's question")
    page = rita.get(reverse("admin:chat_staffanswer_changelist"))
    assert page.status_code == 200 and [a.pk for a in page.context["cl"].result_list] == [mine.pk]
    assert b"beta" not in page.content
    assert rita.get(staff_change(theirs)).status_code == 404
    assert rita.post(staff_change(theirs), {"_action": "retire"}).status_code == 404
    assert StaffAnswer.objects.get(pk=theirs.pk).status == StaffAnswer.Status.ACTIVE
    html = rita.get(staff_change(mine)).content.decode()
    assert "7 times" in html and "3 up, 1 down" in html


def test_a_staff_answer_waiting_for_review_is_in_the_inbox_and_confirmed_with_its_citations_reread(rita, manual):
    waiting = kept_answer(manual, status=StaffAnswer.Status.NEEDS_REVIEW,
                          review_reason="the section “Ingest a folder” changed")
    inbox = rita.get(reverse("admin:audit_handoff_changelist")).content.decode()
    assert "Staff answers waiting for review (1)" in inbox and "the section “Ingest a folder” changed" in inbox
    assert staff_change(waiting) in inbox
    page = rita.get(staff_change(waiting)).content.decode()
    assert "Waits for review, not served" in page and "Confirm it as it is" in page
    assert rita.post(staff_change(waiting), {"_action": "serve"}).status_code == 302
    waiting.refresh_from_db()
    section = a_section(manual)
    assert waiting.status == StaffAnswer.Status.ACTIVE and waiting.review_reason == ""
    assert waiting.citations[0]["text"] == section_text(manual, section.document.path, section.heading_path)
    assert waiting.served == 7, "its counts stay"
    assert "Served again" in LogEntry.objects.get(object_id=str(waiting.pk)).get_change_message()


def test_a_staff_answer_is_retired_and_brought_back(rita, manual):
    found = kept_answer(manual)
    assert rita.post(staff_change(found), {"_action": "retire"}).status_code == 302
    found.refresh_from_db()
    assert found.status == StaffAnswer.Status.RETIRED
    assert "Bring it back" in rita.get(staff_change(found)).content.decode()
    again = rita.post(staff_change(found), {"_action": "retire"})
    assert again.status_code == 200 and "Retire it" not in again.content.decode()
    assert rita.post(staff_change(found), {"_action": "serve"}).status_code == 302
    found.refresh_from_db()
    assert found.status == StaffAnswer.Status.ACTIVE
    assert [e.get_change_message() for e in LogEntry.objects.order_by("action_time")] == [
        "Retired.", "Served again, its citations read from the book as it is now."]


def test_a_staff_answer_citing_a_section_the_book_lost_is_not_served_again_but_edited(rita, manual):
    found = kept_answer(manual, status=StaffAnswer.Status.NEEDS_REVIEW, review_reason="a cited section is gone")
    found.citations = [{**found.citations[0], "url": "https://gone.example/old#part", "chunk_id": "gone"}]
    found.save()
    page = rita.post(staff_change(found), {"_action": "serve"})
    assert page.status_code == 200 and "edit the answer to cite another" in page.content.decode()
    assert StaffAnswer.objects.get(pk=found.pk).status == StaffAnswer.Status.NEEDS_REVIEW
    section, before = a_section(manual, "using/03-asking-questions.md"), found.answered_at
    edited = rita.post(staff_change(found), {"_action": "save", "question": "Can I import pages from Notion?",
                                             "answer": "Ask in the chat instead [1].", "citations": section.url})
    assert edited.status_code == 302
    found.refresh_from_db()
    assert found.status == StaffAnswer.Status.ACTIVE and found.citations[0]["url"] == section.url
    assert found.answer == "Ask in the chat instead [1]." and found.answered_at > before, "dated anew"


def test_editing_a_staff_answers_question_embeds_it_again(rita, manual):
    found = kept_answer(manual, question_vector=[0.0] * 384, embedder="stale")
    data = {"_action": "save", "question": "How do I bring pages over from Notion?", "answer": found.answer,
            "citations": a_section(manual).url}
    assert rita.post(staff_change(found), data).status_code == 302
    found.refresh_from_db()
    assert found.question == "How do I bring pages over from Notion?" and found.embedder != "stale"
    assert any(abs(x) > 0 for x in found.question_vector)


STAFF_ANSWER_REFUSALS = [
    ({"question": ""}, "This field is required."),
    ({"question": "x" * 1001}, "at most 1000 characters"),
    ({"answer": ""}, "This field is required."),
    ({"answer": "See [3]."}, "the answer cites [3]"),
    ({"citations": "https://elsewhere.example/page"}, "is not a section of"),
]


@pytest.mark.parametrize(("posted", "said"), STAFF_ANSWER_REFUSALS)
def test_an_edit_the_page_refuses_says_why_and_changes_nothing(rita, manual, posted, said):
    found = kept_answer(manual)
    data = {"_action": "save", "question": found.question, "answer": found.answer,
            "citations": a_section(manual).url, **posted}
    page = rita.post(staff_change(found), data)
    assert page.status_code == 200 and said in page.content.decode()
    fresh = StaffAnswer.objects.get(pk=found.pk)
    assert (fresh.question, fresh.answer, fresh.citations) == (found.question, found.answer, found.citations)


def test_the_admin_pages_are_the_registered_ones():
    from django.contrib import admin

    assert isinstance(admin.site._registry[Handoff], handoff_admin.HandoffAdmin)
    assert isinstance(admin.site._registry[StaffAnswer], staff_answer_admin.StaffAnswerAdmin)


# -- the dashboard ---------------------------------------------------------------------------------------------------
def test_the_dashboard_shows_each_books_open_hand_offs_and_the_oldest_ones_wait(rita, beta):
    now = timezone.now()
    handoff(created_at=now - timedelta(hours=5))
    handoff(created_at=now - timedelta(hours=1))
    handoff(status=H.DECLINED, created_at=now - timedelta(days=3))
    handoff(book_slug="beta")
    page = rita.get(reverse("admin:audit_dashboard"))
    rows = page.context["data"]["handoffs"]
    assert [(r["book"], r["open"]) for r in rows] == [(BOOK, 2)]
    assert timedelta(hours=5) <= rows[0]["waited"] < timedelta(hours=6)
    assert 'id="dashboard-handoffs"' in page.content.decode() and b"beta" not in page.content


def test_every_form_of_the_course_staff_refuses_a_post_without_its_csrf_token(manual):
    from django.test import Client

    reviewer = staff("cora", books=[manual])
    h, found = handoff(), kept_answer(manual)
    posts = [(change(h), {"_action": "coverage"}), (change(h), {"_action": "decline", "reason": "no"}),
             (change(h), reply_data(manual)), (staff_change(found), {"_action": "retire"}),
             (reverse("admin:audit_answer_preview", args=[BOOK]), {"answer": "x"})]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(reviewer)
    for path, fields in posts:
        response = strict.post(path, fields)
        assert response.status_code == 403 and b"CSRF" in response.content, path
    assert Handoff.objects.get(pk=h.pk).status == H.OPEN
    assert StaffAnswer.objects.get(pk=found.pk).status == StaffAnswer.Status.ACTIVE


def test_the_staff_pages_script_inserts_only_the_servers_sanitised_preview():
    """Book text and search results go on the page as text; the one HTML it inserts is the preview the server
    rendered through the answers' sanitiser (``preview``'s ``html``)."""
    import re
    from pathlib import Path

    source = (Path(__file__).resolve().parent.parent / "static" / "bookchat" / "staff-reply.js").read_text()
    assert re.findall(r"innerHTML\s*=\s*([\w.]+)", source) == ["data.html"]
    for other in ("outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "eval("):
        assert other not in source, other
