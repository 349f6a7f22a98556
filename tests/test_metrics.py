"""``/metrics`` (``bookchat.scraping``, ``bookchat.base.metrics``): off without a token (404), 401 for a missing, wrong
or malformed bearer token, 403 from an address outside ``METRICS_ALLOW``; with the right one Prometheus' text
format, counting answers by level and channel, refusals by reason, errors by code (a refused publish once), each
stage's time, searches, the books' passages, the task queue and the workers' memory. A metric that can't be recorded
never fails the answer. The drill: scraped during an 8-client load run on gunicorn with two workers, the answers
counted are the ones the load generator received (±1 %), from both workers."""

from __future__ import annotations

import json
import threading
import uuid

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.latency import Gunicorn, load
from bookchat import gunicorn_config
from bookchat.base import metrics
from bookchat.checks import check_settings
from chat.channels.keys import api_key_create
from chat.models import ApiKey
from chat.pipeline.announcements import AuditRecord, Outcome
from ingestion.models import Book, Chunk, IngestionJob
from tests.conftest import committed, run_command

BOOK = "metrics-book"
TOKEN = "scrape-me-0123456789"
QUESTIONS = ["How often should the greenhouse vents be opened?", "What temperature do tomato seedlings need?",
             "How do I water seedlings in the greenhouse?", "When are seedlings moved outside?",
             "How is the greenhouse heated in winter?", "What pests attack tomato seedlings?"]
ON = {"METRICS_TOKEN": TOKEN, "METRICS_ALLOW": "", "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0,
      "GENERATION_SECONDS": 30.0, "LLM_BASE_URL": "", "LLM_API_KEY": "", "LLM_MODEL": ""}


@pytest.fixture(scope="module")
def metrics_book(django_db_setup, django_db_blocker, tmp_path_factory):
    """A three-page book about a greenhouse, committed (a server the drill starts reads it), removed afterwards."""
    root = tmp_path_factory.mktemp("metrics-book")
    (root / "vents.md").write_text(
        "# Ventilation\n\nOpen the greenhouse vents every morning once the air inside passes 24 °C, and close them "
        "in the evening so the night stays warm. On windy days open only the vents away from the wind.\n",
        encoding="utf-8")
    (root / "seedlings.md").write_text(
        "# Tomato seedlings\n\nTomato seedlings need 18 to 22 °C and sixteen hours of light. Water them from below "
        "when the top of the soil is dry. Aphids and whitefly are the pests that attack them most.\n\n"
        "## Moving outside\n\nMove seedlings outside after the last frost, a few hours a day for a week first.\n",
        encoding="utf-8")
    (root / "heating.md").write_text(
        "# Heating\n\nIn winter a paraffin heater or an electric fan heater keeps the greenhouse above 5 °C. "
        "Bubble wrap on the glass halves the heat lost at night.\n", encoding="utf-8")
    with django_db_blocker.unblock():
        code, out, _ = committed(lambda: run_command("ingest", str(root), "--book", BOOK, "--json"))
    assert code == 0, out
    yield json.loads(out)
    with django_db_blocker.unblock():
        committed(lambda: Book.objects.filter(slug=BOOK).delete())


def families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(text: str, sample_name: str, **labels) -> float:
    """The sum of the samples named ``sample_name`` whose labels include ``labels`` (0 when there are none)."""
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == sample_name and labels.items() <= sample.labels.items())


@pytest.fixture
def metrics_on(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, **ON}


def scrape(client, token: str | None = TOKEN, **headers):
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client.get("/metrics", **headers)


# -- who may read them ------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_metrics_are_off_without_a_token(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, **ON, "METRICS_TOKEN": ""}
    assert scrape(client).status_code == 404
    assert scrape(client, token=None).status_code == 404


@pytest.mark.django_db
def test_a_scrape_without_the_token_or_with_a_wrong_one_is_refused(client, metrics_on):
    missing = scrape(client, token=None)
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")
    assert b"bookchat_answers" not in missing.content
    assert scrape(client, token="scrape-me-012345678").status_code == 401, "one character short"
    assert scrape(client, token=TOKEN + "0").status_code == 401, "one character more"


