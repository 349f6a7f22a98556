"""API keys and origins (publishable vs secret, CORS only for allowed origins), anonymous access, and the
feedback endpoint, on the real database and the bundled manual."""

from __future__ import annotations

import json
import uuid

import pytest

from chat.models import ApiKey, Feedback, hash_key, normalise_origin
from ingestion.models import Book

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
SITE = "https://docs.example.org"
QUESTION = {"question": "How do I ingest a folder?", "book": BOOK}


@pytest.fixture(autouse=True)
def key_settings(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false", "LLM_BASE_URL": "", "LLM_API_KEY": "",
                         "LLM_MODEL": "", "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0}


def make_key(kind=ApiKey.PUBLISHABLE, origins: str = SITE, book: Book | None = None, active=True) -> str:
    key = ApiKey(name="test", kind=kind, allowed_origins=origins, book=book, active=active)
    raw = key.issue()
    key.save()
    return raw


def post(client, path="/api/v1/ask", body=QUESTION, key: str | None = None, origin: str | None = None,
         header_key: str | None = None):
    headers = {}
    if origin:
        headers["Origin"] = origin
    if header_key:
        headers["Authorization"] = f"Bearer {header_key}"
    url = f"{path}?key={key}" if key else path
    return client.post(url, data=json.dumps(body), content_type="application/json", headers=headers)


def assert_refused(response, status: int, error: str) -> None:
    assert response.status_code == status, response.content
    assert response.json()["error"] == error
    assert response.json()["message"]
    assert "Access-Control-Allow-Origin" not in response, "no CORS headers for a refused request"


# -- publishable keys ------------------------------------------------------------------------------------------
def test_publishable_key_answers_its_allowed_origin_with_cors_headers(client):
    raw = make_key(origins=f"{SITE}\nhttp://localhost:3000")
    response = post(client, key=raw, origin=SITE)
    assert response.status_code == 200, response.content
    assert response["Access-Control-Allow-Origin"] == SITE
    assert "Origin" in response["Vary"]
    assert "Retry-After" in response["Access-Control-Expose-Headers"]
    assert response.json()["sources"]
    assert post(client, key=raw, origin="http://localhost:3000")["Access-Control-Allow-Origin"] == \
        "http://localhost:3000"


def test_preflight_is_answered_only_for_an_allowed_origin_of_the_key(client):
    raw = make_key()
    preflight = {"Origin": SITE, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"}
    allowed = client.options(f"/api/v1/ask/stream?key={raw}", headers=preflight)
    assert allowed.status_code == 204
    assert allowed["Access-Control-Allow-Origin"] == SITE
    assert "POST" in allowed["Access-Control-Allow-Methods"]
    assert "Content-Type" in allowed["Access-Control-Allow-Headers"]

    other = client.options(f"/api/v1/ask/stream?key={raw}", headers={**preflight, "Origin": "https://evil.example"})
    assert_refused(other, 403, "origin_not_allowed")
    assert_refused(client.options("/api/v1/ask/stream", headers=preflight), 401, "key_required")


@pytest.mark.parametrize("origin", ["https://evil.example", "http://docs.example.org", "https://docs.example.org:8443",
                                   "https://sub.docs.example.org", "null", "https://docs.example.org.evil.example"])
def test_publishable_key_refuses_other_origins(client, origin):
    assert_refused(post(client, key=make_key(), origin=origin), 403, "origin_not_allowed")


def test_publishable_key_refuses_a_request_without_origin(client):
    assert_refused(post(client, key=make_key()), 403, "origin_required")
    assert_refused(post(client, header_key=make_key()), 403, "origin_required")


def test_publishable_key_with_an_empty_allow_list_is_refused(client):
    raw = make_key(origins="")
    assert_refused(post(client, key=raw, origin=SITE), 403, "no_allowed_origins")


def test_revoked_unknown_and_malformed_keys_are_refused(client):
    revoked = make_key(active=False)
    assert_refused(post(client, key=revoked, origin=SITE), 403, "invalid_key")
    for bogus in ("pk_" + "x" * 43, "pk_" + "x" * 5000, "pk_ünïcødé", "' OR 1=1 --", "sk_"):
        assert_refused(post(client, header_key=bogus), 403, "invalid_key")


def test_key_for_one_book_answers_only_that_book(client):
    raw = make_key(book=Book.objects.get(slug=BOOK))
    response = post(client, key=raw, origin=SITE, body={"question": "How do I ingest a folder?"})
    assert response.status_code == 200 and response.json()["book"] == BOOK, "the key's book is the default"
    other = Book.objects.exclude(slug=BOOK).first() \
        or Book.objects.create(slug="other-book", title="Other", embedder_dimension=384)
    refused = post(client, key=raw, origin=SITE, body={"question": "How do I ingest a folder?", "book": other.slug})
    assert refused.status_code == 403 and refused.json()["error"] == "key_book"


# -- secret keys and anonymous access --------------------------------------------------------------------------
def test_secret_key_works_from_a_server_and_never_from_a_browser(client):
    raw = make_key(kind=ApiKey.SECRET, origins="")
    served = post(client, header_key=raw)
    assert served.status_code == 200
    assert "Access-Control-Allow-Origin" not in served
    assert client.post("/api/v1/ask", data=json.dumps(QUESTION), content_type="application/json",
                       headers={"X-Bookchat-Key": raw}).status_code == 200
    assert_refused(post(client, header_key=raw, origin=SITE), 403, "secret_key_in_browser")
    assert_refused(post(client, key=raw), 403, "secret_key_in_url")


def test_without_a_key_the_api_answers_401_unless_anonymous_access_is_on(client, settings):
    response = post(client)
    assert_refused(response, 401, "key_required")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/api/v1/health").status_code == 200, "health, schema and docs stay public"
    assert client.get("/api/v1/schema").status_code == 200

    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "auto", "DEBUG": False}
    settings.DEBUG = False
    assert post(client).status_code == 401, "auto: off outside DEBUG"
    settings.DEBUG = True
    assert post(client).status_code == 200, "auto: on under DEBUG"


def test_anonymous_requests_get_no_cors_headers(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "true"}
    response = post(client, origin="https://evil.example")
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response, "a foreign page can't read an anonymous answer"


def test_unknown_api_paths_answer_json_404(client):
    raw = make_key(kind=ApiKey.SECRET, origins="")
    response = client.get("/api/v1/nope", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 404 and response.json()["error"] == "not_found"


# -- the key model and admin -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("raw", "normal"), [
    ("https://Docs.Example.org/", "https://docs.example.org"), ("https://docs.example.org:443", "https://docs.example.org"),
    ("http://localhost:3000", "http://localhost:3000"), ("http://127.0.0.1:80", "http://127.0.0.1"),
])
def test_origins_are_normalised(raw, normal):
    assert normalise_origin(raw) == normal


