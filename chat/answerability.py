"""Answerability: a question on the book's topic that the book does not answer is refused, from evidence.

The scope score tells "about this book" from "about something else"; it can't tell "how do
I import pages from Notion?" (on topic, answer absent) from "how do I import pages?". What
does tell them apart is the question's *specific terms*, the names and figures it asks
about: a product, a format, a number, an identifier. When the passages that would answer
(and be cited) never mention one of them, the answer the book can give is about something
else, however well the rest of the question matches.

A specific term is a word of the question written like a name (capitalised in mid-sentence,
all capitals, mixed case like ``ePub``, or with inner dots, slashes or underscores like
``.ipynb`` or ``A/B``) or a number of two or more digits. It is *found* when a passage to
be cited (or the reader's selected passage) holds it, compared case-insensitively, as the
same word or with the same light stem (``notebooks`` ~ ``notebook``). Words the book uses
in many passages are never specific (the book's own name, "Markdown" in a Markdown book).

Decisions: shape, not a dictionary of rare words (nothing to ship or download, and a
lower-case paraphrase such as "exchange" or "complain" is never mistaken for a name); one
missing term is enough, because a question names few things and each is what it is about.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from chat.terms import STOP_WORDS, stem

_TOKEN = re.compile(r"\d{1,3}(?:,\d{3})+|[^\s\"'“”‘’(),;:!?]+")
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n\s*)$")
_EDGE = ".,;:!?'\"“”‘’()[]{}<>*`"
COMMON_SHARE = 0.05  # a term in more than this share of the book's passages is the book's own vocabulary


@dataclass
class Answerability:
    answerable: bool = True
    specific: list[str] = field(default_factory=list)  # the question's specific terms
    missing: list[str] = field(default_factory=list)  # those no passage to be cited holds

    def as_dict(self) -> dict:
        return {"answerable": self.answerable, "specific_terms": self.specific, "missing_terms": self.missing}


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def specific_terms(question: str) -> list[str]:
    """The question's words written like names or figures (see the module docstring), in order, once each."""
    found: list[str] = []
    for match in _TOKEN.finditer(question):
        token = match.group().strip(_EDGE)
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
        if (capitalised or all_caps or mixed or inner_mark or number) and _fold(token) not in STOP_WORDS:
            folded = _fold(token)
            if folded not in found:
                found.append(folded)
    return found


def _holds(text: str, term: str) -> bool:
    if re.search(r"(?<![^\W_])" + re.escape(term) + r"(?![^\W_])", text):
        return True
    words = re.findall(r"[^\W_]+", term)
    return bool(words) and all(stem(w) in text for w in words if len(w) > 2)


def check_answerability(question: str, passages: list[str], *, selected_text: str = "",
                        book_share=None) -> Answerability:
    """Whether ``passages`` (the texts to be cited, headings included) hold every specific term of
    ``question``. ``book_share(term)``: the share of the book's passages holding a term, when known (terms
    in more than ``COMMON_SHARE`` of them are the book's own vocabulary, not specific)."""
    terms = specific_terms(question)
    if book_share is not None:
        terms = [t for t in terms if book_share(t) <= COMMON_SHARE]
    result = Answerability(specific=terms)
    if not terms:
        return result
    text = _fold(" ".join([*passages, selected_text]))
    result.missing = [t for t in terms if not _holds(text, t)]
    result.answerable = not result.missing
    return result
