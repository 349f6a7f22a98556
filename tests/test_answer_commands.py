"""The `ask` and `evaluate` commands, per-book calibration at index time, and refusals in either fusion mode.

The evaluate runs on the real corpora use only a few questions each: quality figures belong to
`make bench` (BENCHMARKS.md), not to the test suite.
"""

from __future__ import annotations

import json

import pytest

from chat.models import ScopeCalibration
from tests.conftest import run_command
from tests.support.shared_data import shared_data

pytestmark = pytest.mark.django_db

OFF_TOPIC = "Who won the NBA championship in 2016?"


@pytest.fixture(autouse=True)
def roomy_deadline(settings):
    # A loaded machine must not turn these behaviour tests into timeouts.
    settings.BOOKCHAT = {**settings.BOOKCHAT, "DEADLINE_SECONDS": 60.0, "RETRIEVAL_SECONDS": 30.0}


def test_ask_prints_the_answer_with_sources_and_confidence(manual_book):
    code, out, _ = run_command("ask", "How do I ingest a folder?", "--book", "bookchat-manual")
    assert code == 0
    assert "Sources:" in out and "Confidence:" in out
    assert "[1]" in out or "[2]" in out


def test_ask_json_is_the_api_response(manual_book):
    code, out, _ = run_command("ask", "Which setting changes the port?", "--book", "bookchat-manual", "--json")
    assert code == 0
    response = json.loads(out)
    for key in ("answer", "sources", "confidence", "confidence_level", "generator", "session_id", "answer_id"):
        assert key in response
    assert response["generator"] == "extractive"


def test_ask_follow_up_continues_the_session(manual_book):
    _, out, _ = run_command("ask", "How do I ingest a folder?", "--book", "bookchat-manual", "--json")
    session = json.loads(out)["session_id"]
    code, out, _ = run_command("ask", "and how do I remove deleted pages?", "--book", "bookchat-manual",
                               "--session", session, "--json")
    assert code == 0
    response = json.loads(out)
    assert response["session_id"] == session
    assert "How do I ingest a folder?" in response["resolved_question"]


@pytest.mark.parametrize(("args", "error"), [
    (["   "], "empty"),
    (["x" * 1001], "too_long"),
    (["a\x00b"], "invalid_characters"),
    (["How do I ingest a folder?", "--max-results", "11"], "out_of_range"),
    (["How do I ingest a folder?", "--book", "no-such-book"], "unknown_book"),
    (["How do I ingest a folder?", "--chapter", "no-such-chapter"], "unknown_chapter"),
])
def test_ask_refuses_bad_input_with_exit_2(manual_book, args, error):
    if "--book" not in args:
        args = [*args, "--book", "bookchat-manual"]
    code, out, _ = run_command("ask", *args, "--json")
    assert code == 2
    assert json.loads(out)["error"] == error


def test_ask_human_error_goes_to_stderr(manual_book):
    code, out, err = run_command("ask", "", "--book", "bookchat-manual")
    assert code == 2 and out == "" and "question is empty" in err


def test_ask_off_topic_says_not_covered_and_suggests_sections(manual_book):
    code, out, _ = run_command("ask", OFF_TOPIC, "--book", "bookchat-manual")
    assert code == 0
    assert "isn't covered" in out
    assert out.count("  - ") == 3


@pytest.mark.parametrize("fusion", ["weighted", "rrf"])
def test_off_topic_question_is_refused_in_either_fusion_mode(settings, manual_book, fusion):
    from chat.pipeline.answering import answer_question
    from chat.pipeline.questions import AskRequest

    settings.BOOKCHAT = {**settings.BOOKCHAT, "FUSION": fusion}
    refused = answer_question(AskRequest(question=OFF_TOPIC, book="bookchat-manual"))
    answered = answer_question(AskRequest(question="How do I ingest a folder?", book="bookchat-manual"))
    assert refused.refused and refused.sources == []
    assert not answered.refused and answered.sources


def test_threshold_setting_overrides_the_calibrated_one(settings, manual_book):
    from chat.pipeline.answering import answer_question
    from chat.pipeline.questions import AskRequest

    settings.BOOKCHAT = {**settings.BOOKCHAT, "SCOPE_THRESHOLD": 0.999}
    response = answer_question(AskRequest(question="How do I ingest a folder?", book="bookchat-manual"))
    assert response.refused
    assert response.retrieval.threshold == 0.999


