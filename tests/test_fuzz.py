"""Bad input at scale: property-based drills (hypothesis) that throw generated input at every boundary.

Each drill states what must hold for *every* input, not for a list of known cases: a clear 4xx
(JSON from the API, HTML from the page and the admin) or a valid answer, never a 5xx, never a
traceback or SQL text in a body, and no row lost or half written (counts are compared before
and after each example, since hypothesis runs all examples of a test in one database transaction).

Cases per run (the sum of ``max_examples``), 2,020 in total:

=========================================  =====
drill                                      cases
=========================================  =====
API ask/stream: one bad field in any body    500
API ask/stream: weird but valid questions     40
API: raw bodies, content types, methods      470
feedback endpoint                            300
chat page form and its other routes          150
the page's own JSON API (session + CSRF)     100
admin upload: files and zips                 200
admin upload: truncated multipart bodies      80
``ingest``: bad files beside good ones        60
``evaluate``: malformed question files       120
=========================================  =====

``BOOKCHAT_FUZZ_SCALE`` multiplies every count (``BOOKCHAT_FUZZ_SCALE=10`` for a long local
drill). The drills are marked ``fuzz``: ``make drills`` runs them, whole, and ``make test`` leaves them out, so
that it keeps to its ten minutes (CI runs both).
Examples are random on each run and nothing is written to ``.hypothesis/``
(``database=None``); a failure prints the falsifying example and a ``@reproduce_failure`` line.
Inputs that reach the embedder (valid questions, ~20 ms each plus retrieval) are a minority by
construction: most drills plant a defect in every input and assert that it is refused. The drills
are marked ``slow``; the bugs they found are pinned by plain tests at the end of this file.
"""

from __future__ import annotations

import io
import json
import os
import re
import uuid
import warnings
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.models import AuditLog
from audit.recording import write_failures
from chat.models import Conversation, Feedback, Turn
from ingestion.models import Book, Chunk, Document, IndexRun, IngestionJob
from tests.conftest import EMBEDDED_CORPORA, MANUAL, run_command

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"
ASK, STREAM = "/api/v1/ask", "/api/v1/ask/stream"
UPLOAD = "/admin/ingestion/ingestionjob/add/"
SCALE = float(os.environ.get("BOOKCHAT_FUZZ_SCALE", "1"))
# Text that only a crash puts in a response: tracebacks, driver and ORM names, SQL.
LEAKS = ("Traceback", "psycopg", "SELECT ", "INSERT INTO", "django.db", "DataError", "IntegrityError",
         "Exception Value", 'File "/', "internal_error", "Server Error (500)")
VALID_QUESTIONS = ("How do I ingest a folder?", "What does --prune do?", "Which setting changes the port?",
                   "How are answers audited?", "¿Cómo indexo una carpeta?", "Wie lade ich Kapitel hoch?")
# Strings that look like attacks or trip naive code: SQL, markup, templates, paths, odd Unicode.
NASTY = ("'; DROP TABLE ingestion_chunk; --", "1' OR '1'='1", "\" OR 1=1 --", "SELECT * FROM audit_auditlog",
         "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "&lt;script&gt;", "{{7*7}}", "${jndi:x}",
         "%s%s%n", "../../etc/passwd", "..\\..\\windows", "\u202eevil\u202c", "\u200b\u200c\u200d\ufeff",
         "مرحبا كيف أفهرس مجلدا", "שלום", "🙂" * 50, "\x00", "a\x00b", "\ud800", "x\udfffy", "\r\n\r\n",
         "\x1b[31m", " " * 100, "\u0000\u0001\u0002", "null", "[]", "{}")


NOT_TEXT = re.compile("[\x00\ud800-\udfff]")  # what no valid question holds


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


def drill(n: int):
    """Hypothesis settings of one drill: ``n`` examples (scaled), no deadline (the machine is shared), no
    example database, and the health checks that a test with fixtures and big inputs trips by design."""
    return settings(max_examples=examples(n), deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.large_base_example,
                                           HealthCheck.filter_too_much])


# -- generated values ------------------------------------------------------------------------------------
# Any character, lone surrogates included (json.dumps escapes them as "\ud800"), RTL marks, zero-width ones.
any_char = st.characters(codec=None, categories=None)
any_text = st.text(any_char, max_size=60)
nasty_text = st.one_of(st.sampled_from(NASTY), any_text, st.builds("".join, st.lists(st.sampled_from(NASTY),
                                                                                      max_size=4)))
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), nasty_text)
json_value = st.recursive(json_scalar, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(any_text, inner, max_size=3), max_leaves=8)


def dumps(value: object) -> bytes:
    return json.dumps(value).encode()  # ensure_ascii: lone surrogates travel as \udxxx escapes


