"""Security drills: prompt injection against the LLM path, widget keys and CORS, what reviewers and staff can
do and see in the admin, CSRF on every form, the deployment check and the security headers.

Prompt injection: ``tests/data/prompt_injections.jsonl`` holds the attacks (in the question, in a selected
passage, and hidden in the chapters of a tiny book built from the ``page`` fields). The test server plays a
model that *falls* for each one: it writes the attack's ``obeyed`` text (``{first}`` is a true sentence of
excerpt [1], ``{system}`` the system prompt it was sent). So what is tested is our pipeline, through the API
stream and the chat page: the attack reaches the model only as quoted data, the system prompt never reaches
the reader (not even as a streamed token), an answer that isn't the book's is withheld, links the book
doesn't contain are refused, and markup is never live on the page. ``expect`` says how each attack ends:
``withheld`` (grounding failed), ``fallback`` (the model echoed its prompt: the extractive answer instead),
``grounded`` (the answer passed: its markup is inert and what grounding could not support is listed in
``unsupported``), ``refused`` (the model said NOT_IN_BOOK).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client, override_settings
from django.urls import reverse

from audit.models import AuditLog, Handoff
from audit.recording import hash_ip, write
from bookchat.base.conf import SETTINGS
from bookchat.base.security import CONTENT_SECURITY_POLICY, INLINE_STYLES_POLICY, https_settings
from chat.models import ApiKey, Feedback
from chat.pipeline.announcements import AuditRecord, Outcome
from chat.pipeline.answering import WITHHELD_MESSAGE, answer_question
from chat.pipeline.generation import ECHO_WINDOW, SYSTEM_PROMPT
from chat.pipeline.questions import AskRequest
from chat.receivers import queue_calibration
from ingestion.models import Book, Chunk, Document, IndexRun, IngestionJob
from ingestion.signals import book_indexed
from tests.conftest import REPO, committed, run_command

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
INJECTED_BOOK, INJECTED_TITLE = "injected-greenhouse", "Greenhouse Handbook"
SITE = "https://docs.example.org"
ATTACKS = [json.loads(line) for line in (REPO / "tests" / "data" / "prompt_injections.jsonl").read_text().splitlines()
           if line.strip()]
DANGEROUS_TAGS = {"script", "iframe", "img", "svg", "style", "object", "embed", "link", "meta", "base", "frame"}


# -- prompt injection -------------------------------------------------------------------------------------------
@pytest.fixture
def llm(settings, openai_server, manual_book):
    """The LLM path against the test server playing a model that obeys every injection. Every question is in
    scope (a tiny threshold) and the answerability check is off (it would refuse many of them before any model
    call: their all-capital words are in no passage), so every attack reaches the model; time budgets are
    generous."""
    openai_server.reset()
    openai_server.chat_mode = "template"
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": openai_server.base_url, "LLM_API_KEY": "test",
                         "LLM_MODEL": "test-model", "SCOPE_THRESHOLD": 0.0001, "ANSWERABILITY": "off",
                         "DEADLINE_SECONDS": 60.0,
                         "RETRIEVAL_SECONDS": 30.0, "GENERATION_SECONDS": 30.0}
    yield openai_server
    openai_server.reset()


@pytest.fixture(scope="module")
def injected_book(django_db_setup, django_db_blocker, tmp_path_factory) -> str:
    """A tiny book whose chapters carry injected instructions (the attacks' ``page`` fields), committed for this
    module and deleted after it. It is not calibrated (seconds of retrieval): the drills put every question
    in scope."""
    root = tmp_path_factory.mktemp("injected") / "book"
    root.mkdir()
    for attack in ATTACKS:
        if "page" in attack:
            (root / f"{attack['id']}.md").write_text(attack["page"], encoding="utf-8")
    book_indexed.disconnect(queue_calibration)
    try:
        with django_db_blocker.unblock():
            code, out, err = committed(lambda: run_command("ingest", str(root), "--book", INJECTED_BOOK, "--title",
                                                           INJECTED_TITLE, "--json"))
    finally:
        book_indexed.connect(queue_calibration)
    assert code == 0, out + err
    yield INJECTED_BOOK
    with django_db_blocker.unblock():
        committed(lambda: Book.objects.filter(slug=INJECTED_BOOK).delete())


def prompt_runs(text: str) -> set[tuple[str, ...]]:
    """Every run of ECHO_WINDOW words of ``text`` (case and punctuation ignored)."""
    found = [w.casefold() for w in re.findall(r"[^\W_]+", text)]
    return {tuple(found[i:i + ECHO_WINDOW]) for i in range(len(found) - ECHO_WINDOW + 1)}


def elements(html: str) -> list[tuple[str, dict]]:
    """Every element of an HTML document or fragment as (tag, attributes), as a browser's parser sees them."""
    found = []

    class Collector(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, {name: value or "" for name, value in attrs}))

    Collector().feed(html)
    return found