@pytest.mark.django_db
@pytest.mark.parametrize("header", [
    "Bearer", "Bearer ", f"Basic {TOKEN}", TOKEN, f"Token {TOKEN}", f"Bearer {TOKEN} extra", f"Bearer{TOKEN}",
    f"Bearer {TOKEN}\x00", "Bearer ⚙" + TOKEN, f"Bearer {TOKEN}" + "x" * 5000, f"Bearer {TOKEN[:-1]}é",
])
def test_malformed_authorization_headers_are_refused(client, metrics_on, header):
    assert client.get("/metrics", HTTP_AUTHORIZATION=header).status_code == 401


@pytest.mark.django_db
def test_the_right_token_reads_prometheus_text_format(client, metrics_on):
    for header in (f"Bearer {TOKEN}", f"bearer {TOKEN}", f"  Bearer   {TOKEN}  "):
        response = client.get("/metrics", HTTP_AUTHORIZATION=header)
        assert response.status_code == 200, header
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert response["Cache-Control"] == "no-store"
    found = families(response.content.decode())
    for name in ("bookchat_answers", "bookchat_refusals", "bookchat_errors", "bookchat_searches",
                 "bookchat_stage_seconds", "bookchat_answer_seconds", "bookchat_queue_tasks",
                 "bookchat_queue_oldest_task_age_seconds", "bookchat_worker_resident_bytes", "bookchat_scrape_ok"):
        assert name in found, name
    assert found["bookchat_answers"].type == "counter" and found["bookchat_stage_seconds"].type == "histogram"
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@pytest.mark.django_db
def test_an_address_outside_the_allow_list_is_refused_even_with_the_token(client, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, **ON, "METRICS_ALLOW": "10.0.0.0/8, 192.168.1.7"}
    assert scrape(client).status_code == 403
    assert scrape(client, REMOTE_ADDR="10.20.30.40").status_code == 200
    assert scrape(client, REMOTE_ADDR="192.168.1.7").status_code == 200
    assert scrape(client, token="wrong", REMOTE_ADDR="10.20.30.40").status_code == 401
    settings.BOOKCHAT = {**settings.BOOKCHAT, "METRICS_ALLOW": "127.0.0.1,::1"}
    assert scrape(client).status_code == 200
    assert scrape(client, REMOTE_ADDR="::1").status_code == 200
    assert scrape(client, REMOTE_ADDR="127.0.0.2").status_code == 403


@pytest.mark.django_db
def test_prometheus_may_scrape_a_node_by_its_address(client, metrics_on, settings):
    """As the probes: a scraper reaches each node as ``Host: 10.0.0.5:8000``, an address ALLOWED_HOSTS doesn't list."""
    settings.DEBUG, settings.ALLOWED_HOSTS = False, ["chat.example.org"]
    assert scrape(client, HTTP_HOST="10.0.0.5:8000").status_code == 200
    assert scrape(client, token=None, HTTP_HOST="10.0.0.5:8000").status_code == 401
    assert client.get("/api/v1/books", HTTP_HOST="10.0.0.5:8000").status_code == 400, "nothing else is"
    settings.BOOKCHAT = {**settings.BOOKCHAT, "METRICS_TOKEN": ""}
    assert scrape(client, HTTP_HOST="10.0.0.5:8000").status_code == 404


def test_a_bad_allow_list_stops_the_start(settings):
    for bad in ("10.0.0.0/33", "localhost", "10.0.0.1,,nonsense"):
        settings.BOOKCHAT = {**settings.BOOKCHAT, **ON, "METRICS_ALLOW": bad}
        errors = [e for e in check_settings() if e.id == "bookchat.E007"]
        assert len(errors) == 1 and "BOOKCHAT_METRICS_ALLOW" in errors[0].msg, bad


