"""The student-facing pages in the reader's language, without a browser: from Accept-Language, from the page's
switch (its cookie), English for a language bookchat has no catalogue for; right to left in Urdu and Arabic; the
admin and the API in English whatever the browser says; the widget's catalogue endpoint, bad input included.
The pages and the widget driven in Chromium: test_i18n_browser.py."""

from __future__ import annotations

import json
import re

import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.utils import translation

from bookchat.base import catalogues
from bookchat.base.languages import django_code, first_spoken
from chat.channels.page import LEVEL_LABELS

pytestmark = pytest.mark.django_db

BOOK = "bookchat-manual"


@pytest.fixture(scope="module", autouse=True)
def compiled():
    catalogues.compile_all()  # make test compiles them first; a bare pytest run too


@pytest.fixture(autouse=True)
def page_settings(manual_book, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "ANONYMOUS_API": "false"}


def html_tag(html: str) -> str:
    return re.search(r"<html[^>]*>", html).group(0)


def page(client: Client, language: str | None = None, path: str = f"/?book={BOOK}") -> str:
    headers = {"Accept-Language": language} if language else {}
    response = client.get(path, headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_speaks_spanish_to_a_spanish_browser(client):
    html = page(client, "es-MX,es;q=0.9,en;q=0.5")
    assert html_tag(html) == '<html lang="es" dir="ltr">'
    assert '<label for="question">Tu pregunta</label>' in html and '<label for="search-box">Buscar en el libro' in html
    assert '<option value="es" lang="es" selected>Español</option>' in html, "the switch shows the language in force"
    messages = json.loads(re.search(r'<script id="bookchat-messages" type="application/json">(.*?)</script>',
                                    html, re.S).group(1))
    assert messages["Copy"] == "Copiar", "chat.js gets its strings in the page's language"


def test_the_page_is_right_to_left_in_urdu_and_arabic(client):
    for accept, lang, word in (("ur-PK,ur", "ur", "آپ کا سوال"), ("ar", "ar", "سؤالك")):
        html = page(client, accept)
        assert html_tag(html) == f'<html lang="{lang}" dir="rtl">'
        assert word in html


def test_chinese_from_any_of_its_simplified_tags(client):
    for accept in ("zh-CN", "zh", "zh-Hans-CN"):
        assert html_tag(page(Client(), accept)) == '<html lang="zh-hans" dir="ltr">', accept
    assert django_code("zh-TW") is None, "traditional Chinese is not served simplified"


def test_a_language_without_a_catalogue_falls_back_to_english(client):
    html = page(client, "sw-KE,sw")
    assert html_tag(html) == '<html lang="en" dir="ltr">' and '<label for="question">Your question</label>' in html
    assert html_tag(page(Client(), "sw, fr;q=0.8")) == '<html lang="fr" dir="ltr">', "the browser's next choice"
    assert html_tag(page(Client(), "x" * 5000)) == '<html lang="en" dir="ltr">', "a huge header is no language"


def test_the_switch_remembers_the_readers_choice_over_the_browsers(client):
    back = client.post("/i18n/setlang/", {"language": "ur", "next": f"/?book={BOOK}"})
    assert back.status_code == 302 and back["Location"] == f"/?book={BOOK}"
    html = page(client, "es")
    assert html_tag(html) == '<html lang="ur" dir="rtl">', "the cookie wins over Accept-Language"
    refused = client.post("/i18n/setlang/", {"language": "<script>", "next": "https://elsewhere.example/"})
    assert refused["Location"] == "/", "no unknown language set, no redirect off the site"
    assert html_tag(page(client)) == '<html lang="ur" dir="rtl">'


def test_privacy_handoff_and_unavailable_pages_follow_the_reader(client):
    assert "Privacidad y datos" in page(client, "es", "/privacy/")
    assert html_tag(page(client, "ar", "/privacy/")) == '<html lang="ar" dir="rtl">'
    missing = client.get("/api/v1/handoffs/" + "a" * 32, headers={"Accept-Language": "fr", "Accept": "text/html"})
    assert missing.status_code == 404
    assert "Votre question à l’équipe pédagogique" in missing.content.decode()
    with translation.override("ur"):
        unavailable = render_to_string("bookchat/unavailable.html", {"message": "the database is down"})
    assert '<html lang="ur" dir="rtl">' in unavailable and "bookchat دستیاب نہیں ہے" in unavailable


def test_the_admin_and_the_api_stay_english(client):
    admin = client.get("/admin/login/", headers={"Accept-Language": "es"})
    assert 'lang="en"' in admin.content.decode() and "Content-Language" not in admin
    api = client.get("/api/v1/nothing-here", headers={"Accept-Language": "es"})
    assert "there is no API endpoint" in api.json()["message"] and "Content-Language" not in api


def test_an_answers_labels_are_in_the_readers_language_and_its_text_keeps_its_own_direction():
    turn = {"answer_id": "00000000-0000-0000-0000-000000000001", "question": "¿Cómo creo una clave?",
            "answer_html": "<p>Run manage.py apikey.</p>", "sources": [], "refused": False, "level": "high",
            "level_label": LEVEL_LABELS["high"], "level_note": "", "language": "es", "book_language": "en",
            "feedback": None, "handoff_prominent": False}
    with translation.override("es"):
        html = render_to_string("bookchat/_turn.html", {"turn": turn, "handoff_form": {"note_max_chars": 500}})
    assert "Confianza alta" in html and "Preguntaste" in html and "¿Te ha sido útil esta respuesta?" in html
    assert '<div class="answer-text" dir="auto" lang="es">' in html
    with translation.override("ur"):
        assert str(LEVEL_LABELS["medium"]) == "درمیانہ اعتماد"


# -- the widget's catalogue ----------------------------------------------------------------------------------


def catalogue(client: Client, lang: str):
    response = client.get("/api/v1/interface", {"lang": lang}, headers={"Origin": "https://docs.example.org"})
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == "*", "readable by the widget on any site, without a key"
    assert "Access-Control-Allow-Credentials" not in response, "and without cookies"
    return response.json()


def test_the_widget_gets_its_strings_in_the_readers_language(client):
    urdu = catalogue(client, "ur-PK,en")
    assert urdu["language"] == "ur" and urdu["dir"] == "rtl"
    assert urdu["messages"]["Ask the book"] == "کتاب سے پوچھیں"
    assert {"code": "zh", "name": "中文", "dir": "ltr"} in urdu["languages"]
    spanish = catalogue(client, "sw,es-419")
    assert spanish["language"] == "es" and spanish["messages"]["Send"] == "Enviar"


def test_the_widget_catalogue_falls_back_to_english_on_anything_else(client):
    for lang in ("", "sw", "en-GB", "es'); alert(1)//", "<script>", "x" * 100_000, "," * 400 + "es", "\x00"):
        body = catalogue(client, lang)
        assert body["language"] == "en" and body["messages"] == {} and body["dir"] == "ltr", lang[:40]
        assert "alert" not in json.dumps(body) and "script" not in json.dumps(body), "the input is never echoed"
    assert first_spoken("sw," * 7 + "es") == "es", "the eighth choice still counts"
    assert first_spoken("sw," * 8 + "es") == "en", "but no further"


def test_the_widget_catalogue_takes_only_get(client):
    assert client.post("/api/v1/interface?lang=es").status_code == 405