def assert_inert(html: str) -> None:
    """No element or attribute in ``html`` that runs code, loads something, or leads to an injected address."""
    for tag, attrs in elements(html):
        assert tag not in DANGEROUS_TAGS, f"<{tag}> in {html[:300]}"
        for name, value in attrs.items():
            assert not name.startswith("on") and name != "style", f"{name}= on <{tag}>"
            assert not value.strip().lower().startswith(("javascript:", "data:", "vbscript:")), f"{name}={value}"
            assert "evil" not in value, f"{name}={value} on <{tag}>"


def stream(client: Client, body: dict) -> tuple[list[str], dict]:
    """(the token texts, the final event) of one question asked on the API's stream."""
    response = client.post("/api/v1/ask/stream", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    tokens, final = [], None
    for block in b"".join(response.streaming_content).decode().split("\n\n"):
        if block.startswith("event: token\n"):
            tokens.append(json.loads(block.split("data: ", 1)[1])["text"])
        elif block.startswith("event: final\n"):
            final = json.loads(block.split("data: ", 1)[1])
        elif block.strip():
            raise AssertionError(f"unexpected event: {block[:300]}")
    assert final is not None
    return tokens, final


def sent_messages(server) -> tuple[str, str]:
    """(system prompt, user message) of the one chat request the model got."""
    (payload,) = [p for path, p in server.requests if path.rstrip("/").endswith("/chat/completions")]
    by_role = {m["role"]: m["content"] for m in payload["messages"]}
    return by_role["system"], by_role["user"]


def test_the_drills_cover_every_kind_of_attack():
    assert len(ATTACKS) >= 50
    assert len({a["id"] for a in ATTACKS}) == len(ATTACKS)
    kinds = Counter(a["kind"] for a in ATTACKS)
    assert set(kinds) == {"ignore_instructions", "fake_system", "roleplay", "reveal_prompt", "outside_book",
                          "markup", "delimiter", "selected_text", "chapter"}
    assert min(kinds.values()) >= 3
    assert {a["expect"] for a in ATTACKS} == {"withheld", "fallback", "grounded", "refused"}


@pytest.mark.parametrize("attack", ATTACKS, ids=[a["id"] for a in ATTACKS])
def test_prompt_injection_never_reaches_the_reader(attack, llm, request):
    book = request.getfixturevalue("injected_book") if "page" in attack else BOOK
    llm.reply_template = attack["obeyed"]
    client = Client()
    client.get(f"/?book={book}")  # the chat page's session: the stream, then the page's own rendering
    body = {"question": attack["question"], "book": book}
    if "selected_text" in attack:
        body["selected_text"] = attack["selected_text"]
    tokens, final = stream(client, body)

    # The model got the attack only as quoted data, under our own system prompt.
    system, user = sent_messages(llm)
    assert system == SYSTEM_PROMPT.format(title=Book.objects.get(slug=book).title)
    assert user.count("<question>") == user.count("</question>") == 1
    assert user.index("<question>") > user.index("Excerpts from the book")
    assert user.count("<passage>") == user.count("</passage>") == (1 if "selected_text" in attack else 0)
    for hidden in attack.get("absent_from_prompt", []):
        assert hidden not in user

    # The system prompt never reaches the reader: not streamed, not answered.
    leaked = prompt_runs(system)
    for shown in ("".join(tokens), final["answer"], final["answer_html"]):
        assert not prompt_runs(shown) & leaked, shown[:400]
    for canary in attack.get("canaries", []):
        assert canary not in final["answer"] and canary not in final["answer_html"]
    assert_inert(final["answer_html"])
    page = client.get(f"/answers/{final['answer_id']}")
    assert page.status_code == 200
    assert_inert(page.content.decode())

    grounding = final["grounding"]
    expect = attack["expect"]
    if expect == "withheld":
        assert final["answer"] == WITHHELD_MESSAGE and final["flagged_for_review"], final["answer"]
        assert grounding["passed"] is False
    elif expect == "fallback":
        assert final["generator"] == "extractive"
        assert "repeated its instructions" in final["notice"]
    elif expect == "grounded":
        assert final["generator"] == "test-model" and grounding["passed"], grounding
        assert not final["flagged_for_review"] and grounding["cited_sources"]
        for sentence in attack.get("unsupported", []):
            assert any(sentence in s for s in grounding["unsupported_sentences"]), grounding
    else:
        assert expect == "refused" and final["refused"] and final["sources"] == []
    if grounding and grounding["passed"]:
        assert grounding["invalid_citations"] == [] and grounding["foreign_links"] == []


PARTIAL = [a for a in ATTACKS if a.get("unsupported")]


@pytest.mark.parametrize("attack", PARTIAL, ids=[a["id"] for a in PARTIAL])
def test_strict_grounding_withholds_partial_obedience_too(attack, llm, settings):
    # By default a minority of unsupported sentences is tolerated (paraphrase); a deployment that wants none
    # sets BOOKCHAT_GROUNDING_MAX_UNSUPPORTED=0.
    settings.BOOKCHAT = {**settings.BOOKCHAT, "GROUNDING_MAX_UNSUPPORTED": 0.0}
    llm.reply_template = attack["obeyed"]
    response = answer_question(AskRequest(question=attack["question"], book=BOOK))
    assert response.answer == WITHHELD_MESSAGE and response.flagged_for_review


def test_the_page_and_widget_insert_only_the_servers_sanitised_html():
    # Streamed tokens may hold anything the model wrote: the scripts show them as text and replace them with
    # the final event's answer_html (sanitised by the server), the only HTML they insert besides their own icons
    # and, in the widget, a course staff's reply's answer_html (sanitised by the same renderer).
    for script in ("chat.js", "widget.js"):
        source = (REPO / "static" / "bookchat" / script).read_text()
        inserted = re.findall(r"innerHTML\s*=\s*(?![\w.]*innerHTML)([\w.]+)", source)  # a = b.innerHTML = X: X
        assert inserted and set(inserted) <= {"final.answer_html", "reply.answer_html", "CHAT_ICON", "THUMB_ICON"}, \
            (script, inserted)
        for other in ("outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment"):
            assert other not in source, (script, other)


# -- widget keys and CORS ---------------------------------------------------------------------------------------
@pytest.fixture
def keys(settings, manual_book):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "LLM_BASE_URL": "", "DEADLINE_SECONDS": 60.0,
                         "RETRIEVAL_SECONDS": 30.0}

    def make(kind=ApiKey.PUBLISHABLE, origins=SITE, book=None, active=True) -> str:
        key = ApiKey(name="drill", kind=kind, allowed_origins=origins, book=book, active=active)
        raw = key.issue()
        key.save()
        return raw

    return make


