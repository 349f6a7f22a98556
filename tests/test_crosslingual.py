"""Questions asked in another language than the book's (issue 76): the language told offline, answered from the
English manual with the book's own words under a label in the reader's language, refusals worded whole in it, and
the Answer's ``language`` and ``book_language`` in the API and its schema.

The answering tests ask the bundled manual, ingested once per session (``manual_book``); its cross-lingual scope
threshold is measured on the first cross-lingual question (``chat.pipeline.calibration.crosslingual_threshold``).
"""

from __future__ import annotations

import json
import re

import pytest

from chat.pipeline import wording
from chat.pipeline.answerability import crosslingual_terms
from chat.pipeline.answering import answer_question
from chat.pipeline.confidence import LEVEL_NOTES
from chat.pipeline.crosslingual import moved, offsets, pairs
from chat.pipeline.generation import Excerpt, ExtractiveGenerator, GenerationInput, OpenAIChatGenerator
from chat.pipeline.grounding import check_grounding
from chat.pipeline.language import SUPPORTED, book_language, detect, locale_name, prose
from chat.pipeline.questions import AskRequest
from chat.pipeline.retrieval import UNIT_WEIGHT, with_best_unit

MANUAL = "bookchat-manual"


# -- telling the language ----------------------------------------------------------------------
@pytest.mark.parametrize(("question", "language"), [
    ("¿Cómo añado un libro nuevo desde una carpeta?", "es"),
    ("میں نئی کتاب کیسے شامل کروں؟", "ur"),
    ("如何添加一本新书？", "zh"),
    ("كيف أضيف كتابًا جديدًا؟", "ar"),
    ("मैं नई किताब कैसे जोड़ूँ?", "hi"),
    ("Comment ajouter un nouveau livre ?", "fr"),
    ("Como adiciono um livro novo a partir de uma pasta?", "pt"),
    ("How do I add a new book from a folder?", "en"),
    ("Docusaurus کس قسم کا ٹول ہے؟", "ur"),  # a product name in Latin letters inside Urdu
    ("我想把设置放进 docusaurus.config.js，应该放在哪里？", "zh"),
])
def test_the_language_of_a_question_is_told(question, language):
    assert detect(question, hint="en") == language


@pytest.mark.parametrize("question", [
    "", "   ", "🙂🙂🙂", "docusaurus build", "`npm run build`", "trailingSlash?", "docusaurus.config.js customFields",
    "```\npip install bookchat\n```", "¿Cómo?", "Hola",
], ids=["empty", "blank", "emoji", "command", "code-span", "identifier", "config", "fence", "one-word", "greeting"])
def test_short_or_code_only_questions_are_taken_to_be_in_the_books_language(question):
    assert detect(question, hint="es") == "es" and detect(question, hint="en") == "en"


def test_bad_input_to_detection_is_an_answer_not_an_error():
    assert detect(None, hint="fr") == "fr"  # type: ignore[arg-type]
    assert detect("Wie installiere ich das Buch auf meinem Rechner?", hint="de") == "de", "a book outside SUPPORTED"
    assert detect("¿Cuál es la capital de Australia? " * 5000, hint="en") == "es", "a huge question is read in part"
    assert detect("Hello こんにちは 🙂 мир", hint="en") in SUPPORTED
    assert prose("Run `make test` at https://example.org/x then edit docs/index.md") == "Run at then edit"


def test_a_books_language_comes_from_its_language_or_locale():
    class Book:
        language, locale = "", "zh-Hans"

    assert book_language(Book()) == "zh" and locale_name("zh") == "zh_Hans"
    Book.language = "es"
    assert book_language(Book()) == "es" and book_language(object()) == "en"


def test_only_names_numbers_and_code_as_the_book_writes_them_are_specific_terms():
    assert crosslingual_terms("¿Cuándo ejecuto Docusaurus en GitHub Pages con Node 18?", "en") == [
        "docusaurus", "github", "pages", "node", "18"]
    assert crosslingual_terms("如何在 Docusaurus 中添加 Mailchimp 表单？", "en") == ["docusaurus", "mailchimp"]
    assert crosslingual_terms("¿Qué hago si la Búsqueda falla?", "en") == [], "the reader's words are no names"