def wrong_type(*allowed: type):
    """A JSON value of any type but ``allowed`` (and not null, which stands for a missing optional field)."""
    return json_value.filter(lambda v: v is not None and (not isinstance(v, allowed)
                                                          or (isinstance(v, bool) and int in allowed)))


def with_defect(text: st.SearchStrategy, defect: st.SearchStrategy) -> st.SearchStrategy:
    """Text with ``defect`` spliced in at a generated position."""
    return st.tuples(text, defect, st.integers(0, 60)).map(lambda t: t[0][:t[2]] + t[1] + t[0][t[2]:])


# An ask body with one planted defect that must make it a 4xx, whatever the other fields hold.
ASK_FIELDS = ("question", "selected_text", "session_id", "book", "chapter", "max_results")
DEFECTS = {
    "question": st.one_of(wrong_type(str), st.sampled_from(["", "   ", "<b></b>", "<script>x</script>"]),
                          with_defect(any_text, st.sampled_from(["\x00", "\ud800", "\udc00"])),
                          st.integers(1001, 3000).map(lambda n: "q" * n),
                          st.integers(501, 700).map(lambda n: "w " * n)),
    "selected_text": st.one_of(wrong_type(str), with_defect(any_text, st.sampled_from(["\x00", "\udbff"])),
                               st.integers(2001, 4000).map(lambda n: "s" * n)),
    "session_id": st.one_of(wrong_type(str), any_text.filter(lambda s: s.strip() and not _is_uuid(s))),
    "book": st.one_of(wrong_type(str), nasty_text.filter(lambda s: s.strip() and s.strip() != BOOK)),
    "chapter": st.one_of(wrong_type(str), nasty_text.map(lambda s: "\u2603" + s)),  # no chapter starts so
    "max_results": st.one_of(wrong_type(int), st.integers(max_value=0), st.integers(min_value=11),
                             st.booleans()),
}


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


@st.composite
def bad_ask_bodies(draw) -> tuple[str, object]:
    """(what is wrong, a body that holds it)."""
    kind = draw(st.sampled_from(["missing_question", "unknown_key", "not_an_object", *DEFECTS]))
    body = {}
    if kind != "missing_question":
        body["question"] = draw(st.sampled_from(VALID_QUESTIONS) | nasty_text)
    for name in draw(st.lists(st.sampled_from(ASK_FIELDS[1:]), unique=True, max_size=3)):
        body[name] = draw(json_value)
    if kind in DEFECTS:
        body[kind] = draw(DEFECTS[kind])
    elif kind == "unknown_key":
        body[draw(any_text.filter(lambda k: k not in ASK_FIELDS))] = draw(json_value)
    elif kind == "not_an_object":
        return kind, draw(st.one_of(json_scalar, st.lists(json_value, max_size=3)))
    return kind, body


# -- checks shared by every drill ------------------------------------------------------------------------
def body_of(response) -> str:
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    return raw.decode("utf-8", "replace")


def assert_no_leak(text: str, sent: str = "") -> None:
    """No crash text in ``text``, unless the input itself held it (a form echoes what was typed)."""
    for needle in LEAKS:
        assert needle not in text or needle in sent, f"{needle!r} in the response"