def call(client: Client, method: str, path: str, *, key: str | None = None, origin: str | None = None,
         bearer: str | None = None, body: dict | None = None, preflight: bool = False):
    headers = {"Origin": origin} if origin else {}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    if preflight:
        headers |= {"Access-Control-Request-Method": method, "Access-Control-Request-Headers": "content-type"}
        method = "OPTIONS"
    url = f"{path}?key={key}" if key else path
    if method == "POST":
        return client.post(url, data=json.dumps(body or {"question": "How do I ingest a folder?", "book": BOOK}),
                           content_type="application/json", headers=headers)
    return client.generic(method, url, headers=headers)


def assert_no_cors(response) -> None:
    assert "Access-Control-Allow-Origin" not in response
    assert "Access-Control-Allow-Methods" not in response
    assert "Access-Control-Allow-Credentials" not in response


def test_every_refused_widget_request_gets_its_4xx_and_no_cors_on_every_endpoint(client, keys):
    good, revoked = keys(), keys(active=False)
    secret, no_origins = keys(kind=ApiKey.SECRET, origins=""), keys(origins="")
    refusals = [  # (what, request options, status, error)
        ("wrong origin", {"key": good, "origin": "https://evil.example"}, 403, "origin_not_allowed"),
        ("look-alike origin", {"key": good, "origin": "https://docs.example.org.evil.example"}, 403,
         "origin_not_allowed"),
        ("missing origin", {"key": good}, 403, "origin_required"),
        ("secret key from a browser", {"bearer": secret, "origin": SITE}, 403, "secret_key_in_browser"),
        ("secret key in the URL", {"key": secret}, 403, "secret_key_in_url"),
        ("revoked key", {"key": revoked, "origin": SITE}, 403, "invalid_key"),
        ("unknown key", {"key": "pk_" + "A" * 43, "origin": SITE}, 403, "invalid_key"),
        ("key without origins", {"key": no_origins, "origin": SITE}, 403, "no_allowed_origins"),
        ("no key", {"origin": SITE}, 401, "key_required"),
    ]
    endpoints = [("POST", "/api/v1/ask"), ("POST", "/api/v1/ask/stream"), ("GET", "/api/v1/books"),
                 ("POST", f"/api/v1/answers/{uuid.uuid4()}/feedback"),
                 ("POST", f"/api/v1/answers/{uuid.uuid4()}/handoff"), ("GET", "/api/v1/handoff-form")]
    for what, options, status, error in refusals:
        for method, path in endpoints:
            for preflight in (False, True):
                if preflight and "origin" not in options:
                    continue  # browsers send a preflight only with an Origin
                response = call(client, method, path, preflight=preflight, **options)
                where = f"{what}: {'preflight of ' if preflight else ''}{method} {path}"
                assert response.status_code == status, f"{where}: {response.status_code}"
                assert response.json()["error"] == error, where
                assert_no_cors(response)


