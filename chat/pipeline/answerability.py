"""Answerability: a question on the book's topic that the book does not answer is refused, from evidence.

The scope score tells "about this book" from "about something else"; it can't tell "how do
I import pages from Notion?" (on topic, answer absent) from "how do I import pages?". What
does tell them apart is the question's *specific terms*, the names and figures it asks
about: a product, a format, a number, an identifier. When the passages that would answer
(and be cited) never mention one of them, the answer the book can give is about something
else, however well the rest of the question matches.

A specific term is a word of the question written like a name (capitalised in mid-sentence,
all capitals, mixed case like ``ePub``, or with inner dots, slashes or underscores like
``.ipynb`` or ``A/B``; not a lower-case abbreviation such as "e.g.", and "UA-", an ID's prefix, is
the name ``UA``) or a number of two or more digits. It is *found* when a passage to
be cited (or the reader's selected passage) holds it, compared case-insensitively, as the
same word, with the same light stem (``notebooks`` ~ ``notebook``) or misspelt by a letter or
two ("Primier League" finds "Premier League": readers mistype names). Only what the question asks counts:
of a question in several sentences, the ones that end with a question mark ("I run Material through Docker
on Linux. How do I start the preview?" asks about the preview; the book need not name the reader's Linux).

Calibrated per book (``chat.pipeline.calibration``): the book's own pseudo-questions, cut from its
sentences with their capitals kept, go through the check too, and a book where it refuses
more than ``MAX_PROBE_REFUSALS`` of them (a book whose prose capitalises everything, say)
gets the check switched off (``ANSWERABILITY=auto``).

A question in another language than the book's (``chat.pipeline.language``) keeps only the terms it writes as
the book would (``crosslingual_terms``): names, numbers and code, split from the script around them ("安装
Docusaurus" names Docusaurus) and in the book's script; its own words, capitalised or not ("Búsqueda"), are the
reader's language, not names the book should hold, so they are never missing.

Decisions: shape, not a dictionary of rare words (nothing to ship or download, and a
lower-case paraphrase such as "exchange" or "complain" is never mistaken for a name); one
missing term is enough, because a question names few things and each is what it is about.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass, field

from chat.pipeline.terms import STOP_WORDS, split_sentences, stem

_TOKEN = re.compile(r"\d{1,3}(?:,\d{3})+|[^\s\"'“”‘’(),;:!?]+")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n\s*)$")
_EDGE = ".,;:!?'\"“”‘’()[]{}<>*`"
_ABBREVIATION = re.compile(r"(?:[a-z]\.)+[a-z]")  # e.g, i.e, a.k.a (their last dot already dropped)
MAX_PROBE_REFUSALS = 0.05
# Written in capitals, never a name: "Is it OK to commit the token?" asks nothing about an "ok".
NOT_NAMES = frozenset({"ok", "okay", "hi", "hello", "thanks", "please"})
TYPO_SIMILARITY = 0.8  # difflib ratio from which a passage word counts as the term misspelt


@dataclass
class Answerability:
    """What the check found (in an answer's retrieval figures, ``chat.pipeline.answers.RetrievalFigures``, each
    field as the API sends it)."""

    answerable: bool = True
    specific_terms: list[str] = field(default_factory=list)  # the question's specific terms
    missing_terms: list[str] = field(default_factory=list)  # those no passage to be cited holds


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def specific_terms(question: str) -> list[str]:
    """The question's words written like names or figures (see the module docstring), in order, once each."""
    found: list[str] = []
    for match in _TOKEN.finditer(question):
        token = match.group().strip(_EDGE.replace(".", "")).rstrip(".-")  # "UA-" (an ID's prefix) is UA
        if _ABBREVIATION.fullmatch(token):
            continue  # "e.g.", "i.e.": written with dots, never a name
        extension = token.startswith(".") and token[1:].isalnum()  # a file type such as .ipynb
        token = token if extension else token.lstrip(".")
        if len(token) < 2 or not any(ch.isalnum() for ch in token):
            continue
        letters = [ch for ch in token if ch.isalpha()]
        digits = sum(ch.isdigit() for ch in token)
        at_start = bool(_SENTENCE_START.search(question[:match.start()]))
        inner_mark = any(mark in token.strip(".") for mark in "./_\\") and bool(letters)
        capitalised = bool(letters) and token[0].isupper() and not at_start and token != "I"
        all_caps = len(letters) >= 2 and all(ch.isupper() for ch in letters)
        mixed = len(letters) >= 3 and any(ch.isupper() for ch in letters[1:]) and any(ch.islower() for ch in letters)
        number = digits >= 2 and not letters
        if ((capitalised or all_caps or mixed or inner_mark or number or extension)
                and _fold(token) not in STOP_WORDS and _fold(token) not in NOT_NAMES):
            folded = _fold(token)
            if folded not in found:
                found.append(folded)
    return found


