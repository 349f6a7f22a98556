"""Confidence (chat.pipeline.confidence): the fitted probability and its levels, answers made of navigation links, the
unsure answer that becomes a refusal with the closest sections (and reaches the review queue), and the figures
``evaluate`` reports about it (chat/quality/evaluation.py, chat/quality/plots.py)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from audit.dashboard import review_queue_filter
from audit.models import AuditLog
from chat.pipeline import confidence
from chat.pipeline.answering import UNSURE_PREFIX, answer_question, answer_steps, prepare
from chat.pipeline.confidence import (
    FEATURES,
    FLOOR,
    HIGH,
    LEVEL_NOTES,
    MEDIUM,
    READINGS,
    ConfidenceInput,
    assess,
    confidence_features,
    confidence_level,
    navigation_only,
)
from chat.pipeline.questions import AskRequest
from chat.pipeline.retrieval import RetrievedChunk
from chat.quality.evaluation import (
    Question,
    answer_right,
    chance_calibration_error,
    confidence_report,
    discrimination,
    wilson_interval,
)
from chat.quality.plots import confidence_svg
from tests.conftest import committed, run_command

MANUAL = "bookchat-manual"
BELOW_THE_FLOOR = {"CONFIDENCE_HIGH": 0.9999, "CONFIDENCE_MEDIUM": 0.9995, "CONFIDENCE_FLOOR": 0.999}
NEXT_STEPS = "Next steps:\n\n- [Walking in Isaac Sim](#) [1]\n- [Balance control](#) [1]\n- [Sim-to-real](#) [1]"


def chunk(text: str, *, score: float = 0.95, similarities=None, heading: str = "Robots > Walking") -> RetrievedChunk:
    return RetrievedChunk(id=str(abs(hash(text))), document_id=1, heading_path=heading, anchor="", url="/walking",
                          text=text, document_title="Walking", document_path="walking.md", category="",
                          score=score, dense=0.9, sentence_similarities=similarities)


def situation(answer: str, chunks: list[RetrievedChunk], question: str = "How does the robot keep its balance?",
              **kwargs) -> ConfidenceInput:
    return ConfidenceInput(question=question, resolved_question=question, answer=answer, chunks=chunks, cited=[1],
                     scope_score=0.95, threshold=0.85, calibration={"in_scope_median": 0.9}, **kwargs)


BALANCE = ("The robot keeps its balance with an inertial measurement unit. It reads the tilt a thousand times a "
           "second.")
STRONG = [chunk(BALANCE, score=0.97), chunk("Cameras see the floor.", score=0.05)]


# -- the model and its levels ----------------------------------------------------------------------------------
def test_levels_follow_the_fitted_cuts():
    assert 0 <= FLOOR <= MEDIUM < HIGH < 1
    assert confidence_level(HIGH) == "high"
    assert confidence_level(HIGH - 0.001) == "medium"
    assert confidence_level(MEDIUM) == "medium"
    assert confidence_level(MEDIUM - 0.001) == "unsure"
    assert confidence_level(1.0, barred=True) == "medium", "an answer with a link to # (say) is never high"


def test_settings_replace_the_fitted_cuts(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "CONFIDENCE_HIGH": 0.99, "CONFIDENCE_MEDIUM": 0.5}
    assert confidence_level(0.98) == "medium" and confidence_level(0.49) == "unsure"


def test_one_weight_per_feature_and_a_probability():
    assert len(confidence.WEIGHTS) == len(FEATURES)
    features = confidence_features(situation(f"{BALANCE} [1]", STRONG))
    assert list(features) == list(READINGS) and list(READINGS)[:len(FEATURES)] == list(FEATURES)
    assert 0 < confidence.probability(features) < 1


def test_a_clear_lead_and_a_covered_question_score_higher_than_a_close_call():
    clear = assess(situation(f"{BALANCE} [1]", STRONG))
    close = assess(situation(f"{BALANCE} [1]", [chunk(BALANCE, score=0.4), chunk("Cameras see the floor.",
                                                                                  score=0.38)]))
    off = assess(situation("Cameras see the floor. [1]", [chunk("Cameras see the floor.", score=0.4),
                                                          chunk(BALANCE, score=0.38)]))
    assert clear.probability > close.probability > off.probability
    assert clear.level == "high", clear


def test_the_sentence_gap_counts_only_with_sentence_vectors():
    quoted = [0.91, 0.80]  # the answer's sentence is the closest in meaning
    others = [chunk("Cameras see the floor.", similarities=[0.70])]
    near = confidence_features(situation(f"{BALANCE.split('. ')[0]}. [1]",
                                         [chunk(BALANCE, similarities=quoted), *others]))
    assert near["unit_gap"] == pytest.approx(10 * (0.91 - 0.80))
    without = confidence_features(situation(f"{BALANCE} [1]", STRONG))
    assert without["unit_gap"] == confidence.MISSING["unit_gap"]


@pytest.mark.parametrize(("answer", "expected"), [
    (NEXT_STEPS, True),
    ("- [Walking](/walking) [1]\n- [Balance](/balance) [1]", True),
    ("See [the IMU section](/imu) [1]", True),
    ("The IMU measures tilt and acceleration so the controller can correct a fall; see [IMU](/imu). [1]", False),
    (BALANCE + " [1]", False),
    ("```md\n[link](#)\n```", False),
])
def test_navigation_only(answer, expected):
    assert navigation_only(answer) is expected


def test_a_list_of_links_to_hash_is_never_high_and_is_unsure():
    assessed = assess(situation(NEXT_STEPS, [chunk(NEXT_STEPS, score=0.999), chunk("Other.", score=0.001)]))
    assert assessed.navigation and assessed.dead_links
    assert assessed.level != "high"
    assert assessed.held_back


# -- through the pipeline ---------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_an_unsure_answer_becomes_a_refusal_with_the_closest_sections_and_is_reviewed(manual_book, settings,
                                                                                       django_db_blocker):
    question = "How do I ingest a folder?"
    plain = answer_question(AskRequest(question=question, book=MANUAL))
    assert not plain.refused and plain.refusal_reason is None
    assert plain.confidence_note and plain.retrieval.confidence_features.keys() == set(READINGS)

    settings.BOOKCHAT = {**settings.BOOKCHAT, **BELOW_THE_FLOOR}
    steps = answer_steps(prepare(AskRequest(question=question, book=MANUAL, channel="api")))
    tokens = ""
    while True:
        try:
            tokens += next(steps)[1]["text"]
        except StopIteration as done:
            answered = done.value
            break
    final = answered.response
    assert final.refused and final.refusal_reason == "unsure"
    assert "doesn't seem to answer “How do I ingest a folder?” directly" in final.answer
    assert tokens == final.answer
    assert final.sources == [] and final.confidence_level == "low" and final.confidence_note is None
    assert final.confidence == plain.confidence, "the probability of the answer it held back"
    sections = [s.heading_path for s in final.suggestions]
    assert sections and sections[0] == plain.sources[0].heading_path, "closest sections in answer order"
    assert answered.verdict.draft_answer == plain.answer and answered.verdict.outcome == "held_back"

    row = AuditLog.objects.get(answer_id=final.answer_id)
    assert row.status == "unsure" and row.refused and row.draft_answer == plain.answer
    assert AuditLog.objects.filter(review_queue_filter(), pk=row.pk).exists()

    settings.BOOKCHAT = {**settings.BOOKCHAT, "UNSURE_ANSWERS": "answer"}
    shown = answer_question(AskRequest(question=question, book=MANUAL))
    assert not shown.refused and shown.answer == f"{UNSURE_PREFIX}\n\n{plain.answer}"
    assert shown.confidence_level == "unsure" and shown.disclaimer and shown.sources
    assert AuditLog.objects.filter(review_queue_filter(), answer_id=shown.answer_id).exists(), \
        "an unsure answer is shown, and reviewed"


@pytest.mark.django_db
def test_between_the_floor_and_medium_the_closest_passage_is_shown_said_plainly(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "CONFIDENCE_HIGH": 0.9999, "CONFIDENCE_MEDIUM": 0.9995,
                         "CONFIDENCE_FLOOR": 0.0001}
    final = answer_question(AskRequest(question="How do I ingest a folder?", book=MANUAL))
    assert not final.refused and final.confidence_level == "unsure"
    assert final.answer.startswith(UNSURE_PREFIX) and "[1]" in final.answer and final.sources
    assert final.confidence_note == LEVEL_NOTES["unsure"] and final.disclaimer is None, "said once"
    row = AuditLog.objects.get(answer_id=final.answer_id)
    assert row.status == "unsure" and not row.refused and AuditLog.objects.filter(review_queue_filter(),
                                                                                  pk=row.pk).exists()


@pytest.mark.django_db
def test_a_navigation_page_is_not_an_answer(book_dir, django_db_blocker):
    book_dir.write("walking.md", "# Walking in simulation\n\nThe walking controller of the humanoid runs in Isaac "
                                 "Sim as a ROS 2 node.\n\n## Next steps\n\n- [Make the robot walk in Isaac Sim](#)\n"
                                 "- [Tune the balance controller](#)\n- [Move from sim to real](#)\n")
    book_dir.write("sensors.md", "# Sensors\n\nAn IMU measures acceleration and rotation; a lidar measures "
                                 "distance with laser light.\n")
    with django_db_blocker.unblock():
        code, out, _ = committed(lambda: run_command("ingest", str(book_dir.root), "--book", "confidence-nav",
                                                     "--json"))
    assert code == 0, out
    calibration = json.loads(out)["after"]["calibration"]  # ingest says what it set for this book
    assert calibration["threshold"] > 0 and 0 <= calibration["off_topic_refused"] <= 1
    response = answer_question(AskRequest(question="What are the next steps to make my robot walk in Isaac Sim?",
                                          book="confidence-nav"))
    assert response.confidence_level != "high"
    if not response.refused:
        assert not navigation_only(response.answer), response.answer
    elif response.refusal_reason == "unsure":
        assert "(#)" not in response.answer and response.suggestions


# -- what evaluate reports --------------------------------------------------------------------------------------
def q(kind="answerable", **fields) -> Question:
    return Question(id="1", question="Which option sets the port?", kind=kind, **fields)


@pytest.mark.parametrize(("question", "answer", "refused", "right"), [
    (q(answers=["PORT"]), "Set `PORT` to change it. [1]", False, True),
    (q(answers=["PORT"]), "Use a bigger machine. [1]", False, False),
    (q(evidence=["Run make run. The server listens on port 8000 by default."]),
     "It listens on port 8000 by default. [1]", False, False),
    (q(evidence=["Run make run. The server listens on port 8000 by default."]),
     "The server listens on port 8000 by default. [1]", False, True),
    (q(kind="unanswerable"), "Anything at all. [1]", False, False),
    (q(kind="unanswerable"), "This isn't covered.", True, None),
    (q(), "Some answer. [1]", False, None),
])
def test_answer_right(question, answer, refused, right):
    assert answer_right(question, answer, refused=refused) is right


def record(level: str, confidence_value: float, right, kind="answerable", refused=False, reason=None) -> dict:
    return {"kind": kind, "confidence": confidence_value, "confidence_level": level, "right": right,
            "refused": refused, "withheld": False, "refusal_reason": reason, "draft_right": None}


def test_confidence_report_precision_calibration_and_curve():
    records = ([record("high", 0.95, True)] * 9 + [record("high", 0.95, False)]
               + [record("medium", 0.55, True)] * 3 + [record("medium", 0.55, False)] * 2
               + [record("low", 0.05, None, refused=True, reason="unsure")]
               + [record("medium", 0.5, False, kind="unanswerable")]
               + [record("low", 0.0, None, kind="out_of_scope", refused=True, reason="not_covered")])
    report = confidence_report(records)
    assert report["judged"] == 15
    assert report["precision"] == {"high": 0.9, "medium": 0.6, "unsure": None, "low": None}
    assert report["levels"] == {"high": 10, "medium": 5, "unsure": 0, "low": 0}
    # |0.95 - 0.9| × 10 + |0.55 - 0.6| × 5, over 15 answers
    assert report["ece"] == pytest.approx(0.05)
    assert [(b["from"], b["n"]) for b in report["reliability"]] == [(0.5, 5), (0.9, 10)]
    assert report["should_refuse_answered"] == {"high": 0, "medium": 1, "unsure": 0, "low": 0}
    assert report["refusals"] == {"not_covered": 1, "unanswerable": 0, "unsure": 1}
    assert report["answerable_high"] == round(10 / 16, 4)
    curve = report["risk_coverage"]
    assert [p["coverage"] for p in curve] == sorted(p["coverage"] for p in curve)
    assert curve[-1]["coverage"] == round(15 / 16, 4) and curve[-1]["risk"] == round(3 / 15, 4)
    assert curve[0]["risk"] <= curve[-1]["risk"], "the most confident answers are wrong less often"


def test_report_says_how_far_few_answers_can_be_trusted():
    """Each level's precision comes with its 95 % interval, and the ECE with the one a perfectly calibrated
    confidence would show on the same answers by chance, which shrinks as answers grow in number."""
    records = [record("high", 0.95, True)] * 9 + [record("high", 0.95, False)] + [record("medium", 0.55, True)] * 5
    report = confidence_report(records)
    low, high = report["precision_interval"]["high"]
    assert low < 0.9 < high and low == pytest.approx(0.596, abs=0.001) and high == pytest.approx(0.982, abs=0.001)
    assert report["precision_interval"]["low"] is None
    assert report["ece_by_chance"] > 0.02
    assert confidence_report(records, by_chance=False)["ece_by_chance"] is None
    few, many = [0.3, 0.5, 0.7, 0.9] * 10, [0.3, 0.5, 0.7, 0.9] * 250
    assert chance_calibration_error(few) > 0.08 > 3 * chance_calibration_error(many)
    assert chance_calibration_error(few) == chance_calibration_error(few), "seeded: the same answers, the same figure"
    assert wilson_interval([]) is None and wilson_interval([True] * 40)[1] == 1.0


def test_discrimination_is_the_share_of_right_answers_ranked_above_wrong_ones():
    assert discrimination([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert discrimination([0.1], [0.9]) == 0.0
    assert discrimination([0.5, 0.9], [0.5, 0.1]) == pytest.approx((0.5 + 1 + 1 + 1) / 4)
    assert discrimination([0.5], []) is None
    records = [record("high", 0.9, True), record("medium", 0.4, False), record("medium", 0.6, True)]
    assert confidence_report(records)["discrimination"] == 1.0


def test_plot_is_one_svg_with_both_charts_and_escaped_labels():
    records = [record("high", 0.9, True), record("medium", 0.4, False)]
    svg = confidence_svg(confidence_report(records), title="<book> & co")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    text = " ".join(t for t in root.itertext())
    assert "Reliability" in text and "Risk–coverage" in text and "<book> & co" in text
    assert "&lt;book&gt; &amp; co" in svg
    assert len(re.findall(r"<rect [^>]*fill=\"#1565c0\"", svg)) == 2, "a bar per tenth of confidence holding answers"


@pytest.mark.django_db
def test_evaluate_reports_confidence_and_draws_it(tmp_path, manual_book):
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(line) for line in [
        {"id": "1", "question": "How do I ingest a folder?", "kind": "answerable",
         "evidence": ["pass the folder that holds the book's pages"]},
        {"id": "2", "question": "What is the best recipe for chocolate chip cookies?", "kind": "out_of_scope"},
    ]))
    plot, details = tmp_path / "c.svg", tmp_path / "d.jsonl"
    code, out, _ = run_command("evaluate", str(questions), "--book", MANUAL, "--json", "--plot", str(plot),
                               "--details", str(details))
    assert code == 0
    report = json.loads(out)["confidence"]
    assert {"precision", "ece", "reliability", "risk_coverage", "coverage", "answerable_high", "refusals"} <= set(
        report)
    assert report["refusals"]["not_covered"] == 1
    ET.fromstring(plot.read_text())
    rows = [json.loads(line) for line in details.read_text().splitlines()]
    assert set(rows[0]["features"]) == set(READINGS) and rows[1]["features"] == {}
    code, text, _ = run_command("evaluate", str(questions), "--book", MANUAL)
    assert "right when high / medium / unsure" in text and "calibration error (ECE)" in text
    assert "by chance alone" in text and "right answers ranked above wrong ones" in text
    code, _, _ = run_command("evaluate", str(questions), "--book", MANUAL, "--compare", "default",
                             "UNSURE_ANSWERS=answer", "--plot", str(plot))
    assert code == 0
    both = ET.fromstring(plot.read_text())  # one document, a row of charts per run
    assert sum("Reliability" in (t.text or "") for t in both.iter()) == 2


def test_situation_reads_only_what_it_is_given():
    """No database: the features come from the situation alone (the API computes them on every answer)."""
    features = confidence_features(situation(f"{BALANCE} [1]", STRONG, selected_overlap=0.8))
    assert features["selected"] == 0.8 and features["follow_up"] == 0.0
    follow = ConfidenceInput(question="And why?", resolved_question="Why does the robot need an IMU? (And why?)",
                       answer=f"{BALANCE} [1]", chunks=STRONG, cited=[1])
    assert confidence_features(follow)["follow_up"] == 1.0


SELECTION = "The robot keeps its balance with an inertial measurement unit."


def test_an_answer_that_mostly_repeats_the_selection_is_never_high():
    """Whatever the model says of it: a reader who selected a sentence learns nothing from it quoted back."""
    strong = {"rank_logit": 6.0, "rank_margin": 8.0, "scope": 3.0, "unit_gap": 2.0, "coverage": 1.0,
              "coverage_beyond_names": 1.0, "unseen": 0.0, "selected": 1.0, "selected_echo": 0.0, "follow_up": 0.0,
              "previous_echo": 0.0}
    assert confidence.probability(strong) > HIGH, "the model alone would say high"
    echo = situation(f"{SELECTION} [1]", STRONG, selected_overlap=1.0, selected_text=SELECTION)
    assessed = assess(echo)
    assert assessed.features["selected_echo"] == 1.0 and "echo" in assessed.barred
    assert assessed.level != "high"
    after = situation("It reads the tilt a thousand times a second. [1]", STRONG, selected_overlap=1.0,
                      selected_text=SELECTION)
    assert confidence_features(after)["selected_echo"] == 0.0, "what the book says next is no echo"
    half = situation(f"{BALANCE} [1]", STRONG, selected_text=SELECTION)
    assert 0.3 < confidence_features(half)["selected_echo"] < 0.7


def test_a_follow_up_answered_with_the_previous_answer_again_is_an_echo():
    previous = f"{BALANCE} [1]"
    follow = ConfidenceInput(question="And how often?", resolved_question="And how often? (How does it balance?)",
                       answer=previous, chunks=STRONG, cited=[1], previous_answer=previous)
    assert confidence_features(follow)["previous_echo"] == 1.0 and assess(follow).level != "high"
    plain = ConfidenceInput(question="How does it balance?", resolved_question="How does it balance?", answer=previous,
                      chunks=STRONG, cited=[1], previous_answer=previous)
    assert confidence_features(plain)["previous_echo"] == 0.0, "only a follow-up leans on the previous answer"


def test_coverage_beyond_names_leaves_out_what_only_names_a_thing():
    """A product's name can carry a passage to the top; the rest of the question says whether it answers."""
    answer = "Isaac Sim runs the walking controller as a ROS 2 node. [1]"
    features = confidence_features(situation(answer, STRONG, question="Does Isaac Sim support PhysX cloth?"))
    assert features["coverage"] == 0.4, "isaac and sim of five words"
    assert features["coverage_beyond_names"] == 0.0, "neither support nor cloth"
    assert "names" in confidence.barred("Does Isaac Sim support PhysX cloth?", answer, features)