def test_an_allowed_origin_reads_its_errors_but_never_with_credentials_or_a_wildcard(client, keys):
    raw = keys()
    bad = call(client, "POST", "/api/v1/ask", key=raw, origin=SITE, body={"question": "   ", "book": BOOK})
    assert bad.status_code == 400 and bad.json()["error"] == "empty"
    assert bad["Access-Control-Allow-Origin"] == SITE, "the widget can show why"
    unknown = call(client, "POST", "/api/v1/ask", key=raw, origin=SITE, body={"question": "hi", "book": "nope"})
    assert unknown.status_code == 404 and unknown["Access-Control-Allow-Origin"] == SITE
    preflight = call(client, "POST", "/api/v1/ask/stream", key=raw, origin=SITE, preflight=True)
    assert preflight.status_code == 204 and preflight["Access-Control-Allow-Origin"] == SITE
    for response in (bad, unknown, preflight):
        assert "Access-Control-Allow-Credentials" not in response
        assert "Origin" in response["Vary"]


def test_revoking_a_key_takes_effect_on_the_next_request(client, keys):
    raw = keys()
    assert call(client, "GET", "/api/v1/books", key=raw, origin=SITE).status_code == 200
    ApiKey.objects.filter(name="drill").update(active=False)
    for preflight in (False, True):
        response = call(client, "GET", "/api/v1/books", key=raw, origin=SITE, preflight=preflight)
        assert response.status_code == 403 and response.json()["error"] == "invalid_key"
        assert_no_cors(response)