@pytest.mark.parametrize("bad", ["docs.example.org", "https://docs.example.org/docs", "https://*.example.org", "*",
                                 "ftp://docs.example.org", "https://user:pw@docs.example.org", "https://x.org:99999",
                                 "javascript:alert(1)", ""])
def test_malformed_origins_are_refused(bad):
    with pytest.raises(ValueError):
        normalise_origin(bad)


def test_admin_creates_a_key_shows_it_once_and_stores_only_its_hash(admin_client):
    response = admin_client.post("/admin/chat/apikey/add/", {
        "name": "docs site", "kind": "publishable", "allowed_origins": "https://docs.example.org/\nhttp://localhost:3000",
        "active": "on"}, follow=True)
    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    raw = next(word for m in shown for word in m.split() if word.startswith("pk_"))
    key = ApiKey.objects.get(name="docs site")
    assert key.hashed == hash_key(raw) and raw not in (key.prefix, key.hashed, key.allowed_origins)
    assert key.allowed_origins == "https://docs.example.org\nhttp://localhost:3000", "origins are normalised"
    page = admin_client.get(f"/admin/chat/apikey/{key.pk}/change/").content.decode()
    assert raw not in page, "the key is never shown again"


@pytest.mark.parametrize(("kind", "origins", "message"), [
    ("publishable", "", "at least one allowed origin"),
    ("publishable", "https://docs.example.org/path", "not an origin"),
    ("secret", "https://docs.example.org", "take no origins"),
])
def test_admin_refuses_bad_keys_with_a_clear_message(admin_client, kind, origins, message):
    response = admin_client.post("/admin/chat/apikey/add/", {"name": "k", "kind": kind, "allowed_origins": origins,
                                                              "active": "on"})
    assert response.status_code == 200 and message in response.content.decode()
    assert not ApiKey.objects.filter(name="k").exists()