@pytest.mark.parametrize(("question", "answer", "reason"), [
    ("How many source strings does the free plan include?", "The free plan is for open-source projects. [1]",
     "quantity"),
    ("Which axe-core version is bundled?", "The package ships axe-core's script in its wheel. [1]", "quantity"),
    ("Which AWS region does Flightcontrol deploy to?", "Flightcontrol is a hosting service for web apps. [1]", "names"),
])
def test_an_answer_that_does_not_answer_what_is_asked_of_a_named_thing_is_never_high(question, answer, reason):
    chunks = [chunk(answer.removesuffix(" [1]"), score=0.999), chunk("Other.", score=0.001)]
    assessed = assess(situation(answer, chunks, question=question))
    assert reason in assessed.barred and assessed.level != "high"


def test_a_quantity_answered_with_a_number_and_a_name_answered_in_full_are_not_barred():
    answer = "The free plan includes 60,000 source strings. [1]"
    question = "How many source strings does the Crowdin free plan include?"
    assert confidence.barred(question, answer, confidence_features(situation(answer, [chunk(answer)],
                                                                                question=question))) == []


@pytest.mark.django_db
def test_the_page_and_mcp_show_an_unsure_answer_as_related_sections(manual_book, settings, client):
    from chat.channels.mcp_server import render_answer
    from chat.channels.responses import answer_data

    settings.BOOKCHAT = {**settings.BOOKCHAT, **BELOW_THE_FLOOR, "DEADLINE_SECONDS": 60.0,
                         "RETRIEVAL_SECONDS": 30.0}
    html = client.post("/", {"question": "How do I ingest a folder?", "book": MANUAL}, follow=True).content.decode()
    assert "Not answered directly" in html and "Not covered" not in html
    assert 'aria-label="Related sections"' in html and 'class="sources"' not in html
    assert 'class="level-note"' not in html, "a refusal claims no confidence"

    text = render_answer(answer_data(answer_question(AskRequest(question="How do I ingest a folder?", book=MANUAL))))
    assert "Related sections (links, not citations):" in text and "Confidence:" not in text
    settings.BOOKCHAT = {**settings.BOOKCHAT, "CONFIDENCE_HIGH": 0.0, "CONFIDENCE_MEDIUM": 0.0, "CONFIDENCE_FLOOR": 0.0}
    shown = render_answer(answer_data(answer_question(AskRequest(question="How do I ingest a folder?",
                                                                 book=MANUAL))))
    assert re.search(r"Confidence: 0\.\d\d \((high|medium)\)\. \S", shown), "the level and what it means"