def assert_json_error(response, text: str) -> dict:
    assert 400 <= response.status_code < 500, (response.status_code, text[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = json.loads(text)
    assert set(body) == {"error", "message", "field"} and body["error"] and body["message"], body
    return body


class Rows:
    """Counts of the rows a request may add; ``added()`` says how many each table gained since."""

    MODELS = {"audit": AuditLog, "turns": Turn, "conversations": Conversation, "feedback": Feedback,
              "books": Book, "documents": Document, "chunks": Chunk, "jobs": IngestionJob, "runs": IndexRun}

    def __init__(self):
        self.before = self.now()
        self.failures = write_failures()

    # The manual and the corpora are ingested beside the tests (``tests.conftest.BackgroundBooks``): their rows
    # are nobody's request's, and may be added while a test runs.
    BACKGROUND = {"books": "slug", "documents": "book__slug", "chunks": "book__slug", "runs": "book__slug"}

    def now(self) -> dict:
        return {name: model.objects.exclude(**({f"{self.BACKGROUND[name]}__in": (MANUAL, *EMBEDDED_CORPORA)}
                                               if name in self.BACKGROUND else {})).count()
                for name, model in self.MODELS.items()}

    def added(self) -> dict:
        assert write_failures() == self.failures, "an audit write failed"
        now = self.now()
        return {name: now[name] - self.before[name] for name in now if now[name] != self.before[name]}


def assert_answered_and_audited(text: str, rows: Rows, *, channel: str) -> dict:
    """A 200 answer: the response shape, one turn, and one complete audit row for it."""
    body = json.loads(text)
    assert body["answer"].strip() and body["answer_id"] and body["session_id"]
    assert set(rows.added()) <= {"audit", "turns", "conversations"}
    assert rows.added()["audit"] == 1 and rows.added()["turns"] == 1
    row = AuditLog.objects.get(answer_id=body["answer_id"])
    assert row.channel == channel and row.book_slug == BOOK and row.question.strip() and row.answer.strip()
    assert row.status in {"answered", "not_covered", "unsure", "withheld"} and row.latency_ms >= 0
    return body


def sse_final(text: str) -> dict:
    events = [block for block in text.split("\n\n") if block.strip()]
    kinds = [block.split("\n", 1)[0] for block in events]
    assert kinds[-1] == "event: final", kinds
    return json.loads(events[-1].split("data: ", 1)[1])


@pytest.fixture
def roomy(manual_book, no_llm):
    """The manual is indexed, no LLM, and a time budget a loaded machine can't turn into 504s."""


# -- the REST API ----------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.fuzz
def test_ask_bodies_with_one_bad_field_are_refused_with_a_4xx_and_record_nothing(roomy, client):
    @drill(500)
    @given(case=bad_ask_bodies(), path=st.sampled_from([ASK, STREAM]))
    def check(case, path):
        _, body = case
        raw = dumps(body)
        rows = Rows()
        response = client.post(path, data=raw, content_type="application/json")
        text = body_of(response)
        assert not response.streaming, "refused before any byte is streamed"
        assert_json_error(response, text)
        assert_no_leak(text, raw.decode())
        assert rows.added() == {}

    check()


@pytest.mark.slow
@pytest.mark.fuzz
def test_weird_but_valid_questions_get_an_answer_and_one_complete_audit_row(roomy, client):
    question = st.one_of(st.sampled_from(VALID_QUESTIONS), with_defect(st.sampled_from(VALID_QUESTIONS), nasty_text),
                         st.text(any_char, min_size=1, max_size=80)).map(lambda s: NOT_TEXT.sub("", s))

    @drill(40)
    @given(question=question, path=st.sampled_from([ASK, STREAM]), max_results=st.none() | st.integers(1, 10))
    def check(question, path, max_results):
        body = {"question": question, "book": BOOK} | ({"max_results": max_results} if max_results else {})
        raw = dumps(body)
        rows = Rows()
        response = client.post(path, data=raw, content_type="application/json")
        text = body_of(response)
        assert_no_leak(text, raw.decode())
        if response.status_code != 200:  # nothing left after cleaning (only tags, only control characters)
            assert assert_json_error(response, text)["error"] in {"empty", "too_many_words", "too_long"}
            assert rows.added() == {}
            return
        if path == STREAM:
            final = sse_final(text)
            text = json.dumps(final)
        assert_answered_and_audited(text, rows, channel="stream" if path == STREAM else "api")

    check()


CONTENT_TYPES = ("application/json", "application/json; charset=utf-8", "text/plain", "", "text/html",
                 "application/x-www-form-urlencoded", MULTIPART_CONTENT, "application/json; charset=latin-1",
                 "application/javascript", "APPLICATION/JSON")
raw_bodies = st.one_of(
    st.binary(max_size=300),
    any_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),  # nesting past the parser's recursion limit
    st.integers(1, 3000).map(lambda n: b'{"question": ' + b"[" * n + b"1" + b"]" * n + b"}"),
    st.integers(4000, 6000).map(lambda n: b'{"question": "q", "max_results": ' + b"9" * n + b"}"),
    st.integers(65_537, 200_000).map(lambda n: b'{"question": "' + b"x" * n + b'"}'),
    json_value.map(dumps),
    json_value.map(dumps).flatmap(lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda i: b[:i])),
    st.sampled_from([b'{"question": "\\ud800"}', b'{"\\udc00": 1}', b'{"question": "ok", "book": "\\u0000"}',
                     b'{"question": NaN}', b'{"question": Infinity}', b"\xef\xbb\xbf{}", b"\xff\xfe{\x00}\x00"]),
)


@pytest.mark.slow
@pytest.mark.fuzz
def test_raw_bodies_any_content_type_and_method_never_fail_the_api(roomy, client):
    paths = st.sampled_from([ASK, STREAM, f"/api/v1/answers/{uuid.uuid4()}/feedback", "/api/v1/books",
                             "/api/v1/nope", "/api/v1/answers/not-a-uuid/feedback"])
    methods = st.sampled_from(["POST", "POST", "POST", "PUT", "PATCH", "DELETE", "GET", "OPTIONS", "HEAD"])

    @drill(470)
    @given(raw=raw_bodies, content_type=st.sampled_from(CONTENT_TYPES), path=paths, method=methods)
    def check(raw, content_type, path, method):
        rows = Rows()
        response = client.generic(method, path, raw, content_type=content_type)
        text = body_of(response)
        assert response.status_code < 500, (response.status_code, text[:500])
        assert_no_leak(text, raw.decode("utf-8", "replace"))
        if response.status_code == 200 and method == "POST" and path in (ASK, STREAM):
            final = sse_final(text) if path == STREAM else json.loads(text)
            assert_answered_and_audited(json.dumps(final), rows, channel="stream" if path == STREAM else "api")
            return
        assert rows.added() == {}
        if response.status_code >= 400 and method != "HEAD":
            assert_json_error(response, text)

    check()


