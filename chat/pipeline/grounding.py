"""The grounding check: every citation names a retrieved source, and every sentence is supported by the
source(s) it cites.

A sentence is supported when at least ``GROUNDING_MIN_SUPPORT`` of its content words occur in
a cited source (an uncited sentence may be supported by any source; sentences with fewer
than ``MIN_TERMS`` content words, like "Yes." or "In short:", are not judged). Code blocks
must appear in a source as they are (a block shortened to a last line ``…``: the lines shown).
The answer fails (and is withheld) when a citation names no retrieved source, when nothing is
cited at all, when more than
``GROUNDING_MAX_UNSUPPORTED`` of the judged sentences are unsupported, or when it links to
an address (a Markdown link or image, an autolink, a bare URL) that no source contains: a
model talked into sending readers elsewhere can't pass a link off as the book's.

Across languages (``across_languages``: a language model's answer to a question asked in another language than the
book's, written in the reader's language) shared words say nothing: a sentence is supported when its multilingual
vector (the embedder's, as a query) has a cosine of at least ``CROSSLINGUAL_SUPPORT`` with a sentence of a cited
source (as a passage). The cut was measured on our 160 translated docusaurus-docs questions (Spanish, French, Urdu,
Chinese) against the English ones, a sentence and its translation standing for an answer and its passage: 0.87 is
the highest cut that keeps 95 % of the translations supported (95.6 %), while the closest *other* question of the
same book passes it 24 % of the time (at 0.85: 98 % and 51 %). Sentences under ``MIN_CHARS`` characters are not
judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from bookchat.base.conf import setting
from chat.pipeline.terms import citations, content_terms, split_sentences, strip_citations
from chat.pipeline.units import SHORTENED
from ingestion.reading.fences import code_ranges, split_fenced

MIN_TERMS = 3
MIN_CHARS = 12  # across languages, a shorter sentence ("Sí." "是的。") is not judged
CROSSLINGUAL_SUPPORT = 0.87  # measured: see the module docstring
_ONLY_CITATIONS = re.compile(r"(?:\[\d+(?:\s*,\s*\d+)*\]\s*)+")
# Link targets: [text](target) and ![alt](target), <scheme:…> autolinks, bare http(s) URLs.
_LINK_TARGETS = re.compile(r"\]\(\s*<?([^\s()<>]+)|<([a-zA-Z][a-zA-Z0-9+.-]*:[^\s<>]+)>|(https?://[^\s<>()\[\]`'\"]+)")


@dataclass
class GroundingReport:
    """What the check found; an answer's ``grounding`` (``chat.pipeline.answers.Answer``), each field as the API
    sends it."""

    passed: bool = True
    reason: str = ""  # why it failed
    sentences: int = 0  # judged sentences and code blocks
    supported: int = 0
    unsupported_sentences: list[str] = field(default_factory=list)
    invalid_citations: list[int] = field(default_factory=list)
    foreign_links: list[str] = field(default_factory=list)  # link targets that no source contains
    cited_sources: list[int] = field(default_factory=list)  # distinct valid source numbers, in order of first use

    @property
    def supported_share(self) -> float:
        return self.supported / self.sentences if self.sentences else 1.0


def answer_segments(answer: str) -> list[tuple[str, str]]:
    """``(kind, text)`` pieces of an answer: ``code`` blocks and prose ``sentence`` s (citations kept)."""
    out = []
    for kind, piece in split_fenced(answer):
        out += [("code", piece)] if kind == "code" else [("sentence", s) for s in _prose_sentences(piece)]
    return out


def _prose_sentences(text: str) -> list[str]:
    sentences = []
    for paragraph in re.split(r"\n\s*\n|\n(?=\s*(?:[-*+]|\d+[.)])\s)", text):
        # A citation belongs to the sentence before it: "… done. [2] Next …" splits after "[2]".
        paragraph = re.sub(r"([.!?])\s+((?:\[\d+(?:\s*,\s*\d+)*\]\s*)+)", r"\1 \2\n", paragraph)
        for line in paragraph.split("\n"):
            for sentence in split_sentences(line):
                if sentences and _ONLY_CITATIONS.fullmatch(sentence):  # "… done. [2]": split_sentences cut it off
                    sentences[-1] = f"{sentences[-1]} {sentence}"
                else:
                    sentences.append(sentence)
    return [s for s in sentences if s.strip()]


class _AcrossLanguages:
    """The sources' sentences as vectors, embedded on first use, for judging an answer written in another
    language."""

    def __init__(self, sources: list[str]):
        self.sources, self.vectors = sources, {}
        from ingestion.indexing.embedders import get_embedder  # noqa: PLC0415 (only a cross-lingual LLM answer)
        self.embedder = get_embedder()

    def _of(self, n: int) -> np.ndarray:
        if n not in self.vectors:
            sentences = [s for s in split_sentences(self.sources[n - 1]) if s.strip()] or [self.sources[n - 1]]
            self.vectors[n] = self.embedder.embed_documents(sentences)
        return self.vectors[n]

    def support(self, sentence: str, candidates) -> float:
        vector = self.embedder.embed_query(sentence)
        return max((float(np.max(self._of(n) @ vector)) for n in candidates), default=0.0)


def check_grounding(answer: str, sources: list[str], *, across_languages: bool = False,
                    quoted: bool = False) -> GroundingReport:
    """Check ``answer`` against the texts of its numbered ``sources`` (source n is ``sources[n-1]``);
    ``across_languages``: the answer is in another language than the sources, judged by sentence vectors;
    ``quoted``: the answer is the book's own sentences (the extractive composer's), whose markers it wrote after a
    space, so that brackets in the book's text (``hl[18,22]``) are the book's, not citations."""
    report = GroundingReport()
    across = _AcrossLanguages(sources) if across_languages else None
    source_terms = [set(content_terms(text)) for text in sources]
    squashed_sources = [_squash(text) for text in sources]
    min_support = setting("GROUNDING_MIN_SUPPORT")
    for kind, segment in answer_segments(answer):
        cited = [] if kind == "code" else citations(_outside_code(segment), spaced=quoted)  # `items[0]` cites nothing
        for n in cited:
            if not 1 <= n <= len(sources):
                if n not in report.invalid_citations:
                    report.invalid_citations.append(n)
            elif n not in report.cited_sources:
                report.cited_sources.append(n)
        valid = [n for n in cited if 1 <= n <= len(sources)]
        candidates = valid or range(1, len(sources) + 1)
        if kind == "code":
            report.sentences += 1
            lines = segment.rstrip().split("\n")
            if len(lines) > 1 and lines[-1].strip() == SHORTENED:  # a long block shortened: what is shown must be there
                segment = "\n".join(lines[:-1])
            body = _squash(segment)
            if body and any(body in squashed_sources[n - 1] for n in candidates):
                report.supported += 1
            else:
                report.unsupported_sentences.append(segment.strip())
            continue
        plain = strip_citations(segment).strip()
        if across is not None:
            if len(plain) < MIN_CHARS:
                continue
            report.sentences += 1
            supported = across.support(plain, candidates) >= CROSSLINGUAL_SUPPORT
        else:
            terms = set(content_terms(plain))
            if len(terms) < MIN_TERMS:
                continue
            report.sentences += 1
            supported = max((len(terms & source_terms[n - 1]) / len(terms) for n in candidates),
                            default=0.0) >= min_support
        if supported:
            report.supported += 1
        else:
            report.unsupported_sentences.append(strip_citations(segment).strip())
    report.foreign_links = foreign_links(answer, sources)
    if report.invalid_citations:
        report.passed, report.reason = False, "cites a source that was not retrieved"
    elif report.foreign_links:
        report.passed, report.reason = False, "links to an address that the sources don't contain"
    elif not report.cited_sources:
        report.passed, report.reason = False, "cites no source"
    elif report.sentences and 1 - report.supported_share > setting("GROUNDING_MAX_UNSUPPORTED"):
        report.passed, report.reason = False, "most sentences are not supported by their sources"
    return report


def foreign_links(answer: str, sources: list[str]) -> list[str]:
    """The link targets in ``answer`` that appear in none of the ``sources``, in order, once each."""
    found = []
    for match in _LINK_TARGETS.finditer(answer):
        target = next(group for group in match.groups() if group).rstrip(".,;:!?")
        if target not in found and not any(target in text for text in sources):
            found.append(target)
    return found


def _outside_code(text: str) -> str:
    """``text`` with its inline code spans left out."""
    kept, last = [], 0
    for start, end in code_ranges(text):
        kept.append(text[last:start])
        last = end
    return "".join([*kept, text[last:]])


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