def test_the_language_offsets_move_a_question_to_the_books_language():
    found = offsets()
    assert set(found) == {row[0] for row in pairs()} >= {"es", "ur", "zh", "fr", "ar", "hi", "pt"}
    vector = found["es"] * 0 + 1.0
    assert abs(float((moved(vector, "es", "en") ** 2).sum()) - 1.0) < 1e-5
    assert (moved(vector, "en", "en") == moved(vector, "de", "en")).all(), "no offset without translations"


def test_a_cross_lingual_candidate_ranks_by_its_passage_and_its_best_sentence():
    def candidate(cid, similarities):
        return type("Candidate", (), {"id": cid, "sentence_similarities": similarities})()

    dense = {"broad": 0.85, "precise": 0.84, "unembedded": 0.83}
    blended = with_best_unit(dense, [candidate("broad", [0.80, 0.81]), candidate("precise", [0.70, 0.90]),
                                     candidate("unembedded", None)])
    assert blended["broad"] == pytest.approx((1 - UNIT_WEIGHT) * 0.85 + UNIT_WEIGHT * 0.81)
    assert blended["precise"] > blended["broad"]  # one sentence that says it outweighs a passage about it
    assert "unembedded" not in blended  # a passage without current sentence vectors keeps its own cosine


def test_messages_are_worded_in_the_readers_language_and_fall_back_to_english():
    assert wording.book_language_label("en", "es") == "El libro está en inglés; esto es lo que dice:"
    assert wording.book_language_label("en", "de").startswith("The book is in"), "no catalogue: English"
    assert wording.names_or(["“a”", "“b”", "“c”"], "fr") == "“a”, “b” ou “c”"
    for language in ("es", "ur", "zh", "ar", "hi", "fr", "pt"):
        said = wording.say(wording.NOT_COVERED, language, question="Q?", title="T")
        assert "Q?" in said and "T" in said and "isn't covered" not in said, language


# -- answering -----------------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(("question", "language", "label"), [
    ("¿Cómo ingiero una carpeta con las páginas del libro?", "es", "El libro está en inglés; esto es lo que dice:"),
    ("میں کتاب کے صفحات والا فولڈر کیسے ingest کروں؟", "ur", "کتاب انگلش میں ہے؛ یہ وہ ہے جو کتاب کہتی ہے:"),
])
def test_a_question_in_another_language_is_answered_from_the_book_with_a_label_in_it(manual_book, no_llm, question,
                                                                                      language, label):
    answer = answer_question(AskRequest(question=question, book=MANUAL))
    assert not answer.refused, answer.answer
    assert answer.language == language and answer.book_language == "en"
    assert answer.answer.startswith(label) or f"\n\n{label}\n\n" in answer.answer
    assert answer.sources and re.search(r"\[\d+\]", answer.answer), "the book's own words, cited"
    assert answer.confidence_level in ("medium", "unsure"), "never high across languages"
    note = LEVEL_NOTES[answer.confidence_level]
    assert answer.confidence_note == wording.level_note(note, language) != note


@pytest.mark.django_db
def test_an_off_topic_question_in_spanish_is_refused_in_spanish(manual_book, no_llm):
    answer = answer_question(AskRequest(question="¿Cuál es la mejor receta de galletas con chispas de chocolate?",
                                        book=MANUAL))
    assert answer.refused and answer.refusal_reason == "not_covered" and answer.language == "es"
    assert answer.answer.startswith("«¿Cuál es la mejor receta") and "no se trata en" in answer.answer
    assert "isn't covered" not in answer.answer and "The sections below" not in answer.answer
    assert answer.suggestions