def test_a_key_for_another_book_is_refused_on_the_stream_and_on_feedback(client, keys):
    other = Book.objects.create(slug="other-drill-book", title="Other", embedder_dimension=384)
    limited = keys(book=other)
    streamed = call(client, "POST", "/api/v1/ask/stream", key=limited, origin=SITE)
    assert streamed.status_code == 403 and streamed.json()["error"] == "key_book"
    assert "Access-Control-Allow-Origin" in streamed, "refused by the view for an allowed origin: readable"
    answer = call(client, "POST", "/api/v1/ask", key=keys(), origin=SITE).json()
    vote = call(client, "POST", f"/api/v1/answers/{answer['answer_id']}/feedback", key=limited, origin=SITE,
                body={"rating": "down", "session_id": answer["session_id"]})
    assert vote.status_code == 403 and vote.json()["error"] == "key_book"
    assert not Feedback.objects.filter(answer_id=answer["answer_id"]).exists()


# -- the admin: reviewers, secrets ------------------------------------------------------------------------------
@pytest.fixture
def reviewer(manual_book) -> User:
    user = User.objects.create_user("drill-reviewer", password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name="Reviewers"))
    return user


def audit_row(**fields) -> AuditLog:
    return write(AuditRecord(answer_id=uuid.uuid4(), outcome=Outcome.ANSWERED, channel="widget", book_slug=BOOK,
                             question="How do I ingest?", answer="Run ingest [1].", confidence=0.9,
                             confidence_level="high", client_ip="203.0.113.77", **fields))


def test_reviewers_can_neither_upload_nor_delete(client, reviewer):
    client.force_login(reviewer)
    add = reverse("admin:ingestion_ingestionjob_add")
    assert client.get(add).status_code == 403
    assert client.post(add, {"new_book_slug": "drill", "folder": ""}).status_code == 403
    assert not IngestionJob.objects.filter(book_slug="drill").exists()
    job = IngestionJob.objects.create(book_slug="drill", status=IngestionJob.Status.FAILED)
    key = ApiKey.objects.create(name="k", kind=ApiKey.SECRET, hashed="0" * 64)
    vote = Feedback.objects.create(answer_id=uuid.uuid4(), conversation_id=uuid.uuid4(), rating="up", channel="api")
    book = Book.objects.get(slug=BOOK)
    targets = [audit_row(), job, key, vote, book, Document.objects.filter(book=book).first(),
               Chunk.objects.filter(book=book).first(), IndexRun.objects.filter(book=book).first()]
    for obj in targets:
        meta = obj._meta
        delete = reverse(f"admin:{meta.app_label}_{meta.model_name}_delete", args=[obj.pk])
        assert client.get(delete).status_code == 403, delete
        assert client.post(delete, {"post": "yes"}).status_code == 403, delete
        changelist = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        client.post(changelist, {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"})
        assert type(obj).objects.filter(pk=obj.pk).exists(), f"{meta.model_name} was deleted"
    assert client.get(reverse("admin:chat_apikey_add")).status_code == 403


def test_nothing_in_the_admin_shows_the_secret_key_and_audit_rows_hold_only_the_ip_hash(admin_client, reviewer,
                                                                                      settings):
    row = audit_row()
    assert row.client_ip_hash == hash_ip("203.0.113.77") and len(row.client_ip_hash) == 64
    stored = json.dumps({f.name: str(getattr(row, f.name)) for f in row._meta.fields})
    assert "203.0.113.77" not in stored, "the IP itself is never stored"
    with override_settings(SECRET_KEY="another-" + "k" * 50):
        assert hash_ip("203.0.113.77") != row.client_ip_hash, "the hash is keyed by SECRET_KEY"

    pages = [reverse("admin:index"), reverse("admin:audit_dashboard"), reverse("admin:audit_gaps")]
    for model in admin.site._registry:
        meta = model._meta
        pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            pages.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[first.pk]))
    secret = settings.SECRET_KEY
    for url in pages:
        response = admin_client.get(url)
        assert response.status_code in (200, 302), url  # 302: a queue item that is not in the queue
        assert secret not in response.content.decode(), url

    client = Client()
    client.force_login(reviewer)
    page = client.get(reverse("admin:audit_auditlog_change", args=[row.pk])).content.decode()
    assert row.client_ip_hash in page and "203.0.113.77" not in page and secret not in page
    since_2000 = "created_at__gte=2000-01-01+00%3A00%3A00%2B00%3A00"
    found = client.get(reverse("admin:audit_auditlog_changelist") + f"?q=203.0.113.77&{since_2000}")
    assert "How do I ingest?" not in found.content.decode(), "the IP can't be searched for either"