@pytest.mark.slow
@pytest.mark.fuzz
def test_feedback_accepts_only_a_valid_vote_from_the_answers_session(roomy, client):
    answer = client.post(ASK, data=dumps({"question": VALID_QUESTIONS[0], "book": BOOK}),
                         content_type="application/json").json()
    ids = st.sampled_from([answer["answer_id"], str(uuid.uuid4())])
    bodies = st.fixed_dictionaries({}, optional={
        "rating": st.sampled_from(["up", "down"]) | json_value,
        "comment": nasty_text | json_value | st.integers(2001, 3000).map(lambda n: "c" * n),
        "session_id": st.sampled_from([answer["session_id"], str(uuid.uuid4())]) | json_value,
    }) | st.dictionaries(any_text, json_value, max_size=3) | json_value

    @drill(300)
    @given(answer_id=ids, body=bodies)
    def check(answer_id, body):
        raw = dumps(body)
        before = Feedback.objects.filter(answer_id=answer_id).values_list("rating", "comment").first()
        rows = Rows()
        response = client.post(f"/api/v1/answers/{answer_id}/feedback", data=raw, content_type="application/json")
        text = body_of(response)
        assert_no_leak(text, raw.decode())
        vote = Feedback.objects.filter(answer_id=answer_id).values_list("rating", "comment").first()
        if response.status_code in (200, 201):
            assert answer_id == answer["answer_id"] and body.get("session_id") == answer["session_id"]
            assert vote == (body["rating"], json.loads(text)["comment"])
            assert rows.added() == ({"feedback": 1} if response.status_code == 201 else {})
            audit = AuditLog.objects.get(answer_id=answer_id)
            assert (audit.feedback_rating, audit.feedback_comment) == vote
        else:
            assert_json_error(response, text)
            assert vote == before and rows.added() == {}

    check()


# -- the chat page ---------------------------------------------------------------------------------------
form_text = nasty_text | st.sampled_from(["", " ", "x" * 1001, "w " * 501, "s" * 2001])
# Mostly questions the page refuses (so that few examples pay for an answer), some that it answers.
form_question = st.one_of(st.sampled_from(["", " \n", "<b></b>", "x" * 1001, "w " * 501, "&lt;i&gt;"]),
                          with_defect(any_text, st.just("\x00")), form_text)


@pytest.fixture
def page_settings(roomy, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}


def assert_page_response(response, sent: str) -> str:
    text = body_of(response)
    assert response.status_code < 500, (response.status_code, text[:500])
    assert_no_leak(text, sent)
    if response.status_code >= 400 and response.status_code != 405 and response.request["REQUEST_METHOD"] != "HEAD":
        assert response["Content-Type"].startswith("text/html")
        assert "<html" in text.lower()
    return text


@pytest.mark.slow
@pytest.mark.fuzz
def test_chat_page_form_and_routes_answer_html_never_a_5xx(page_settings):
    fields = st.fixed_dictionaries({"question": form_question}, optional={
        "selected_text": form_text, "book": st.sampled_from([BOOK]) | nasty_text, "rating": nasty_text,
        "comment": form_text, "next": nasty_text | st.sampled_from(["https://evil.example/", "//evil.example"]),
        "unknown": nasty_text})
    routes = st.sampled_from(["/", "/", "/", "/new", f"/answers/{uuid.uuid4()}/feedback", f"/answers/{uuid.uuid4()}",
                              "/answers/not-a-uuid"])

    @drill(150)
    @given(route=routes, method=st.sampled_from(["post", "post", "get", "put", "head"]), data=fields)
    def check(route, method, data):
        # Form fields travel as UTF-8 bytes, which can't hold a lone surrogate: the browser would send U+FFFD.
        data = {k: v.encode("utf-8", "replace").decode("utf-8") for k, v in data.items()}
        sent = " ".join(data.values())
        client = Client()  # a new reader each time: a page that shows every earlier turn would grow and slow
        rows = Rows()
        response = getattr(client, method)(route, data=data) if method != "put" else client.put(route)
        assert_page_response(response, sent)
        added = rows.added()
        if route == "/" and method == "post" and response.status_code == 302:
            assert added.get("turns") == 1 and added.get("audit") == 1, added
            assert response["Location"].startswith("/?book=")
        else:
            assert set(added) <= {"feedback"} and added.get("feedback", 0) == 0, added

    check()