# -- what they count --------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_an_answer_is_counted_by_level_and_channel_with_its_stages(client, metrics_on, metrics_book):
    before = scrape(client).content.decode()
    response = client.post("/api/v1/ask", {"question": QUESTIONS[0], "book": BOOK}, content_type="application/json")
    assert response.status_code == 200, response.content
    level = response.json()["confidence_level"]
    after = scrape(client).content.decode()
    assert value(after, "bookchat_answers_total", level=level, channel="api") == \
        value(before, "bookchat_answers_total", level=level, channel="api") + 1
    assert value(after, "bookchat_answers_total") == value(before, "bookchat_answers_total") + 1, "once, at one place"
    for stage in ("embed", "dense", "lexical", "fusion", "retrieval", "generation", "grounding"):
        assert value(after, "bookchat_stage_seconds_count", stage=stage) == \
            value(before, "bookchat_stage_seconds_count", stage=stage) + 1, stage
    assert value(after, "bookchat_answer_seconds_count", channel="api") == \
        value(before, "bookchat_answer_seconds_count", channel="api") + 1
    assert value(after, "bookchat_book_passages", book=BOOK) == Chunk.objects.filter(book__slug=BOOK).count() > 0
    assert value(after, "bookchat_book_pages", book=BOOK) == 3
    assert value(after, "bookchat_index_runs_total", status="done") >= 1
    assert value(after, "bookchat_scrape_ok") == 3, "every part read"


@pytest.mark.django_db
def test_a_refusal_is_counted_by_its_reason(client, metrics_on, metrics_book):
    before = scrape(client).content.decode()
    response = client.post("/api/v1/ask", {"question": "Who won the football world cup in 1998?", "book": BOOK},
                           content_type="application/json")
    assert response.status_code == 200
    reason = response.json()["refusal_reason"]
    assert reason, "a question the book doesn't answer is refused"
    after = scrape(client).content.decode()
    assert value(after, "bookchat_refusals_total", reason=reason) == \
        value(before, "bookchat_refusals_total", reason=reason) + 1
    assert value(after, "bookchat_refusals_total") == value(before, "bookchat_refusals_total") + 1
    assert value(after, "bookchat_answers_total", level="low") == \
        value(before, "bookchat_answers_total", level="low") + 1


@pytest.mark.django_db
def test_a_refused_publish_is_counted_once(client, metrics_on, settings, tmp_path):
    """The publishing API records a refusal from the reply the exception handler made, and counts it no more."""
    settings.DATA_DIR = tmp_path
    _, key = api_key_create(kind=ApiKey.SECRET, publish_book="counted-book")
    before = scrape(client).content.decode()
    refused = client.post("/api/v1/books/counted-book/sources", data=b"not an archive", content_type="application/gzip",
                          headers={"Authorization": f"Bearer {key}"})
    assert (refused.status_code, refused.json()["error"]) == (415, "not_gzip")
    after = scrape(client).content.decode()
    assert value(after, "bookchat_errors_total", code="not_gzip", status="415") == \
        value(before, "bookchat_errors_total", code="not_gzip", status="415") + 1
    assert value(after, "bookchat_errors_total") == value(before, "bookchat_errors_total") + 1
    assert IngestionJob.objects.get(book_slug="counted-book", status="refused").error_code == "not_gzip"

@pytest.mark.django_db
def test_errors_are_counted_by_code_and_searches_by_channel(client, metrics_on, metrics_book):
    before = scrape(client).content.decode()
    bad = client.post("/api/v1/ask", {"question": "   "}, content_type="application/json")
    assert bad.status_code == 400
    code = bad.json()["error"]
    unknown = client.post("/api/v1/ask", {"question": "Vents?", "book": "no-such-book"},
                          content_type="application/json")
    assert unknown.status_code == 404
    search = client.get("/api/v1/search", {"q": "vents", "book": BOOK})
    assert search.status_code == 200, search.content
    after = scrape(client).content.decode()
    assert value(after, "bookchat_errors_total", code=code, status="400") == \
        value(before, "bookchat_errors_total", code=code, status="400") + 1
    assert value(after, "bookchat_errors_total", code=unknown.json()["error"], status="404") == \
        value(before, "bookchat_errors_total", code=unknown.json()["error"], status="404") + 1
    assert value(after, "bookchat_answers_total") == value(before, "bookchat_answers_total"), "errors aren't answers"
    assert value(after, "bookchat_searches_total", channel="api") == \
        value(before, "bookchat_searches_total", channel="api") + 1


