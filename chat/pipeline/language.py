"""The language a question is asked in, told offline, and the language of the book it is asked of.

``detect`` gives a lower-case BCP 47 base tag (``SUPPORTED``: en, es, ur, zh, ar, hi, fr, pt) or, when it can't
tell, the hint it was given (the book's language): a question too short to judge ("docusaurus build?", a bare
``trailingSlash``), made only of code, or one the detector is unsure of is taken to be in the book's language, so
a question the pipeline can't place is answered as it always was.

Decisions:
- py3langid (langid.py's model, shipped inside the wheel, nothing downloaded at run time), restricted to
  ``SUPPORTED``. Measured on 322 questions (our translated development sets and their English originals, plus
  short ones in Portuguese, Arabic and Hindi; BENCHMARKS.md, "Questions in other languages"): py3langid placed
  every one, in 0.1 ms each; lingua-language-detector missed 8 (an Urdu, Arabic or Hindi question with a product
  name in it taken for English; short Portuguese taken for Spanish) in 7 ms each.
- What is read is the question's prose: code spans, fenced blocks, URLs, paths and identifiers (words with inner
  dots, slashes or underscores, or mixed case) are dropped first, since they are the book's words whatever the
  reader's language.
- A book in a language outside ``SUPPORTED`` has its questions taken to be in its language: the detector, told
  only the supported ones, would otherwise call a German question French.
- Loaded once per process, on first use (about a second). A question to an English book whose prose is a
  quarter or more English function words that no other supported language writes ("how", "the", "does", "which")
  is English without asking the model: most questions, and most processes never load it (measured on our translated
  sets: 217 of their 244 English questions decided so, none of the 244 others).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from pathlib import Path

SUPPORTED = ("en", "es", "ur", "zh", "ar", "hi", "fr", "pt")
DEFAULT = "en"
MIN_LATIN_WORDS = 3  # fewer words of prose in Latin script than this: too short to tell English from Spanish
MIN_PROBABILITY = 0.6  # the detector's own probability below which the hint wins
MAX_CHARS = 2000  # what the detector reads of a long question
# Django's locale directory names where they differ from the base tag.
LOCALE_DIRS = {"zh": "zh_Hans"}

_CODE = re.compile(r"```.*?(?:```|$)|`[^`]*`|https?://\S+", re.DOTALL)
# Identifiers, paths and numbers, in ASCII only (a Chinese sentence has no spaces to end them).
_IDENTIFIER = re.compile(r"[!-~]*[./_\\=<>{}\[\]#@$][!-~]*[A-Za-z0-9][!-~]*"
                         r"|(?<![A-Za-z])[a-z]+[A-Z][A-Za-z0-9]*|(?<![A-Za-z0-9])[A-Za-z0-9]*\d[A-Za-z0-9]*")
_LATIN_WORD = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿĀ-ſ]{2,}")
_lock = threading.Lock()
# English function words that Spanish, French and Portuguese don't write as words ("a", "do", "on", "in"… they do).
ENGLISH_WORDS = frozenset((
    "the", "is", "are", "was", "were", "does", "did", "how", "what", "which", "where", "when", "why", "who", "can",
    "could", "should", "would", "will", "my", "your", "you", "it", "its", "this", "that", "these", "those", "with",
    "from", "by", "for", "and", "or", "of", "to", "be", "been", "have", "has", "there", "their", "they", "if", "not",
    "any", "about", "into", "than", "then"))
ENGLISH_SHARE = 0.25  # from this share of the prose's words, with two of them at least, a question is English


_loaded: list = []  # py3langid's identifier, once loaded


def _identifier():
    """py3langid's model, restricted to the supported languages: loaded once per process. The lock is taken only
    while nothing is loaded, and the check is made again inside it, so that the threads of a worker asking their
    first questions together wait for one load (an ``lru_cache`` around a locked load let each of them load it
    again in turn: 20 streams at once, 20 loads, every answer past its deadline)."""
    if not _loaded:
        with _lock:
            if not _loaded:
                import py3langid.langid as module  # noqa: PLC0415 (its model is read on first use)
                from py3langid.langid import MODEL_FILE, LanguageIdentifier  # noqa: PLC0415

                identifier = LanguageIdentifier.from_modelpath(Path(module.__file__).parent / MODEL_FILE,
                                                               norm_probs=True)
                identifier.set_languages(list(SUPPORTED))
                _loaded.append(identifier)
    return _loaded[0]


def warm_in_background() -> None:
    """Load the model on a thread of its own, so that a web worker has it before a class's first questions arrive
    together (loading takes a second alone, several under a burst of requests holding the interpreter)."""
    threading.Thread(target=_identifier, name="language-detector", daemon=True).start()


def prose(text: str) -> str:
    """The question without what is written the same in every language: code, URLs, paths and identifiers."""
    text = _CODE.sub(" ", unicodedata.normalize("NFC", text[:MAX_CHARS]))
    return " ".join(_IDENTIFIER.sub(" ", text).split())


def _non_latin_letters(text: str) -> int:
    return sum(1 for ch in text if ch.isalpha() and ord(ch) > 0x24F)


def normalise(tag: str | None) -> str | None:
    """A language tag as a supported base tag ("es-MX" → "es", "zh-Hans" → "zh"), or None."""
    if not tag:
        return None
    base = re.split(r"[-_]", tag.strip().lower(), maxsplit=1)[0]
    return base or None


def detect(text: str, *, hint: str | None = None) -> str:
    """The language ``text`` is written in (a ``SUPPORTED`` base tag), or ``hint`` (else English) when it is too
    short, only code, or the detector is unsure."""
    fallback = normalise(hint) or DEFAULT
    if not isinstance(text, str) or fallback not in SUPPORTED:  # a book in another language: its questions too
        return fallback
    body = prose(text)
    non_latin = _non_latin_letters(body)
    words = _LATIN_WORD.findall(body)
    if not non_latin and len(words) < MIN_LATIN_WORDS:
        return fallback
    if fallback == "en" and not non_latin and _plainly_english(words):
        return "en"
    language, probability = _identifier().classify(body)
    if probability < MIN_PROBABILITY and not non_latin:
        return fallback
    return language


def _plainly_english(words: list[str]) -> bool:
    english = sum(1 for word in words if word.lower() in ENGLISH_WORDS)
    return english >= 2 and english >= ENGLISH_SHARE * len(words)


def book_language(book) -> str:
    """The book's language as a base tag: its ``language`` field where the model has one, else its locale, else
    English."""
    for value in (getattr(book, "language", None), getattr(book, "locale", None)):
        tag = normalise(value)
        if tag:
            return tag
    return DEFAULT


def locale_name(language: str) -> str:
    """The Django locale (directory) name for a base tag: ``zh`` → ``zh_Hans``."""
    return LOCALE_DIRS.get(language, language)