def test_indexing_calibrates_the_book(manual_book):
    calibration = ScopeCalibration.objects.get(book__slug="bookchat-manual")
    details = calibration.details
    assert details["off_topic"]["n"] >= 50 and details["in_scope_probes"]["n"] >= 20
    assert details["off_topic"]["p50"] < calibration.threshold <= details["in_scope_probes"]["p50"]
    assert details["off_topic_refused"] >= 0.8


def test_reingesting_an_unchanged_book_keeps_its_calibration(manual_book):
    from tests.conftest import REPO

    before = ScopeCalibration.objects.get(book__slug="bookchat-manual").computed_at
    code, _, _ = run_command("ingest", str(REPO / "docs"), "--book", "bookchat-manual", "--json")
    assert code == 0
    assert ScopeCalibration.objects.get(book__slug="bookchat-manual").computed_at == before


def test_a_small_new_book_is_calibrated_when_indexed(book_dir):
    book_dir.write("intro.md", "# Gardening\n\nTomatoes need six hours of sun a day and deep watering twice a "
                               "week. Prune the side shoots so the plant puts its energy into fruit.\n\n"
                               "## Soil\n\nA loamy soil rich in compost keeps roots moist without waterlogging "
                               "them, and a layer of mulch stops weeds.\n")
    code, _, _ = run_command("ingest", str(book_dir.root), "--book", "garden", "--json")
    assert code == 0
    assert ScopeCalibration.objects.get(book__slug="garden").threshold > 0


# -- evaluate ------------------------------------------------------------------------------------------
def write_questions(tmp_path, lines: list) -> str:
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return str(path)


def test_evaluate_reports_every_metric_on_the_manual(tmp_path, manual_book):
    questions = write_questions(tmp_path, [
        {"id": "1", "question": "Which environment variable changes the port of make run?", "kind": "answerable",
         "evidence": ["PORT"], "answers": ["PORT"]},
        {"id": "2", "question": "How do I ingest a folder?", "kind": "answerable",
         "evidence": ["pass the folder that holds the book's pages"]},
        {"id": "3", "question": OFF_TOPIC, "kind": "out_of_scope", "evidence": []},
        {"id": "4", "question": "Can bookchat print the book as a PDF?", "kind": "unanswerable", "evidence": []},
        {"id": "5", "question": "what does this mean?", "kind": "selected_text",
         "evidence": ["Some files failed. The rest are indexed and searchable"],
         "selected_text": "Some files failed. The rest are indexed and searchable; see `errors`."},
        {"id": "6", "question": "and how do I remove deleted pages?", "kind": "follow_up",
         "previous": "How do I ingest a folder?", "evidence": ["--prune"]},
    ])
    details = tmp_path / "details.jsonl"
    code, out, _ = run_command("evaluate", "--questions", questions, "--book", "bookchat-manual", "--json",
                               "--details", str(details))
    assert code == 0
    summary = json.loads(out)
    for key in ("questions", "hit_at_1", "hit_at_3", "hit_at_5", "mrr_at_10", "answer_contains_rate",
                "citation_precision", "refusal_rate", "refusal_rate_out_of_scope", "refusal_rate_unanswerable",
                "false_refusal_rate", "latency_ms_p50", "latency_ms_p95", "scope_threshold"):
        assert key in summary, key
    assert summary["questions"] == 6
    assert summary["refusal_rate_out_of_scope"] == 1.0
    assert 0 <= summary["hit_at_1"] <= summary["hit_at_3"] <= summary["hit_at_5"] <= 1
    assert summary["scope_threshold"] > 0
    records = [json.loads(line) for line in details.read_text().splitlines()]
    assert [r["id"] for r in records] == ["1", "2", "3", "4", "5", "6"]
    assert all({"question", "retrieved", "hit_rank", "answer", "refused", "latency_ms"} <= set(r) for r in records)
    assert len(records[0]["retrieved"]) == 10