@pytest.mark.slow
@pytest.mark.fuzz
def test_the_pages_own_json_api_refuses_bad_bodies_with_json_errors(page_settings):
    page = Client(enforce_csrf_checks=True)
    page.get("/")
    token = page.cookies["csrftoken"].value

    @drill(100)
    @given(case=bad_ask_bodies(), path=st.sampled_from([ASK, STREAM]), csrf=st.booleans())
    def check(case, path, csrf):
        raw = dumps(case[1])
        rows = Rows()
        headers = {"HTTP_X_CSRFTOKEN": token} if csrf else {}
        response = page.post(path, data=raw, content_type="application/json", **headers)
        text = body_of(response)
        body = assert_json_error(response, text)
        if not csrf:
            assert response.status_code == 403 and body["error"] == "csrf_failed"
        assert_no_leak(text, raw.decode())
        assert rows.added() == {}

    check()


# -- admin uploads ---------------------------------------------------------------------------------------
GOOD_PAGE = b"# Fuzzed upload\n\nA page that the fuzzer wraps in zips of every shape.\n"
entry_names = st.one_of(
    st.sampled_from(["docs/intro.md", "intro.mdx", "../evil.md", "docs/../../evil.md", "..\\..\\evil.md", "/abs.md",
                     "C:\\win.md", "docs/_category_.json", "__MACOSX/._intro.md", ".DS_Store", "a/b/c/d.md",
                     "img.png", "docs/", "x" * 300 + ".md", "é" * 200 + ".md", "ctl\x01.md", "dup.md"]),
    st.text(any_char.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), min_size=1, max_size=40).map(
        lambda s: s + ".md"),
)


def make_zip(entries: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # duplicate names are part of the drill
        for name, data in entries:
            archive.writestr(zipfile.ZipInfo(name), data)
    return buffer.getvalue()


@st.composite
def zip_bytes(draw) -> bytes:
    entries = draw(st.lists(st.tuples(entry_names, st.sampled_from([GOOD_PAGE, b"", b"\x00\xff"]) | st.binary(
        max_size=100)), min_size=1, max_size=5))
    data = make_zip(entries)
    damage = draw(st.sampled_from(["none", "truncate", "flip", "prefix"]))
    if damage == "truncate":
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif damage == "flip":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    elif damage == "prefix":
        data = draw(st.binary(max_size=50)) + data
    return data


upload_names = st.one_of(st.sampled_from(["book.zip", "page.md", "page.mdx", "notes.txt", "BOOK.ZIP", ".hidden.md",
                                          "_partial.md", "é" * 200 + ".md", "x" * 300 + ".md", "noext"]),
                         st.text(any_char.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), min_size=1,
                                 max_size=30).map(lambda s: s + ".md"))
upload_files = st.lists(st.tuples(upload_names, zip_bytes() | st.binary(max_size=200) | st.just(GOOD_PAGE)),
                        min_size=0, max_size=3)


