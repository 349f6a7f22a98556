"""The page and the widget in the student's language, in Chromium: a browser set to Urdu gets the chat page and the
widget right to left with Urdu labels, asks in Urdu, switches to Spanish (the page's switch, the widget's) and asks
in Spanish, about the bundled manual; axe-core finds no WCAG 2.1 A/AA violation in any of these states.

Each question is answered from the English manual, not refused: the answer text's ``lang`` is the question's (the
pipeline's ``language``), it opens with the label in the student's language ("The book is in English; here is what
it says:", ``chat.pipeline.wording``), and the book's passage is cited. The fixtures are test_browser.py's; axe
runs as test_accessibility.py runs it. Chromium and axe: `make drills`.
"""

# ruff: noqa: F811 (the fixtures imported from test_browser are this module's test arguments)
from __future__ import annotations

import pytest

from bookchat.base import catalogues
from chat.pipeline import wording
from tests.test_accessibility import WIDGET, assert_accessible
from tests.test_browser import (  # noqa: F401 (the real-browser fixtures)
    BOOK,
    ask_widget,
    browser,
    browser_settings,
    database_open,
    open_docs,
    open_page,
    servers,
    widget_key,
)

pytestmark = [pytest.mark.slow, pytest.mark.needs("browser"), pytest.mark.drill]

URDU_QUESTION = "ویجٹ کے لیے API کلید کیسے بناؤں؟"
SPANISH_QUESTION = "¿Cómo creo una clave de API para el widget?"
IN_THE_WIDGET = "document.getElementById('bookchat-widget').shadowRoot"


@pytest.fixture(scope="module", autouse=True)
def compiled():
    catalogues.compile_all()


def html_language(page) -> tuple[str, str]:
    return tuple(page.evaluate("[document.documentElement.lang, document.documentElement.dir]"))


def ask_on_page(page, question: str) -> None:
    answered = page.locator("article.turn:not(.pending)").count()
    page.fill("#question", question)
    page.press("#question", "Enter")
    page.wait_for_function("n => document.querySelectorAll('article.turn:not(.pending)').length > n", arg=answered)


def check_page_answer(page, language: str, you_asked: str) -> None:
    """The last turn labelled in the reader's language; in the question's, with the book cited, when the pipeline
    says which language the answer is in."""
    turn = page.locator("article.turn").last
    assert turn.locator(".question .who").text_content() == you_asked  # (shown upper-case by the style sheet)
    text = turn.locator(".answer-text")
    assert text.get_attribute("dir") == "auto"
    assert text.get_attribute("lang") == language, "the answer in the question's language"
    assert turn.locator(".answer.refused").count() == 0, "answered from the book"
    assert wording.book_language_label("en", language) in text.inner_text(), text.inner_text()
    assert turn.locator(".source").count() >= 1, "with the book's passage"


def test_the_page_in_urdu_then_spanish_asked_in_each(servers, open_page):
    bookchat, _ = servers
    page, errors = open_page(f"{bookchat.url}/?book={BOOK}", locale="ur-PK")
    assert html_language(page) == ("ur", "rtl")
    assert page.locator("label[for=question]").inner_text() == "آپ کا سوال"
    assert page.evaluate("getComputedStyle(document.querySelector('.lede')).direction") == "rtl"
    assert_accessible(page, "the page in Urdu")
    ask_on_page(page, URDU_QUESTION)
    check_page_answer(page, "ur", "آپ نے پوچھا")
    assert_accessible(page, "the page in Urdu, answered")

    page.select_option("#language-select", "es")
    page.locator(".language-switch button").click()
    page.wait_for_function("document.documentElement.lang === 'es'")
    assert html_language(page) == ("es", "ltr")
    assert page.locator("#ask-button").inner_text() == "Preguntar"
    ask_on_page(page, SPANISH_QUESTION)
    check_page_answer(page, "es", "Preguntaste")
    assert_accessible(page, "the page in Spanish, answered")
    assert errors == []


def check_widget_answer(page, language: str) -> None:
    answer = page.locator(".bc-answer[data-state=done]").last
    answer.wait_for()
    badge = answer.locator(".bc-badge").inner_text()
    labels = catalogues.read(catalogues.Domain("bookchat", "djangojs", ()).po(
        {"ur": "ur", "es": "es"}[language]))
    translated = {message.string for message in labels if message.id in (
        "High confidence", "Medium confidence", "Low confidence", "Not sure", "Not covered", "Not answered directly")}
    assert badge in translated, f"the level or refusal label in the reader's language: {badge!r}"
    text = answer.locator(".bc-answer-text")
    assert text.get_attribute("lang") == language, "the answer in the question's language"
    assert answer.get_attribute("data-refused") != "true" and answer.locator(".bc-sources a").count() >= 1
    assert wording.book_language_label("en", language) in text.inner_text(), text.inner_text()


def test_the_widget_in_urdu_then_spanish_asked_in_each(servers, open_page, widget_key):
    _, docs = servers
    page, errors = open_docs(open_page, docs, widget_key(docs.origin), locale="ur-PK")
    root = page.locator(".bc-root")
    assert (root.get_attribute("lang"), root.get_attribute("dir")) == ("ur", "rtl")
    assert page.locator(".bc-launcher").get_attribute("aria-label") == "چیٹ کھولیں"
    page.locator(".bc-launcher").click()
    assert page.evaluate(f"getComputedStyle({IN_THE_WIDGET}.querySelector('.bc-panel')).direction") == "rtl"
    assert_accessible(page, "the widget in Urdu, open", WIDGET)
    ask_widget(page, URDU_QUESTION)
    check_widget_answer(page, "ur")
    assert_accessible(page, "the widget in Urdu, answered", WIDGET)

    page.locator(".bc-language-select").select_option("es")
    page.wait_for_function(f"{IN_THE_WIDGET}.querySelector('.bc-root').lang === 'es'")
    assert page.locator(".bc-root").get_attribute("dir") == "ltr"
    assert page.locator(".bc-send").inner_text() == "Enviar" and page.locator(".bc-panel").is_visible()
    assert page.evaluate("localStorage.getItem('bookchat:language')") == "es", "remembered for the next visit"
    ask_widget(page, SPANISH_QUESTION)
    check_widget_answer(page, "es")
    assert_accessible(page, "the widget in Spanish, answered", WIDGET)

    page.reload()  # the choice outlives the page, over the browser's Urdu
    page.locator(".bc-launcher").wait_for()
    assert page.locator(".bc-root").get_attribute("lang") == "es"
    assert errors == []
