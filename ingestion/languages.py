"""A book's language, and the text search its passages get from it.

A language is kept as a lower-case BCP 47 base tag (``en``, ``es``, ``zh``, ``pt``): ``language_tag`` reads what
an author wrote (``pt-BR``, ``zh_Hans``, ``ES``) down to it, and refuses a tag naming no language Django knows
(its ``LANG_INFO``), so that a typo on the command line, in the publish API or in the upload form is an error,
never a book silently stemmed as English.

Text search: a language PostgreSQL has a configuration for gets it (``spanish``, ``portuguese``, …). Chinese and
Japanese, written without spaces, get ``bookchat_cjk`` (a copy of ``simple`` made by a migration): their runs of
ideographs and kana are cut into overlapping character pairs before PostgreSQL's parser sees them (the SQL function
``bookchat_to_tsvector``, used by the passages' search vector and by every query alike), so "请求体" matches
"请求" and "求体"; measured on the Chinese FastAPI book (BENCHMARKS.md) against ``simple``, where a whole clause is
one "word" and the lexical side finds next to nothing. Any other language gets ``simple``: no stemming, no stop
words, words still matched as written.
"""

from __future__ import annotations

import re

from django.conf.locale import LANG_INFO

from bookchat.base.errors import BookchatError

DEFAULT_LANGUAGE = "en"
# PostgreSQL's built-in text-search configurations, by language.
SEARCH_CONFIGS = {
    "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "da": "danish", "nl": "dutch",
    "en": "english", "fi": "finnish", "fr": "french", "de": "german", "el": "greek", "hi": "hindi",
    "hu": "hungarian", "id": "indonesian", "ga": "irish", "it": "italian", "lt": "lithuanian", "ne": "nepali",
    "no": "norwegian", "nb": "norwegian", "nn": "norwegian", "pt": "portuguese", "ro": "romanian",
    "ru": "russian", "sr": "serbian", "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish",
    "yi": "yiddish",
}
# Languages written without spaces between words: their text is searched by character pairs.
NGRAM_CONFIG = "bookchat_cjk"
NGRAM_LANGUAGES = frozenset({"zh", "ja"})
FALLBACK_CONFIG = "simple"
LANGUAGE_LENGTH = 16  # Book.language's max_length
_TAG = re.compile(r"^([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]{1,8})*$")
KNOWN_LANGUAGES = frozenset(code.split("-")[0] for code in LANG_INFO) | frozenset(SEARCH_CONFIGS)


class LanguageError(BookchatError):
    """A language tag that names no language."""

    def __init__(self, message: str):
        super().__init__(message, code="bad_language")


def language_tag(value: str | None) -> str:
    """The lower-case base tag of ``value`` (``pt-BR`` → ``pt``, ``zh_Hans`` → ``zh``); a ``LanguageError`` when it
    is not a BCP 47 tag or names no known language."""
    text = (value or "").strip()
    match = _TAG.match(text)
    if match is None or match.group(1).lower() not in KNOWN_LANGUAGES:
        raise LanguageError(f"{text!r} is not a language bookchat knows: give a BCP 47 tag such as en, es, zh, pt "
                            "or pt-BR")
    return match.group(1).lower()


def language_or_default(value: str | None, default: str = DEFAULT_LANGUAGE) -> str:
    """``language_tag`` of a config's value, ``default`` when it is missing or names no language (a site's config
    is read leniently: what can't be read is not an error)."""
    try:
        return language_tag(value) if value else default
    except LanguageError:
        return default


def search_config_for(language: str | None) -> str:
    """The text-search configuration of a book in ``language`` (a tag or a locale): english for a book without
    one, the language's own where PostgreSQL has it, ``bookchat_cjk`` for Chinese and Japanese, else ``simple``."""
    if not language:
        return SEARCH_CONFIGS[DEFAULT_LANGUAGE]
    base = language.lower().replace("_", "-").split("-")[0]
    if base in NGRAM_LANGUAGES:
        return NGRAM_CONFIG
    return SEARCH_CONFIGS.get(base, FALLBACK_CONFIG)