@pytest.fixture
def staff(client, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    client.force_login(User.objects.create(username="fuzz-admin", is_staff=True, is_superuser=True))
    return client


def upload_folder_entries(data_dir: Path) -> set[str]:
    folder = data_dir / "uploads"
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


@pytest.mark.slow
@pytest.mark.fuzz
def test_admin_upload_of_generated_files_and_zips_is_a_form_error_or_one_queued_job(staff, settings):
    data_dir = Path(settings.DATA_DIR)
    folders = st.sampled_from(["", "using", "../up", "/abs", ".hidden", "_partial", "a/../b", "é" * 200]) | any_text
    slugs = st.sampled_from(["fuzz-upload", "Bad Slug", "", "-x", "a" * 65]) | any_text

    @drill(200)
    @given(files=upload_files, folder=folders, slug=slugs, prune=st.booleans())
    def check(files, folder, slug, prune):
        folder, slug = (v.encode("utf-8", "replace").decode() for v in (folder, slug))
        before = upload_folder_entries(data_dir)
        rows = Rows()
        data = {"new_book_slug": slug, "folder": folder, "upload": [io.BytesIO(d) for _, d in files]}
        for buffer, (name, _) in zip(data["upload"], files, strict=True):
            buffer.name = name
        if prune:
            data["prune"] = "on"
        response = staff.post(UPLOAD, data)
        text = body_of(response)
        assert response.status_code in (200, 302), (response.status_code, text[:500])
        assert_no_leak(text, folder + slug)
        added = rows.added()
        if response.status_code == 200:
            assert "errornote" in text or "errorlist" in text, "a refused upload says why"
            assert added == {} and upload_folder_entries(data_dir) == before, "a refused upload stores nothing"
        else:
            assert added == {"jobs": 1}, added
            job = IngestionJob.objects.latest("pk")
            assert job.status == IngestionJob.Status.QUEUED and job.files_total >= 1
            assert upload_folder_entries(data_dir) - before == {str(job.pk)}

    check()


@pytest.mark.slow
@pytest.mark.fuzz
def test_truncated_multipart_bodies_are_refused_cleanly(staff, settings):
    body = encode_multipart(BOUNDARY, {"new_book_slug": "fuzz-multipart", "folder": "",
                                       "upload": _named(io.BytesIO(make_zip([("docs/a.md", GOOD_PAGE)])), "a.zip")})

    @drill(80)
    @given(cut=st.integers(0, len(body) - 1), path=st.sampled_from([UPLOAD, UPLOAD, ASK, "/"]),
           boundary=st.sampled_from([BOUNDARY, "other", ""]))
    def check(cut, path, boundary):
        rows = Rows()
        content_type = f"multipart/form-data; boundary={boundary}" if boundary else "multipart/form-data"
        response = staff.generic("POST", path, body[:cut], content_type=content_type)
        text = body_of(response)
        # A cut that leaves a whole upload queues it: a new book's first indexing, and then the page asked with no
        # book yet says so with 503 and Retry-After (a refusal to ask again, as it should), not a failure.
        indexing = response.status_code == 503 and response.has_header("Retry-After") and "is being indexed" in text
        assert response.status_code < 500 or indexing, (response.status_code, text[:500])
        assert_no_leak(text)
        added = rows.added()
        assert added == {} or (response.status_code == 302 and added == {"jobs": 1}), added

    check()


def _named(buffer: io.BytesIO, name: str) -> io.BytesIO:
    buffer.name = name
    return buffer


# -- the ingest command ----------------------------------------------------------------------------------
GOOD_PAGES = {
    "good.md": "# Garden basics\n\nTomatoes need full sun, deep watering twice a week and a stake to climb.\n",
    "more/deep.mdx": "# Compost\n\nCompost turns kitchen scraps into soil; <Note>turn it weekly</Note> to keep it "
                     "airy.\n",
}
prose = st.text(st.characters(codec="utf-8", exclude_characters="`~<>{}:-#\x00\r"), max_size=200)
huge_line = st.integers(5_000, 60_000).map(lambda n: "word " * (n // 5))
# Each is fatal on its own, wherever the rest of the page puts it (prose holds no fences, tags or front matter).
FATAL = {
    "binary": st.binary(max_size=40).map(lambda b: b + b"\x00" + b),
    "not_utf8": st.sampled_from([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]),
    "unclosed_fence": st.sampled_from(["\n```python\n", "\n~~~\n", "\n````\n"]).map(str.encode),
    "unclosed_jsx": st.sampled_from(["\n<Tabs>\n", "\n<Admonition type=\"x\">\n", "\n<TabItem label=\"x\">\n"]).map(
        str.encode),
    "front_matter": st.sampled_from(["---\ntitle: [unclosed\n---\n", "---\ntitle: 'unterminated\n---\n",
                                     "---\ntitle: x\n", "---\n- a list\n---\n", "---\ndate: 2021-13-45\n---\n",
                                     "---\nslug: /" + "s" * 1200 + "\n---\n", "---\n\t\x01bad: x\n---\n"]).map(
        str.encode),
    "too_large": st.just(b"x" * 40_001),
}


@st.composite
def bad_pages(draw) -> tuple[str, bytes]:
    """(file name, bytes) of a page with one fatal defect among generated prose, huge lines and junk."""
    kind = draw(st.sampled_from(sorted(FATAL)))
    parts = [draw(prose).encode(), draw(st.sampled_from([b"", b"# Title\n\n", b"## Section\n"]))]
    if draw(st.booleans()):
        parts.append(draw(huge_line).encode())
    defect = draw(FATAL[kind])
    if kind == "front_matter":  # with text after it: a page of front matter alone is skipped, not failed
        body = defect + b"".join(parts) + b"\n\nThe page has words of its own.\n"
    elif kind == "unclosed_fence" or kind == "unclosed_jsx":
        body = b"".join(parts) + defect + draw(prose).encode()
    else:
        body = b"".join(parts[:1]) + defect + b"".join(parts[1:])
    suffix = ".mdx" if kind == "unclosed_jsx" else draw(st.sampled_from([".md", ".mdx"]))
    return draw(st.sampled_from(["bad", "more/bad", "Ünïcode", "a b", "more/x"])) + suffix, body


@pytest.mark.slow
@pytest.mark.fuzz
def test_ingest_of_bad_files_beside_good_ones_fails_each_alone_and_loses_nothing(book_dir, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "MAX_FILE_BYTES": 40_000}
    for name, text in GOOD_PAGES.items():
        book_dir.write(name, text)
    code, out, _ = run_command("ingest", str(book_dir.root), "--book", "fuzz-ingest", "--json")
    assert code == 0, out
    good = set(Chunk.objects.filter(book__slug="fuzz-ingest").values_list("id", flat=True))
    counter = iter(range(1_000_000))

    @drill(60)
    @given(pages=st.lists(bad_pages(), min_size=1, max_size=4))
    def check(pages):
        run = next(counter)
        written = set()
        for name, data in pages:
            stem, _, suffix = name.rpartition(".")
            rel = f"{stem}-{run}-{len(written)}.{suffix}"
            book_dir.write(rel, data)
            written.add(rel)
        rows = Rows()
        code, out, err = run_command("ingest", str(book_dir.root), "--book", "fuzz-ingest", "--json")
        for rel in written:
            (book_dir.root / rel).unlink()
        assert_no_leak(out + err)
        report = json.loads(out)
        assert code == 1, report
        failed = {e["file"] for e in report["errors"]}
        assert failed == written, (failed, written)
        assert all(e["message"] and "internal error" not in e["message"] for e in report["errors"])
        assert report["files_failed"] == len(written) and report["files_unchanged"] == len(GOOD_PAGES)
        assert rows.added() == {"runs": 1}, "a failed page adds and loses nothing"
        assert set(Chunk.objects.filter(book__slug="fuzz-ingest").values_list("id", flat=True)) == good

    check()


# -- evaluate's question file ----------------------------------------------------------------------------
good_line = st.fixed_dictionaries({"question": st.sampled_from(VALID_QUESTIONS[:3])}, optional={
    "id": st.text(max_size=5), "kind": st.sampled_from(["answerable", "out_of_scope", "unanswerable"]),
    "evidence": st.lists(st.sampled_from(["ingest", "PORT", "prune"]), max_size=2)}).map(
    lambda d: json.dumps(d, ensure_ascii=False))
bad_line = st.one_of(
    st.sampled_from(["{not json", "[", "{}", '{"question": 3}', '{"question": "q", "kind": "weird"}',
                     '{"question": "q", "evidence": "x"}', '{"question": "\\ud800"}', '{"id": "\\udfff", '
                     '"question": "q"}', '{"question": "q", "answers": [1]}', "null", '"just a string"',
                     '{"question": "q", "kind": []}', "\x00", '{"question": "q", "evidence": [null]}']),
    st.integers(1000, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(4400, 5000).map(lambda n: '{"question": "q", "id": ' + "7" * n + "}"),
    json_value.filter(lambda v: not isinstance(v, dict)).map(json.dumps),
    st.dictionaries(any_text.filter(lambda k: k != "question"), json_value, max_size=3).map(json.dumps),
    st.text(any_char.filter(lambda c: c not in "\n\r"), max_size=40).filter(
        lambda s: s.strip() and not _loads_to_dict(s)),
)


def _loads_to_dict(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


@pytest.mark.slow
@pytest.mark.fuzz
def test_evaluate_refuses_malformed_question_files_naming_the_line(roomy, tmp_path):
    counter = iter(range(1_000_000))
    blank = st.sampled_from(["", "  ", "\t"])

    @drill(120)
    @given(before=st.lists(good_line | blank, max_size=3), bad=bad_line, after=st.lists(good_line | bad_line,
                                                                                         max_size=3),
           separator=st.sampled_from(["\n", "\r\n"]), details=st.booleans())
    def check(before, bad, after, separator, details):
        path = tmp_path / f"questions-{next(counter)}.jsonl"
        path.write_bytes(separator.join([*before, bad, *after]).encode("utf-8", "surrogatepass"))
        options = ["--details", str(tmp_path / "details.jsonl")] if details else []
        rows = Rows()
        code, out, err = run_command("evaluate", "--questions", str(path), "--book", BOOK, "--json", *options)
        assert_no_leak(out + err)
        assert code == 2, (code, out[:300])
        message = json.loads(out)["message"]
        if not message.startswith(f"cannot read {path}"):  # not UTF-8 (a lone surrogate written raw)
            line = int(message.removeprefix(f"{path}:").split(":")[0])
            assert line <= len(before) + 1, message
        assert rows.added() == {}

    check()


# -- regressions: what the drills found, pinned as plain tests (fast, not slow) ----------------------------
@pytest.mark.parametrize(("body", "field"), [
    (b'{"question": "How do I ingest \\ud800 a folder?", "book": "bookchat-manual"}', "question"),
    (b'{"question": "How do I ingest a folder?", "selected_text": "\\udfff"}', "selected_text"),
    (b'{"question": "How do I ingest a folder?", "book": "\\ud800"}', "book"),
    (b'{"question": "How do I ingest a folder?", "chapter": ["\\udc00"]}', "chapter"),
    (b'{"\\ud800": 1}', None),
], ids=["question", "selected_text", "book", "nested", "key"])
def test_lone_surrogate_escape_is_400_invalid_characters_not_a_500(roomy, client, body, field):
    for path in (ASK, STREAM, f"/api/v1/answers/{uuid.uuid4()}/feedback"):
        response = client.post(path, data=body, content_type="application/json")
        error = assert_json_error(response, body_of(response))
        assert (error["error"], error["field"]) == ("invalid_characters", field)


@pytest.mark.parametrize("body", [b"[" * 10_000 + b"]" * 10_000,
                                  b'{"question": "q", "max_results": ' + b"9" * 5000 + b"}"],
                         ids=["nested-too-deeply", "integer-too-long"])
def test_json_the_parser_cannot_take_is_400_invalid_json(roomy, client, body):
    for path in (ASK, STREAM, f"/api/v1/answers/{uuid.uuid4()}/feedback"):
        response = client.post(path, data=body, content_type="application/json")
        assert assert_json_error(response, body_of(response))["error"] == "invalid_json"


@pytest.mark.parametrize("field", ["book", "chapter"])
def test_nul_in_book_or_chapter_is_400_invalid_characters(roomy, client, field):
    body = {"question": "How do I ingest a folder?", "book": BOOK, field: "a\x00b"}
    response = client.post(ASK, data=dumps(body), content_type="application/json")
    error = assert_json_error(response, body_of(response))
    assert (error["error"], error["field"]) == ("invalid_characters", field)


def test_ask_command_with_an_argument_that_is_not_utf8_exits_2(manual_book):
    # Python decodes such argv bytes with surrogateescape: "caf\xe9" arrives as "caf\udce9".
    code, out, _ = run_command("ask", "How do I ingest a caf\udce9 folder?", "--book", BOOK, "--json")
    assert code == 2 and json.loads(out)["error"] == "invalid_characters"


@pytest.mark.parametrize(("line", "message"), [
    ("[" * 10_000 + "]" * 10_000, "nested too deeply"),
    ('{"question": "q", "id": ' + "7" * 5000 + "}", "not JSON"),
    ('{"question": "How do I ingest \\ud800 a folder?"}', "surrogate"),
])
def test_evaluate_names_the_line_the_json_parser_cannot_take(roomy, tmp_path, line, message):
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps({"question": "How do I ingest a folder?"}) + "\n" + line + "\n")
    code, _, err = run_command("evaluate", "--questions", str(path), "--book", BOOK)
    assert code == 2 and f"{path}:2:" in err and message in err, err


def test_evaluate_reads_a_question_holding_a_line_separator_as_one_line(roomy, tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text(json.dumps({"question": "How do I ingest\u2028a folder?", "kind": "weird"}, ensure_ascii=False)
                    + "\n")
    _, _, err = run_command("evaluate", "--questions", str(path), "--book", BOOK)
    assert f"{path}:1: unknown kind 'weird'" in err, "the line was read whole, not cut at U+2028"


@pytest.mark.parametrize(("name", "folder"), [("é" * 200 + ".md", ""), ("page.md", "x" * 300)],
                         ids=["file-name", "folder"])
def test_upload_whose_name_is_too_long_for_the_file_system_is_a_form_error(staff, settings, name, folder):
    response = staff.post(UPLOAD, {"new_book_slug": "fuzz-long", "folder": folder,
                                   "upload": [_named(io.BytesIO(GOOD_PAGE), name)]})
    assert response.status_code == 200
    assert "cannot be stored" in body_of(response)
    assert not IngestionJob.objects.exists() and upload_folder_entries(Path(settings.DATA_DIR)) == set()


def test_page_whose_slug_is_too_long_fails_alone_and_the_rest_of_its_batch_is_stored(book_dir):
    book_dir.write("a-long.md", "---\nslug: /" + "s" * 1200 + "\n---\n# Long\n\nA page whose slug is far too long.\n")
    book_dir.write("b/_category_.json", json.dumps({"label": "L" * 400}))
    book_dir.write("b/page.md", "# Labelled\n\nA page in a folder whose category label is 400 characters long.\n")
    book_dir.write("c.md", "# After\n\nA page read after the bad one, stored in the same batch.\n")
    code, out, err = run_command("ingest", str(book_dir.root), "--book", "fuzz-long-slug", "--json")
    report = json.loads(out)
    assert code == 1 and report["files_indexed"] == 2 and report["files_failed"] == 1, report
    assert [(e["file"], "slug is 1,200 characters long" in e["message"]) for e in report["errors"]] == [
        ("a-long.md", True)]
    documents = Document.objects.filter(book__slug="fuzz-long-slug")
    assert sorted(documents.values_list("path", flat=True)) == ["b/page.md", "c.md"]
    assert documents.get(path="b/page.md").category == "L" * 300