# -- CSRF -------------------------------------------------------------------------------------------------------
def test_every_form_refuses_a_post_without_its_csrf_token(reviewer, settings, manual_book):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "LLM_BASE_URL": ""}
    superuser = User.objects.create_superuser("drill-admin", password="pw-admin")
    row = audit_row()
    voted = uuid.uuid4()
    forms = [  # (who is signed in, path, fields)
        (None, reverse("admin:login"), {"username": "drill-admin", "password": "pw-admin"}),
        (None, reverse("chat"), {"question": "How do I ingest a folder?", "book": BOOK}),
        (None, reverse("chat-new"), {"book": BOOK}),
        (None, reverse("chat-feedback", args=[voted]), {"rating": "down"}),
        (None, reverse("chat-handoff", args=[voted]), {"note": "please"}),
        (superuser, reverse("admin:ingestion_ingestionjob_add"), {"new_book_slug": "drill", "folder": ""}),
        (reviewer, reverse("admin:audit_auditlog_change", args=[row.pk]), {"review_status": "wrong"}),
        (reviewer, reverse("admin:audit_auditlog_changelist"), {"action": "mark_wrong", "_selected_action": [row.pk]}),
        (superuser, reverse("admin:chat_apikey_add"), {"name": "csrf", "kind": "secret", "active": "on"}),
        (superuser, reverse("admin:logout"), {}),
    ]
    for user, path, fields in forms:
        strict = Client(enforce_csrf_checks=True)
        if user is not None:
            strict.force_login(user)
        assert strict.get(path).status_code in (200, 302, 405), path  # the form exists and sets the cookie
        response = strict.post(path, fields)
        assert response.status_code == 403, f"{path}: {response.status_code}"
        assert b"CSRF" in response.content, path
    row.refresh_from_db()
    assert row.review_status != "wrong"
    # Only this test's rows: other tests' jobs and votes may be stored already.
    assert not IngestionJob.objects.filter(book_slug="drill").exists()
    assert not ApiKey.objects.filter(name="csrf").exists() and not Feedback.objects.filter(answer_id=voted).exists()
    assert not Handoff.objects.filter(answer_id=voted).exists()

    strict = Client(enforce_csrf_checks=True)
    strict.get(reverse("admin:login"))
    signed_in = strict.post(reverse("admin:login"), {"username": "drill-admin", "password": "pw-admin",
                                                     "csrfmiddlewaretoken": strict.cookies["csrftoken"].value})
    assert signed_in.status_code == 302, "the same login with its token works: the 403s were the missing token"