# Where a question's script changes (Chinese or Urdu around a Latin name) a word ends; inverted marks open a
# Spanish sentence and are dropped; full-width and Urdu/Arabic sentence marks read as their Latin ones.
_SCRIPT_CHANGE = re.compile(r"(?<=[\x21-\x7e])(?=[^\x00-\x7f\s])|(?<=[^\x00-\x7f\s])(?=[\x21-\x7e])")
_MARKS = str.maketrans({"¿": "", "¡": "", "？": "? ", "！": "! ", "。": ". ", "，": ", ", "：": ": ", "؟": "? ",
                        "۔": ". ", "،": ", ", "（": " (", "）": ") ", "“": " “", "”": "” ", "«": " “", "»": "” "})


def as_written(question: str) -> str:
    """A question in any script, spaced so that its Latin names, numbers and code stand as words of their own."""
    text = unicodedata.normalize("NFKC", question.translate(_MARKS))
    return _SCRIPT_CHANGE.sub(" ", text)


def _script_of(language: str):
    """Whether a term's letters are written in the book's script (Latin for a book in a Latin-script language)."""
    if language in ("en", "es", "fr", "pt", "de", "it"):
        return lambda term: all(ord(ch) < 0x250 for ch in term if ch.isalpha())
    return lambda term: True


def crosslingual_terms(question: str, book_language: str) -> list[str]:
    """The specific terms of a question asked in another language than the book's: those written as the book
    would write them (names, numbers, code in the book's script); with an English book, only words in plain ASCII
    letters count ("Berlín" is the reader's spelling, "Docusaurus" the book's)."""
    in_script = _script_of(book_language)
    ascii_only = book_language == "en"
    return [t for t in specific_terms(as_written(question))
            if in_script(t) and (not ascii_only or all(ord(ch) < 0x80 for ch in t))]


def _holds(text: str, words: list[str], term: str) -> bool:
    if re.search(r"(?<![^\W_])" + re.escape(term) + r"(?![^\W_])", text):
        return True
    parts = re.findall(r"[^\W_]+", term)
    if parts and all(stem(w) in text for w in parts if len(w) > 2) and any(len(w) > 2 for w in parts):
        return True
    if len(term) >= 5 and term.isalpha():
        return bool(difflib.get_close_matches(term, words, n=1, cutoff=TYPO_SIMILARITY))
    return False


def asked(question: str) -> str:
    """The sentences of ``question`` that ask (end with a question mark), or all of it when none does: "I run
    Material through Docker on Linux. How do I start the preview?" asks about the preview, and the sentence
    before it is the reader's situation, which the book need not name."""
    sentences = split_sentences(question)
    asking = [s for s in sentences if s.rstrip().endswith("?")]
    return " ".join(asking) if asking and len(asking) < len(sentences) else question


def check_answerability(question: str, passages: list[str], *, selected_text: str = "",
                        book_language: str | None = None) -> Answerability:
    """Whether ``passages`` (the texts to be cited, headings included) hold every specific term of what
    ``question`` asks (:func:`asked`); ``book_language``, for a question asked in another language: only the terms
    written as the book would write them (:func:`crosslingual_terms`)."""
    if book_language:
        terms = crosslingual_terms(asked(as_written(question)), book_language)
    else:
        terms = specific_terms(asked(question))
    result = Answerability(specific_terms=terms)
    if not result.specific_terms:
        return result
    text = _fold(" ".join([*passages, selected_text]))
    words = sorted(set(re.findall(r"[^\W\d_]{4,}", text)))
    result.missing_terms = [t for t in result.specific_terms if not _holds(text, words, t)]
    result.answerable = not result.missing_terms
    return result


def check_retrieved(question: str, chunks: list, *, selected_text: str = "",
                    book_language: str | None = None) -> Answerability:
    """:func:`check_answerability` on retrieved chunks (their heading paths count as their text)."""
    return check_answerability(question, [f"{c.heading_path}\n{c.text}" for c in chunks], selected_text=selected_text,
                               book_language=book_language)
