"""The pieces that make an answer trustworthy, on real Postgres with real passages: the re-ranker, the
answerability check and the composed extractive answer (structures kept whole, one source cited per run).
Their quality figures are measured by ``evaluate`` and ``make bench``, not asserted here."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from chat.pipeline.answerability import asked, check_answerability, specific_terms
from chat.pipeline.answering import answer_question
from chat.pipeline.extractive import compose_extractive
from chat.pipeline.generation import Excerpt
from chat.pipeline.grounding import answer_segments, check_grounding
from chat.pipeline.questions import AskRequest
from chat.pipeline.reranking import FEATURES, candidate_features, probability
from chat.pipeline.retrieval import retrieve
from ingestion.models import Book
from tests.conftest import committed, run_command

pytestmark = pytest.mark.django_db

MANUAL = "bookchat-manual"


@pytest.fixture(scope="module")
def cache_book(django_db_setup, django_db_blocker, tmp_path_factory):
    """Two small pages that share their words: one says how to clear the build cache, the other only names
    the cache and clearing in passing."""
    root = tmp_path_factory.mktemp("cache-book")
    (root / "caching.md").write_text(
        "# Caching\n\nPages are compiled once and kept. Clearing happens on its own when the server restarts, "
        "and the build step keeps a folder of old pages as a cache for the next build of the site.\n",
        encoding="utf-8")
    (root / "clearing.md").write_text(
        "# Maintenance\n\nTo clear the build cache, run `site clear`. It deletes the generated folder and starts "
        "the next build from nothing.\n", encoding="utf-8")
    with django_db_blocker.unblock():
        code, out, _ = committed(lambda: run_command("ingest", str(root), "--book", "cache-book", "--json"))
    assert code == 0, out
    return json.loads(out)


def test_reranker_puts_the_passage_holding_the_questions_phrase_first(cache_book, settings):
    book = Book.objects.get(slug="cache-book")
    retrieval = retrieve(book=book, question="How do I clear the build cache?")
    first = retrieval.chunks[0]
    assert first.document_path == "clearing.md"
    features = dict(zip(FEATURES, zip(*candidate_features(retrieval.pool, retrieval.lexical,
                                                          question="How do I clear the build cache?"),
                                      strict=True), strict=True))
    by_path = {c.document_path: n for n, c in enumerate(retrieval.pool)}
    assert features["phrase"][by_path["clearing.md"]] > features["phrase"][by_path["caching.md"]]
    assert first.score == pytest.approx(probability(candidate_features(
        retrieval.pool, retrieval.lexical, question="How do I clear the build cache?")[by_path["clearing.md"]]))
    assert 0 < first.fused <= 1  # the fused score is kept beside the re-ranker's probability


def test_reranker_off_keeps_the_fused_order(cache_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RERANKER": "off"}
    retrieval = retrieve(book=Book.objects.get(slug="cache-book"), question="How do I clear the build cache?")
    assert [c.score for c in retrieval.chunks] == sorted((c.score for c in retrieval.chunks), reverse=True)
    assert all(c.score == c.fused for c in retrieval.chunks)


# -- answerability --------------------------------------------------------------------------------------------
def test_specific_terms_are_names_and_figures_not_plain_words():
    assert specific_terms("Can I import my pages from Notion or Confluence?") == ["notion", "confluence"]
    assert specific_terms("Does it make AMP pages or an ePub of the site in 2024?") == ["amp", "epub", "2024"]
    assert specific_terms("How do I run A/B tests on a .ipynb notebook?") == ["a/b", ".ipynb"]
    assert specific_terms("How do the plugins exchange data?") == []  # lower-case paraphrase: no names
    assert specific_terms("Where is the config? How do I edit it?") == []  # capitals that start sentences
    assert specific_terms("Is it OK to commit the Crowdin token?") == ["crowdin"]  # "OK" names nothing
    # "e.g." and "i.e." are abbreviations, not names; an ID's prefix "UA-" is the name UA, found in "UA-XXXX-X"
    assert specific_terms("If I mistype a type, e.g. one Material lacks, i.e. a typo?") == ["material"]
    assert specific_terms("Can I still use an old (UA-) property?") == ["ua"]
    assert check_answerability("Can I still use an old (UA-) property?", ["property: UA-XXXXXXXX-X"]).answerable


def test_answerability_finds_terms_as_words_stems_or_light_misspellings():
    passages = ["Pages in Notebooks: Jupyter notebooks render as pages.", "The Premier League broadcasts"]
    assert check_answerability("Can Jupyter render a Notebook?", passages).answerable
    assert check_answerability("Who broadcasts the Primier League?", passages).answerable  # one letter off
    result = check_answerability("Can I import pages from Notion?", passages)
    assert not result.answerable and result.missing_terms == ["notion"]
    assert not check_answerability("Is there an A/B test?", ["see data/blog for posts"]).answerable  # not a word


def test_answerability_reads_what_is_asked_not_the_situation_before_it():
    passages = ["Start the preview with docker run -p 8000:8000 squidfunk/mkdocs-material"]
    situation = "I run Material through Docker on Linux. How do I start the preview on port 8000?"
    assert asked(situation) == "How do I start the preview on port 8000?"
    assert check_answerability(situation, passages).answerable  # the book need not name the reader's Linux
    assert not check_answerability("I use Docker. How do I start the preview on Windows?", passages).answerable
    assert asked("Can I import pages from Notion?") == "Can I import pages from Notion?"
    assert asked("Tell me about the Notion importer.") == "Tell me about the Notion importer."  # none asks: all
    follow_up = "What about Windows? (How do I install it on Linux?)"  # a follow-up with the question it follows
    assert specific_terms(asked(follow_up)) == ["windows"]


def test_an_on_topic_question_whose_key_term_is_absent_is_refused_naming_it(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANSWERABILITY": "on"}
    refused = answer_question(AskRequest(question="How do I ingest a book from a Confluence space?", book=MANUAL,
                                         channel="evaluate"))
    assert refused.refused and "“Confluence”" in refused.answer, "named as the reader wrote it"
    title = Book.objects.get(slug=MANUAL).title
    assert refused.answer.startswith(f"“{title}” doesn't mention “Confluence”")
    assert "“How do I ingest a book from a Confluence space?”" in refused.answer, "what was asked, quoted"
    assert refused.retrieval.answerability.missing_terms == ["confluence"]
    assert refused.suggestions and not refused.sources
    answered = answer_question(AskRequest(question="How do I ingest a folder of MDX files?", book=MANUAL,
                                          channel="evaluate"))
    assert not answered.refused, answered.answer
    assert "mdx" in answered.retrieval.answerability.specific_terms


def test_answerability_off_answers_the_same_question(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANSWERABILITY": "off"}
    response = answer_question(AskRequest(question="How do I ingest a book from a Confluence space?", book=MANUAL,
                                          channel="evaluate"))
    assert not response.refused and response.retrieval.answerability is None


def test_calibration_decides_answerability_per_book(manual_book):
    from chat.models import ScopeCalibration

    details = ScopeCalibration.objects.get(book__slug=MANUAL).details
    assert 0 <= details["answerability_probes_refused"] <= 1
    assert details["answerability"] == (details["answerability_probes_refused"] <= 0.05)


# -- the composed answer --------------------------------------------------------------------------------------
def test_how_to_answer_on_the_manual_shows_the_script_it_needs(manual_book):
    response = answer_question(AskRequest(question="How do I add the widget to my Docusaurus site?", book=MANUAL,
                                          channel="evaluate"))
    assert "widget.js" in response.answer and "```" in response.answer, response.answer
    assert response.grounding.passed
    assert not response.answer.lstrip().startswith("Rebuild")  # the last step is not the answer's lead


def source(text: str, heading_path: str = "Guide > Setup", score: float = 0.9) -> SimpleNamespace:
    return SimpleNamespace(text=text, heading_path=heading_path, score=score)


def test_numbered_steps_stay_whole_and_numbered_for_a_how_to_question():
    text = ("Installing takes three steps:\n\n1. Download the archive.\n2. Unpack the archive into a folder.\n"
            "3. Run the installer from that folder.\n\nThe installer writes a log file.")
    answer = compose_extractive("How do I install the archive?", [source(text)])
    assert "1. Download the archive.\n2. Unpack the archive into a folder.\n3. Run the installer from that folder."\
        in answer, answer
    assert answer.startswith("Installing takes three steps:")
    assert check_grounding(answer, [text]).passed


def test_a_code_block_comes_whole_with_the_sentence_that_introduces_it():
    code = "```bash\nsite build --out dist\nsite deploy dist\n```"
    text = f"The site deploys from the build folder. To deploy the site, run:\n\n{code}\n\nDeploys take a minute."
    answer = compose_extractive("How do I deploy the site?", [source(text)])
    assert code in answer and answer.index("To deploy the site, run:") < answer.index("```bash")


def test_lead_span_goes_on_to_the_sentence_that_answers():
    text = ("Since version 3 the plugin limits the feed to the last 20 entries by default. To keep every entry, "
            "set `limit: false` in the plugin options. Feeds are written at build time.")
    answer = compose_extractive("Why does my feed show only some posts since version 3?", [source(text)])
    assert "limit: false" in answer and answer.endswith("[1]")


def test_one_passage_is_cited_for_text_several_passages_hold():
    shared = "The cache folder is deleted by the clear command."
    answer = compose_extractive("What does the clear command delete?",
                                [source(shared, score=0.9), source(f"Other words here. {shared}", score=0.5)])
    assert answer == f"{shared} [1]"


def test_a_list_item_never_stands_without_the_line_that_introduced_it():
    text = ("Options you can pass:\n\n- `--base-url` sets the public address of the book.\n"
            "- `--book` names the book.\n- `--json` prints a report.\n- `--dry-run` changes nothing.")
    answer = compose_extractive("Which option sets the public address?", [source(text)])
    assert answer.startswith("Options you can pass:") and "`--base-url` sets the public address" in answer
    assert [kind for kind, _ in answer_segments(answer)] == ["sentence", "sentence"]


def test_a_table_row_reads_with_its_column_names():
    text = "| Attribute | Meaning |\n|---|---|\n| `data-key` | A publishable key |\n| `data-book` | The book's slug |"
    answer = compose_extractive("What does data-book mean?", [source(text)])
    assert answer == "Attribute: `data-book`; Meaning: The book's slug. [1]"
    assert "|" not in answer


def test_a_nested_list_item_comes_with_the_item_it_belongs_to():
    text = ("Options of the plugin:\n\n"
            "- `lastVersion`: which version the docs route shows.\n"
            "  - Tip: point it at the current version for a major that is patched all the time.\n"
            "- `onlyIncludeVersions`: the versions to deploy.\n"
            "  - Tip: limit previews to 2 or 3 versions so that they build faster.\n"
            "- `versions`: each version's label and path.\n"
            "  - Tip: label the next version as unreleased.\n")
    answer = compose_extractive("Why would previews build faster with fewer versions?",
                                [SimpleNamespace(text=text, heading_path="Docs > Versioning", score=0.9)])
    assert "   - Tip: limit previews to 2 or 3 versions" in answer, answer
    assert answer.index("`onlyIncludeVersions`") < answer.index("Tip: limit previews"), answer
    assert "lastVersion" not in answer


def test_the_selected_passage_is_not_given_back_as_the_answer():
    from chat.pipeline.generation import ExtractiveGenerator, GenerationInput

    selected = ("Each locale is a distinct standalone application: it is not possible to start all locales at the "
                "same time.")
    text = (f"Warning: {selected} To run the French site alone on your machine, use npm run start -- --locale fr.")
    pieces = ExtractiveGenerator().stream(GenerationInput(
        question="So how do I run the French one on my machine?", selected_text=selected,
        excerpts=[Excerpt(1, "Docs > i18n", text, 0.9)]), budget_seconds=5)
    answer = "".join(pieces)
    assert answer.startswith("To run the French site alone"), answer