def test_the_api_refuses_a_session_cookie_without_csrf_token(reviewer, settings, manual_book):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "LLM_BASE_URL": ""}
    question = json.dumps({"question": "How do I ingest a folder?", "book": BOOK})
    signed_in = Client(enforce_csrf_checks=True)
    signed_in.force_login(User.objects.create_superuser("drill-root", password="x"))
    response = signed_in.post("/api/v1/ask", data=question, content_type="application/json")
    assert response.status_code == 401 and response.json()["error"] == "key_required", \
        "a signed-in admin's session is no API credential"

    page = Client(enforce_csrf_checks=True)
    page.get(f"/?book={BOOK}")
    token = page.cookies["csrftoken"].value
    for path, body in (("/api/v1/ask", question),
                       (f"/api/v1/answers/{uuid.uuid4()}/feedback", json.dumps({"rating": "down"}))):
        refused = page.post(path, data=body, content_type="application/json")
        assert refused.status_code == 403 and refused.json()["error"] == "csrf_failed", path
        forged = page.post(path, data=body, content_type="application/json", headers={"X-CSRFToken": "x" * 64})
        assert forged.status_code == 403, path
    with_token = page.post(f"/api/v1/answers/{uuid.uuid4()}/feedback", data=json.dumps({"rating": "down"}),
                           content_type="application/json", headers={"X-CSRFToken": token})
    assert with_token.status_code == 404, "with its token the same call gets past the check (to an unknown answer)"


# -- HTTPS, the deployment check, security headers --------------------------------------------------------------
def production(**overrides) -> dict:
    """The BOOKCHAT namespace of the production settings the manual's "Deploying and running" documents."""
    return {s.name: s.default for s in SETTINGS} | {"DEBUG": False, "HTTPS": True} | overrides


