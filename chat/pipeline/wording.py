"""What the pipeline says to a reader in its own words, in the language the question was asked in.

Refusals (not covered, unanswerable, unsure), the withheld message, the disclaimer, the notice of a language model's
failure, the confidence levels' notes and the label that introduces an extractive answer to a question asked in
another language than the book's ("The book is in English; here is what it says:") are English msgids, translated
through Django's gettext under ``translation.override`` of the question's language, from the pipeline's own
catalogues (``chat/locale/<locale>/LC_MESSAGES/django.po``; a language without one falls back to English). A
refusal is worded whole in that language, the reader's question quoted inside it as asked; the book's title and
passages stay as the book writes them.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.utils import translation
from django.utils.translation import get_language_info, gettext, gettext_noop

from chat.pipeline.language import DEFAULT

WITHHELD = gettext_noop(
    "I couldn't answer this reliably from the book: the answer I found was not supported by the passages it cited. "
    "The sources below are the closest passages; please check them.")
LOW_CONFIDENCE = gettext_noop(
    "Low confidence: this passage is probably not what you asked. Check the cited sections before relying on it.")
UNSURE_PREFIX = gettext_noop("I'm not sure the book answers this directly. The closest passage I found says:")
NOT_COVERED = gettext_noop(
    "“%(question)s” isn't covered in “%(title)s”, so I can't answer it from the book. The sections below came "
    "closest.")
UNANSWERABLE = gettext_noop(
    "“%(title)s” doesn't mention %(names)s where it discusses this, so I can't answer “%(question)s” from the "
    "book. The sections below came closest.")
UNSURE = gettext_noop(
    "“%(title)s” doesn't seem to answer “%(question)s” directly, and rather than guess, I'll point you to the "
    "sections that came closest:")
MODEL_FAILED = gettext_noop(
    "The language model could not answer (%(reason)s), so this answer is made of the book's own sentences.")
BOOK_LANGUAGE_LABEL = gettext_noop("The book is in %(language)s; here is what it says:")
NAMES_OR = gettext_noop("%(names)s or %(last)s")
THIS = gettext_noop("this")
WHAT_IT_ASKS = gettext_noop("what it asks about")
# Django's language codes where they differ from the pipeline's base tags.
DJANGO_CODES = {"zh": "zh-hans"}
# Languages whose names are written in lower case within a sentence (Django's names are capitalised).
LOWER_CASE_NAMES = frozenset({"es", "fr", "pt"})


@contextmanager
def speaking(language: str | None):
    """Django's active language set to ``language`` (a base tag) for what is said inside."""
    with translation.override(DJANGO_CODES.get(language or DEFAULT, language or DEFAULT)):
        yield


def say(message: str, in_language: str | None, /, **values) -> str:
    """``message`` (one of this module's msgids) in ``in_language``, with ``values`` put in."""
    with speaking(in_language):
        text = gettext(message)
    return text % values if values else text


def level_note(note: str, language: str | None) -> str:
    """A confidence level's note (``confidence.LEVEL_NOTES``) in ``language``."""
    return say(note, language)


def language_name(language: str, in_language: str | None) -> str:
    """The name of ``language`` as written in ``in_language`` ("inglés" in Spanish)."""
    try:
        info = get_language_info(DJANGO_CODES.get(language, language))
    except KeyError:
        return language
    with speaking(in_language):
        name = str(info["name_translated"]).strip()
    return name[:1].lower() + name[1:] if in_language in LOWER_CASE_NAMES else name


def book_language_label(book_language: str, language: str | None) -> str:
    """The label that introduces the book's own words to a reader who asked in ``language``."""
    return say(BOOK_LANGUAGE_LABEL, language, language=language_name(book_language, language))


def names_or(names: list[str], language: str | None) -> str:
    """"a", "a or b", "a, b or c", the "or" in ``language``."""
    if len(names) == 1:
        return names[0]
    return say(NAMES_OR, language, names=", ".join(names[:-1]), last=names[-1])