def test_evaluate_human_output_is_a_table(tmp_path, manual_book):
    questions = write_questions(tmp_path, [{"id": "1", "question": "How do I ingest a folder?",
                                            "kind": "answerable", "evidence": ["ingest"]}])
    code, out, _ = run_command("evaluate", questions, "--book", "bookchat-manual")
    assert code == 0
    assert "hit@1 / @3 / @5" in out and "scope threshold" in out


@pytest.mark.parametrize(("lines", "message"), [
    ([], "holds no questions"),
    (["{not json"], ":1: not JSON"),
    ([{"id": "1", "question": "ok?", "kind": "answerable"}, {"id": "2", "kind": "answerable"}], ":2: each line"),
    ([{"id": "1", "question": "ok?", "kind": "weird"}], "unknown kind"),
    ([{"id": "1", "question": "ok?", "evidence": "not a list"}], "lists of strings"),
])
def test_evaluate_refuses_a_bad_question_file_naming_the_line(tmp_path, manual_book, lines, message):
    questions = write_questions(tmp_path, lines) if lines else str(tmp_path / "empty.jsonl")
    if not lines:
        (tmp_path / "empty.jsonl").write_text("")
    code, _, err = run_command("evaluate", "--questions", questions, "--book", "bookchat-manual")
    assert code == 2
    assert message in err


def test_evaluate_missing_file_and_bad_limit_exit_2(tmp_path, manual_book):
    assert run_command("evaluate", "--questions", str(tmp_path / "nope.jsonl"))[0] == 2
    assert run_command("evaluate", "--questions", str(tmp_path / "nope.jsonl"), "--limit", "0")[0] == 2
    assert run_command("evaluate")[0] == 2


# One question of each kind about the bundled manual (docs/).
ONE_OF_EACH_KIND = [
    {"id": "a", "question": "How do I ingest a folder?", "kind": "answerable",
     "evidence": ["pass the folder that holds the book's pages"], "answers": ["ingest"]},
    {"id": "u", "question": "Can bookchat print the book as a PDF?", "kind": "unanswerable", "evidence": []},
    {"id": "o", "question": OFF_TOPIC, "kind": "out_of_scope", "evidence": []},
    {"id": "s", "question": "what does this mean?", "kind": "selected_text",
     "evidence": ["Some files failed. The rest are indexed and searchable"],
     "selected_text": "Some files failed. The rest are indexed and searchable; see `errors`."},
    {"id": "f", "question": "and how do I remove deleted pages?", "kind": "follow_up",
     "previous": "How do I ingest a folder?", "evidence": ["--prune"]},
]
ANSWER_KIND_FIGURES = {"n", "hit_at_1", "hit_at_5", "mrr_at_10", "answer_contains_rate", "citation_precision",
                       "false_refusal_rate", "withheld_rate"}


def test_evaluate_reports_figures_per_kind(tmp_path, manual_book):
    questions = write_questions(tmp_path, ONE_OF_EACH_KIND)
    details = tmp_path / "details.jsonl"
    code, out, _ = run_command("evaluate", questions, "--book", "bookchat-manual", "--json", "--details", str(details))
    assert code == 0
    summary = json.loads(out)
    by_kind = summary["by_kind"]
    assert list(by_kind) == ["answerable", "unanswerable", "out_of_scope", "selected_text", "follow_up"]
    records = {r["id"]: r for r in map(json.loads, details.read_text().splitlines())}
    for question in ONE_OF_EACH_KIND:
        figures, record = by_kind[question["kind"]], records[question["id"]]
        assert figures["n"] == 1
        if question["kind"] in ("unanswerable", "out_of_scope"):
            assert set(figures) == {"n", "refused_rate"}
            assert figures["refused_rate"] == (1.0 if record["refused"] else 0.0)
        else:  # one question: each rate is that question's own outcome
            assert set(figures) == ANSWER_KIND_FIGURES
            assert figures["hit_at_1"] == (1.0 if record["hit_rank"] == 1 else 0.0)
            assert figures["hit_at_5"] == (1.0 if record["hit_rank"] and record["hit_rank"] <= 5 else 0.0)
            assert figures["false_refusal_rate"] == (1.0 if record["refused"] else 0.0)
    assert by_kind["out_of_scope"]["refused_rate"] == summary["refusal_rate_out_of_scope"] == 1.0
    assert by_kind["unanswerable"]["refused_rate"] == summary["refusal_rate_unanswerable"]
    assert by_kind["answerable"]["answer_contains_rate"] == 1.0
    assert by_kind["selected_text"]["answer_contains_rate"] is None  # it has no answers to look for

    code, out, _ = run_command("evaluate", questions, "--book", "bookchat-manual")
    assert code == 0
    kinds_header = next(line for line in out.splitlines() if line.startswith("by kind"))
    assert kinds_header.split() == ["by", "kind", "answerable", "unanswerable", "out_of_scope", "selected_text",
                                    "follow_up"]
    refused_row = next(line for line in out.splitlines() if line.startswith("refused "))
    assert refused_row.split()[1:] == ["—", "1.000" if records["u"]["refused"] else "0.000", "1.000", "—", "—"]