@pytest.mark.django_db
def test_the_api_sends_the_questions_language_and_the_books_and_the_schema_says_so(client, manual_book, no_llm):
    response = client.post("/api/v1/ask", data=json.dumps({"book": MANUAL, "question": "如何导入一个文件夹里的书页？"}),
                           content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["language"] == "zh" and body["book_language"] == "en"
    english = client.post("/api/v1/ask", data=json.dumps({"book": MANUAL, "question": "How do I ingest a folder?"}),
                          content_type="application/json").json()
    assert english["language"] == "en" and english["book_language"] == "en"
    answer = client.get("/api/v1/schema?format=json").json()["components"]["schemas"]["Answer"]
    assert {"language", "book_language"} <= set(answer["properties"])
    assert "base tag" in answer["properties"]["language"]["description"]


def test_an_answer_in_the_readers_language_is_grounded_by_meaning_not_shared_words():
    source = ("To uninstall mdBook, run the command cargo uninstall mdbook. The binary is then removed from your "
              "Cargo bin folder.")
    faithful = "Para desinstalar mdBook, ejecuta el comando cargo uninstall mdbook [1]."
    invented = "El libro recomienda hornear el pan dos veces a fuego lento antes de servirlo [1]."
    assert check_grounding(faithful, [source], across_languages=True).passed
    report = check_grounding(invented, [source], across_languages=True)
    assert not report.passed and report.unsupported_sentences
    assert not check_grounding(faithful, [source]).passed, "by shared words a translation is unsupported"


def test_a_language_model_is_asked_to_answer_in_the_readers_language(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_MODEL": "m",
                         "LLM_API_KEY": "k"}
    excerpts = [Excerpt(1, "Guide > Install", "Run `pip install bookchat`.")]
    asked = OpenAIChatGenerator().messages(GenerationInput(question="¿Cómo lo instalo?", excerpts=excerpts,
                                                           language=wording.language_name("es", "en")))
    assert "Write the answer in Spanish" in asked[-1]["content"]
    same = OpenAIChatGenerator().messages(GenerationInput(question="How do I install it?", excerpts=excerpts))
    assert "Write the answer in" not in same[-1]["content"]


def test_an_extractive_answer_across_languages_adds_the_next_sentences_by_meaning_not_shared_words():
    excerpts = [Excerpt(1, "Guide > Deploy", "The site is built into the build folder by the build command. Any "
                        "static host can serve that folder as it is.", 0.9, [0.90, 0.86]),
                Excerpt(2, "Guide > Hosting", "GitHub Pages serves the folder from the gh-pages branch of the "
                        "repository.", 0.8, [0.88])]
    question = "¿Dónde se publica el sitio una vez construido?"

    def answer(language: str) -> str:
        data = GenerationInput(question=question, excerpts=excerpts, language=language)
        return "".join(ExtractiveGenerator().stream(data, budget_seconds=1))

    across = answer(wording.language_name("es", "en"))
    assert across.startswith("The site is built") and "GitHub Pages serves the folder" in across
    assert "GitHub Pages" not in answer(""), "by shared words (none) nothing is added"


def test_a_plainly_english_question_to_an_english_book_is_told_without_loading_the_model():
    from chat.pipeline import language

    language._loaded.clear()
    assert language.detect("How do I add the widget to my site?", hint="en") == "en"
    assert language._loaded == [], "the model was loaded for plain English"
    assert language.detect("¿Cómo añado el widget de la página a mi sitio?", hint="en") == "es"
    assert len(language._loaded) == 1
    # Spanish written without accents, with words English shares ("a", "no"), still goes to the model.
    assert language.detect("Como instalo el sitio en un servidor nuevo", hint="en") == "es"



def test_threads_asking_their_first_questions_together_load_the_detector_once(monkeypatch):
    """20 streams opened at once on a fresh worker: one load, the others wait for it (not 20 loads in turn)."""
    import threading

    import py3langid.langid

    from chat.pipeline import language

    language._loaded.clear()
    loads, real = [], py3langid.langid.LanguageIdentifier.from_modelpath

    def counted(*args, **kwargs):
        loads.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(py3langid.langid.LanguageIdentifier, "from_modelpath", counted)
    start = threading.Barrier(8)

    def ask():
        start.wait()
        language.detect("¿Cómo creo una clave de API para el widget?", hint="en")

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and len(language._loaded) == 1