def test_a_record_that_cannot_be_counted_fails_nothing(caplog):
    answer_id = uuid.uuid4()
    metrics.on_answered(None, record=AuditRecord(answer_id=answer_id, outcome=Outcome.ANSWERED, channel="api",
                                                 question="q", confidence_level="high", latency_ms="not a number"))
    assert f"recording the metrics of answer {answer_id} failed" in caplog.text
    # Unknown labels are "other", never new ones.
    metrics.on_answered(None, record=AuditRecord(answer_id=uuid.uuid4(), outcome=Outcome.ANSWERED, channel="<script>",
                                                 question="q", confidence_level="🙂", timings_ms={"made-up": 1.0}))
    assert metrics.ANSWERS.labels("other", "other")._value.get() >= 1


def test_gunicorn_starts_its_workers_on_a_fresh_folder_of_counts(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOKCHAT_METRICS_TOKEN", TOKEN)
    own = tmp_path / "multiproc"
    own.mkdir()
    (own / "counter_123.db").write_bytes(b"stale")
    (own / "keep.txt").write_text("not ours")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(own))
    gunicorn_config.on_starting(None)
    assert sorted(p.name for p in own.iterdir()) == ["keep.txt"], "the last run's counts are gone"
    gunicorn_config.on_exit(None)
    assert own.is_dir(), "an operator's folder stays"

    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    gunicorn_config.on_starting(None)
    made = gunicorn_config.os.environ["PROMETHEUS_MULTIPROC_DIR"]
    assert made and gunicorn_config.Path(made).is_dir()
    gunicorn_config.on_exit(None)
    assert not gunicorn_config.Path(made).exists()

    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    monkeypatch.setenv("BOOKCHAT_METRICS_TOKEN", "")
    gunicorn_config.on_starting(None)
    assert "PROMETHEUS_MULTIPROC_DIR" not in gunicorn_config.os.environ, "metrics off: one process's counts"


# -- the drill ---------------------------------------------------------------------------------------------------
@pytest.mark.drill
def test_a_scrape_under_load_counts_every_answer_of_both_workers(metrics_book, served):
    env = {f"BOOKCHAT_{name}": str(value) for name, value in ON.items()}
    # At most 4 connections per worker: one worker, woken first, may otherwise accept all 8 clients' connections,
    # and the drill is about a scrape summing both.
    env["GUNICORN_CMD_ARGS"] = "--worker-connections 4"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    questions = [(question, BOOK) for question in QUESTIONS]
    with Gunicorn(workers=2, env=env) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get("/metrics").status_code == 401, "without the token"
        assert http.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        before = http.get("/metrics", headers=auth)
        assert before.status_code == 200
        during: list[int] = []
        stop = threading.Event()

        def scraper() -> None:
            with httpx.Client(base_url=server.url, timeout=30, headers=auth) as own:
                while not stop.wait(0.5):
                    during.append(own.get("/metrics").status_code)

        thread = threading.Thread(target=scraper)
        thread.start()
        try:
            measured = load(server, questions, clients=8, seconds=8)
        finally:
            stop.set()
            thread.join()
        after = http.get("/metrics", headers=auth).text
        rss_pids = {s.labels["pid"] for s in families(after)["bookchat_worker_resident_bytes"].samples}

    counted = value(after, "bookchat_answers_total", channel="api") - \
        value(before.text, "bookchat_answers_total", channel="api")
    assert measured["answers"] > 0 and measured["errors"] == 0, measured
    assert abs(counted - measured["answers"]) <= max(1, 0.01 * measured["answers"]), (counted, measured)
    assert during and set(during) == {200}, "scraped while the load ran"
    per_worker = {s.labels["pid"]: s.value for s in families(after)["bookchat_worker_answers"].samples}
    assert len(per_worker) == 2 and all(n > 0 for n in per_worker.values()), f"both workers answered: {per_worker}"
    assert sum(per_worker.values()) == value(after, "bookchat_answers_total"), "the sum is the workers' answers"
    assert set(per_worker) == rss_pids, "the memory of the same two workers"
