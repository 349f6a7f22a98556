"""Books in other languages (``ingestion.languages``): the language read from mkdocs.yml and book.toml or given with
``--language`` (and refused when it names none, at every door), the text search it picks, a Spanish book stemmed as
Spanish and a Chinese one found by its character pairs. Two tiny fixture books under tests/data, embedded for real."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from bench.book_languages import PAIRS, questions_file
from chat.pipeline.lexical import bm25_search, query_lexemes
from chat.pipeline.terms import normalise
from chat.quality.evaluation import load_questions
from ingestion.api.contract import PublishQuerySerializer
from ingestion.indexing.ingesting import index_path
from ingestion.languages import LanguageError, language_tag, search_config_for
from ingestion.models import Book, Chunk
from ingestion.reading.mdbook import read_mdbook
from ingestion.reading.mkdocs import read_mkdocs
from ingestion.uploads.forms import UploadForm
from tests.support.shared_data import SHARED_DATA

DATA = Path(__file__).resolve().parent / "data"
SPANISH = DATA / "mkdocs_es"
CHINESE = DATA / "mdbook_zh"


@pytest.fixture
def small_passages(settings):
    """A passage per section (the fixtures' sections are short)."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "CHUNK_TARGET_TOKENS": 20, "CHUNK_MIN_TOKENS": 1,
                         "CHUNK_OVERLAP_TOKENS": 0}


@pytest.mark.parametrize(("given", "tag"), [("es", "es"), ("pt-BR", "pt"), ("zh_Hans", "zh"), (" ZH-cn ", "zh"),
                                            ("ur", "ur"), ("en-GB", "en")])
def test_a_language_is_kept_as_its_base_tag(given, tag):
    assert language_tag(given) == tag


@pytest.mark.parametrize("given", ["", "xx", "klingon", "e s", "12", "en--GB", "zz-ZZ", "es;DROP"])
def test_a_tag_naming_no_language_is_refused(given):
    with pytest.raises(LanguageError, match="not a language bookchat knows"):
        language_tag(given)


def test_each_language_gets_its_text_search_configuration():
    assert [search_config_for(x) for x in ("en", "es", "pt", "fr", "de", "zh", "ja", "ur", "", "pt-BR")] == \
        ["english", "spanish", "portuguese", "french", "german", "bookchat_cjk", "bookchat_cjk", "simple", "english",
         "portuguese"]


def test_the_language_is_read_from_mkdocs_theme_language_and_book_toml():
    assert read_mkdocs(SPANISH).language == "es"
    assert read_mdbook(CHINESE).language == "zh-CN"
    assert read_mkdocs(DATA / "mkdocs_site").language == "en", "through INHERIT (base.yml)"


def test_ingest_refuses_a_language_it_does_not_know_before_reading_anything():
    err = StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("ingest", str(SPANISH), "--language", "xx-YY", stderr=err)
    assert exit_.value.code == 2
    assert "'xx-YY' is not a language bookchat knows" in err.getvalue()


def test_the_publish_api_refuses_a_language_it_does_not_know():
    bad = PublishQuerySerializer(data={"language": "klingon"})
    assert not bad.is_valid() and "not a language bookchat knows" in str(bad.errors["language"])
    good = PublishQuerySerializer(data={"language": "pt-BR"})
    assert good.is_valid(), good.errors
    assert good.validated_data["language"] == "pt"


@pytest.mark.django_db
def test_the_upload_form_refuses_a_language_it_does_not_know():
    form = UploadForm(data={"new_book_slug": "manual", "language": "elvish"})
    assert not form.is_valid()
    assert "not a language bookchat knows" in " ".join(form.errors["language"])


@pytest.mark.django_db
def test_a_spanish_mkdocs_book_is_stemmed_as_spanish_and_language_wins_over_the_config(small_passages):
    report = index_path(SPANISH, book_slug="faro")
    assert report.errors == []
    book = Book.objects.get(slug="faro")
    assert (book.language, book.search_config) == ("es", "spanish"), "theme.language: es"
    assert {"limpi", "lent"} <= set(query_lexemes("limpiar las lentes", book.pk)), "Spanish stemming"
    found = bm25_search(book_id=book.pk, text="¿Cómo se limpian las lentes?", limit=3)
    best = Chunk.objects.get(pk=max(found.scores, key=found.scores.get))
    assert "Las lentes" in best.heading_path
    index_path(SPANISH, book_slug="faro", language="pt")
    book.refresh_from_db()
    assert (book.language, book.search_config) == ("pt", "portuguese")
    assert set(Chunk.objects.filter(book=book).values_list("search_config", flat=True)) == {"portuguese"}


@pytest.mark.django_db
def test_a_chinese_book_asked_in_chinese_finds_its_passage_by_character_pairs(small_passages):
    report = index_path(CHINESE, book_slug="dengta")
    assert report.errors == []
    book = Book.objects.get(slug="dengta")
    assert (book.language, book.search_config) == ("zh", "bookchat_cjk"), "book.toml: zh-CN"
    assert {"雾号", "拉响"} <= set(query_lexemes("雾号什么时候拉响？", book.pk))
    found = bm25_search(book_id=book.pk, text="雾号什么时候拉响？", limit=3)
    best = Chunk.objects.get(pk=max(found.scores, key=found.scores.get))
    assert "雾号" in best.heading_path
    Book.objects.filter(pk=book.pk).update(search_config="simple")  # the same question, words not cut
    assert not bm25_search(book_id=book.pk, text="雾号什么时候拉响？", limit=3).scores


@pytest.mark.needs("shared-data")
@pytest.mark.parametrize("pair", PAIRS)
def test_the_fastapi_questions_quote_their_books_pages(pair):
    """Every evidence string of ``bench/questions/i18n`` is in the page it names, in the language of the book it
    is asked of (``bench.book_languages``): a question file that drifted from the books would measure nothing."""
    book_language, question_language = pair.split("/")
    questions = load_questions(questions_file(book_language, question_language))
    assert len(questions) >= 20 and {q.kind for q in questions} == {"answerable"}
    pages = SHARED_DATA / "fastapi-docs-i18n" / "docs" / book_language / "docs"
    for line in questions_file(book_language, question_language).read_text(encoding="utf-8").splitlines():
        question = json.loads(line)
        page = normalise((pages / question["doc"]).read_text(encoding="utf-8"))
        assert all(normalise(evidence) in page for evidence in question["evidence"]), question["id"]