# -- feedback --------------------------------------------------------------------------------------------------
@pytest.fixture
def answered(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "true"}
    return post(client).json()


def feedback(client, answer_id, body, **kwargs):
    return post(client, path=f"/api/v1/answers/{answer_id}/feedback", body=body, **kwargs)


def test_feedback_is_stored_once_per_answer_and_a_new_vote_replaces_it(client, answered):
    first = feedback(client, answered["answer_id"], {"rating": "up", "session_id": answered["session_id"]})
    assert first.status_code == 201 and first.json()["rating"] == "up"
    second = feedback(client, answered["answer_id"], {"rating": "down", "comment": "Missing the --prune option",
                                                      "session_id": answered["session_id"]})
    assert second.status_code == 200
    stored = Feedback.objects.get(answer_id=answered["answer_id"])
    assert (stored.rating, stored.comment, str(stored.conversation_id)) == \
        ("down", "Missing the --prune option", answered["session_id"])
    assert Feedback.objects.filter(answer_id=answered["answer_id"]).count() == 1


def test_feedback_only_from_the_session_that_got_the_answer(client, answered):
    other = feedback(client, answered["answer_id"], {"rating": "up", "session_id": str(uuid.uuid4())})
    assert other.status_code == 403 and other.json()["error"] == "not_your_answer"
    missing = feedback(client, answered["answer_id"], {"rating": "up"})
    assert missing.status_code == 403
    unknown = feedback(client, uuid.uuid4(), {"rating": "up", "session_id": answered["session_id"]})
    assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_answer"
    assert not Feedback.objects.exists()


@pytest.mark.parametrize(("body", "error", "field"), [
    ({"rating": "meh"}, "invalid_rating", "rating"),
    ({"rating": 1}, "invalid_rating", "rating"),
    ({}, "invalid_rating", "rating"),
    ({"rating": "up", "stars": 5}, "unknown_field", "stars"),
    ({"rating": "up", "comment": "x" * 2001}, "too_long", "comment"),
    ({"rating": "up", "comment": ["list"]}, "invalid_type", "comment"),
    ({"rating": "up", "comment": "nul \x00"}, "invalid_characters", "comment"),
    ({"rating": "up", "session_id": "not-a-uuid"}, "invalid_session", "session_id"),
    (["rating", "up"], "invalid_body", None),
])
def test_feedback_rejects_bad_input_with_a_clear_error(client, answered, body, error, field):
    response = feedback(client, answered["answer_id"], body)
    assert response.status_code == 400, response.content
    assert (response.json()["error"], response.json()["field"]) == (error, field)
    assert not Feedback.objects.exists()


def test_feedback_rejects_wrong_content_type_and_a_malformed_answer_id(client, answered):
    wrong_type = client.post(f"/api/v1/answers/{answered['answer_id']}/feedback", data="rating=up",
                             content_type="application/x-www-form-urlencoded")
    assert wrong_type.status_code == 415
    assert client.post("/api/v1/answers/'; DROP TABLE chat_feedback;--/feedback").status_code == 404
    comment_html = feedback(client, answered["answer_id"], {"rating": "down", "comment": "<script>x()</script>bad",
                                                            "session_id": answered["session_id"]})
    assert comment_html.json()["comment"] == "bad", "markup is stripped from comments"


def test_feedback_with_a_publishable_key_from_its_origin(client, settings):
    raw = make_key()
    answer = post(client, key=raw, origin=SITE).json()
    response = feedback(client, answer["answer_id"], {"rating": "up", "session_id": answer["session_id"]}, key=raw,
                        origin=SITE)
    assert response.status_code == 201 and response["Access-Control-Allow-Origin"] == SITE
    assert Feedback.objects.get(answer_id=answer["answer_id"]).channel == "widget"