def test_evaluate_compare_runs_both_settings_on_the_same_questions(tmp_path, manual_book):
    from bookchat.base import conf

    questions = write_questions(tmp_path, ONE_OF_EACH_KIND)
    details = tmp_path / "details.jsonl"
    code, out, _ = run_command("evaluate", questions, "--book", "bookchat-manual", "--compare", "default",
                               "TOP_K=1", "--json", "--details", str(details))
    assert code == 0
    result = json.loads(out)
    default_top_k = next(s.default for s in conf.SETTINGS if s.name == "TOP_K")
    assert result["a"]["settings"] == {"TOP_K": default_top_k} and result["b"]["settings"] == {"TOP_K": 1}
    assert (result["a"]["summary"]["top_k"], result["b"]["summary"]["top_k"]) == (default_top_k, 1)
    assert result["a"]["summary"]["questions"] == result["b"]["summary"]["questions"] == 5
    records = [json.loads(line) for line in details.read_text().splitlines()]
    assert [(r["run"], r["id"]) for r in records] == [(run, q["id"]) for run in "ab" for q in ONE_OF_EACH_KIND]
    # An answer is written from the first TOP_K passages: under B every answer cites the first one only.
    answered_b = [r for r in records if r["run"] == "b" and r.get("cited")]
    assert answered_b and all(r["cited"] == [r["retrieved"][0]["chunk_id"]] for r in answered_b)
    assert conf.setting("TOP_K") == default_top_k  # nothing leaks out of the run
    assert conf.setting("DEADLINE_SECONDS") == 60.0  # and the settings it ran under are back

    code, out, _ = run_command("evaluate", questions, "--book", "bookchat-manual", "--compare", "default",
                               "top_k=1", "--limit", "1")
    assert code == 0
    assert "A: default" in out and "B: TOP_K=1" in out
    assert next(line for line in out.splitlines() if line.startswith("metric")).split() == ["metric", "A", "B", "B",
                                                                                             "−", "A"]
    assert next(line for line in out.splitlines() if line.startswith("TOP_K")).split() == [
        "TOP_K", str(default_top_k), "1", f"{1 - default_top_k:+d}"]
    assert any(line.startswith("answerable: hit@1") for line in out.splitlines())
    assert "manage.py calibrate" not in out  # TOP_K plays no part in the scope threshold
    assert conf.setting("TOP_K") == default_top_k


def test_evaluate_compare_notes_a_threshold_calibrated_under_other_settings(tmp_path, manual_book):
    questions = write_questions(tmp_path, ONE_OF_EACH_KIND[:1])
    code, out, _ = run_command("evaluate", questions, "--book", "bookchat-manual", "--compare", "default",
                               "FUSION=rrf")
    assert code == 0  # the manual was calibrated with the default fusion, which run B does not use
    assert [line for line in out.splitlines() if "manage.py calibrate" in line] == [
        "note: the scope threshold was calibrated under other settings than run B used; to judge refusals fairly, "
        "run `manage.py calibrate` with those settings."]