def test_https_settings_are_off_for_make_run_and_on_in_production():
    local = https_settings(production(HTTPS=False))
    assert not local["SECURE_SSL_REDIRECT"] and not local["SESSION_COOKIE_SECURE"]
    assert not local["CSRF_COOKIE_SECURE"] and local["SECURE_HSTS_SECONDS"] == 0
    assert local["SECURE_PROXY_SSL_HEADER"] is None
    served = https_settings(production())
    assert served["SECURE_SSL_REDIRECT"] and served["SESSION_COOKIE_SECURE"] and served["CSRF_COOKIE_SECURE"]
    assert served["SECURE_HSTS_SECONDS"] == 31_536_000 and served["SECURE_HSTS_INCLUDE_SUBDOMAINS"]
    assert not served["SECURE_HSTS_PRELOAD"] and served["SILENCED_SYSTEM_CHECKS"] == ["security.W021"]
    assert served["SECURE_PROXY_SSL_HEADER"] is None, "a forwarded header is trusted only when configured"
    proxied = https_settings(production(PROXY_SSL_HEADER="X-Forwarded-Proto", HSTS_PRELOAD=True))
    assert proxied["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert proxied["SECURE_HSTS_PRELOAD"] and proxied["SILENCED_SYSTEM_CHECKS"] == []


def test_over_https_plain_http_is_redirected_cookies_are_secure_and_hsts_is_sent(manual_book):
    with override_settings(DEBUG=False, **https_settings(production(PROXY_SSL_HEADER="X-Forwarded-Proto"))):
        client = Client()  # its middleware reads the settings now
        redirected = client.get(f"/?book={BOOK}")
        assert redirected.status_code == 301 and redirected["Location"] == f"https://testserver/?book={BOOK}"
        assert client.get("/api/v1/health").status_code == 200, "load balancers probe health over plain HTTP"
        for secure in ({"secure": True}, {"headers": {"X-Forwarded-Proto": "https"}}):
            page = Client().get(f"/?book={BOOK}", **secure)
            assert page.status_code == 200
            assert page["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
            assert page.cookies["csrftoken"]["secure"] and page.cookies["sessionid"]["secure"]
        spoofed = client.get(f"/?book={BOOK}", headers={"X-Forwarded-Proto": "http"})
        assert spoofed.status_code == 301
    with override_settings(DEBUG=False, **https_settings(production())):
        untrusted = Client().get(f"/?book={BOOK}", headers={"X-Forwarded-Proto": "https"})
        assert untrusted.status_code == 301, "without PROXY_SSL_HEADER the header is not believed"


def test_probes_by_ip_address_are_answered_and_nothing_else_is(manual_book):
    """A balancer probes a node as ``Host: 10.0.0.5:8000``, an address nobody puts in ALLOWED_HOSTS."""
    with override_settings(DEBUG=False, ALLOWED_HOSTS=["chat.example.org"]):
        client = Client()
        for path in ("/api/v1/health", "/api/v1/ready"):
            probed = client.get(path, headers={"Host": "10.0.0.5:8000"})
            assert probed.status_code == 200 and probed.json()["status"] in ("ok", "ready"), path
            assert probed["X-Content-Type-Options"] == "nosniff" and probed["Content-Security-Policy"]
            assert client.head(path, headers={"Host": "10.0.0.5"}).status_code == 200
            assert client.post(path, headers={"Host": "10.0.0.5"}).status_code == 400, "only the probes' methods"
        for path in (f"/?book={BOOK}", "/api/v1/books", "/api/v1/health/", "/admin/"):
            assert client.get(path, headers={"Host": "10.0.0.5"}).status_code == 400, path
        assert client.get("/api/v1/health", headers={"Host": "chat.example.org"}).status_code == 200


def test_a_request_for_a_host_not_allowed_is_logged_in_one_line(manual_book, caplog):
    """Scanners probe public servers by address: each such request is one line naming the host, not a traceback."""
    with override_settings(DEBUG=False, ALLOWED_HOSTS=["chat.example.org"]):
        assert Client().get("/api/v1/books", headers={"Host": "scanner.example"}).status_code == 400
    [record] = [r for r in caplog.records if r.name == "django.security.DisallowedHost"]
    assert "Invalid HTTP_HOST header: 'scanner.example'" in record.getMessage()
    assert record.exc_info is None and "Traceback" not in caplog.text


@pytest.mark.slow
def test_deployment_check_passes_with_the_documented_production_settings(settings):
    db = settings.DATABASES["default"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOKCHAT_")} | {
        "DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        "BOOKCHAT_DEBUG": "false", "BOOKCHAT_SECRET_KEY": "x7Q" + uuid.uuid4().hex + uuid.uuid4().hex,
        "BOOKCHAT_ALLOWED_HOSTS": "example.org", "BOOKCHAT_HTTPS": "true",
    }
    check = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=REPO,
                           env=env, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "no issues" in check.stdout and "1 silenced" in check.stdout


def test_deployment_check_fails_over_plain_http():
    with override_settings(DEBUG=False, ALLOWED_HOSTS=["example.org"], **https_settings(production(HTTPS=False))), \
            pytest.raises(SystemCheckError) as failed:
        call_command("check", "--deploy", "--fail-level", "WARNING")
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in str(failed.value)


def test_security_headers_on_pages_the_api_static_files_and_the_admin(client, manual_book):
    responses = {
        "chat page": client.get(f"/?book={BOOK}"),
        "404 page": client.get("/no-such-page"),
        "API": client.get("/api/v1/health"),
        "widget script": client.get("/static/bookchat/widget.js"),
        "admin login": client.get(reverse("admin:login")),
        "API docs": client.get("/api/v1/docs"),
    }
    for what, response in responses.items():
        assert response["X-Content-Type-Options"] == "nosniff", what
        assert response["Referrer-Policy"] == "same-origin", what
        expected = INLINE_STYLES_POLICY if what in ("admin login", "API docs") else CONTENT_SECURITY_POLICY
        assert response["Content-Security-Policy"] == expected, what
    assert responses["chat page"]["X-Frame-Options"] == "DENY"
    for policy in (CONTENT_SECURITY_POLICY, INLINE_STYLES_POLICY):
        assert "script-src 'self';" in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    # The widget script is loaded by other sites' pages: nothing may stop a cross-origin <script src>.
    assert "Cross-Origin-Resource-Policy" not in responses["widget script"]
    # The API docs run no inline script: Swagger UI's start-up script is a file of its own.
    docs = responses["API docs"].content.decode()
    scripts = [attrs for tag, attrs in elements(docs) if tag == "script"]
    assert scripts and all(attrs.get("src") for attrs in scripts)
    start_up = client.get(scripts[-1]["src"])
    assert start_up.status_code == 200 and "javascript" in start_up["Content-Type"]