@pytest.mark.parametrize(("spec", "error", "message"), [
    ("NO_SUCH_SETTING=1", "unknown_setting", "unknown setting 'NO_SUCH_SETTING'"),
    ("TOP_K", "bad_compare_spec", "'TOP_K' is not NAME=VALUE"),
    ("TOP_K=3,", "bad_compare_spec", "'' is not NAME=VALUE"),
    ("TOP_K=1,top_k=2", "bad_compare_spec", "TOP_K is given twice"),
    ("TOP_K=three", "bad_setting", "BOOKCHAT_TOP_K='three' is not a valid int"),
    ("DEBUG=maybe", "bad_setting", "BOOKCHAT_DEBUG='maybe' is not a valid bool"),
])
def test_evaluate_compare_refuses_a_bad_spec_with_exit_2(tmp_path, spec, error, message):
    questions = write_questions(tmp_path, [{"id": "1", "question": "How do I ingest a folder?"}])
    code, _, err = run_command("evaluate", questions, "--compare", "default", spec)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    code, out, _ = run_command("evaluate", questions, "--compare", spec, "default", "--json")
    assert code == 2 and json.loads(out)["error"] == error and message in json.loads(out)["message"]


def test_compare_spec_takes_names_in_any_case_with_or_without_prefix_and_types_values():
    from chat.quality.comparison import parse_settings_spec

    assert parse_settings_spec("Default") == {}
    assert parse_settings_spec("bookchat_top_k=3, fusion=rrf,BOOKCHAT_DEBUG=on,dense_weight=0.7") == {
        "TOP_K": 3, "FUSION": "rrf", "DEBUG": True, "DENSE_WEIGHT": 0.7}


def test_evaluate_compare_restores_settings_when_a_run_fails(tmp_path, manual_book):
    from bookchat.base import conf

    questions = write_questions(tmp_path, [{"id": "1", "question": "How do I ingest a folder?"}])
    code, _, err = run_command("evaluate", questions, "--book", "bookchat-manual", "--compare", "default",
                               "EMBEDDING_BACKEND=nope")
    assert code == 2 and "EMBEDDING_BACKEND='nope'" in err
    assert conf.setting("EMBEDDING_BACKEND") == next(s.default for s in conf.SETTINGS if s.name == "EMBEDDING_BACKEND")
    assert conf.setting("DEADLINE_SECONDS") == 60.0


@pytest.mark.needs("shared-data")
@pytest.mark.slow
@pytest.mark.drill  # whole question sets through evaluate: run with the drills, for make test's time
@pytest.mark.parametrize("corpus", ["squad2-dev", "docusaurus-docs"])
def test_evaluate_runs_on_a_real_corpus(ingest_corpus, corpus):
    ingest_corpus(corpus)
    questions = shared_data() / corpus / "questions.jsonl"
    code, out, _ = run_command("evaluate", "--questions", str(questions), "--book", corpus, "--limit", "12",
                               "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["questions"] == 12 and summary["errors"] == 0
    assert summary["hit_at_5"] >= 0.5  # a floor that catches a broken pipeline, not a quality target
    assert ScopeCalibration.objects.filter(book__slug=corpus).exists()


def test_expired_sessions_are_purged_by_a_django_q_schedule():
    from datetime import timedelta

    from django.utils import timezone
    from django_q.models import Schedule

    from chat.models import Conversation
    from chat.tasks import purge_expired_sessions

    schedule = Schedule.objects.get(func="chat.tasks.purge_expired_sessions")
    assert schedule.schedule_type == Schedule.MINUTES and schedule.repeats == -1
    old = Conversation.objects.create(last_active_at=timezone.now() - timedelta(minutes=31))
    live = Conversation.objects.create(last_active_at=timezone.now())
    assert purge_expired_sessions() >= 1
    assert not Conversation.objects.filter(pk=old.pk).exists()
    assert Conversation.objects.filter(pk=live.pk).exists()


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_calibrate_command_remeasures_a_book(manual_book):
    code, out, _ = run_command("calibrate", "--book", "bookchat-manual", "--json")
    assert code == 0
    details = json.loads(out)["bookchat-manual"]
    assert details["threshold"] == round(ScopeCalibration.objects.get(book__slug="bookchat-manual").threshold, 4)
    assert details["fusion"] == "weighted"
    assert run_command("calibrate", "--book", "no-such-book")[0] == 2
