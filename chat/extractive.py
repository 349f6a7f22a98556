"""The extractive generator: an answer made of the retrieved chunks' own best sentences, each cited.

No model and no network. The chunks are cut into units (prose sentences, list items, short
code blocks); a unit scores by the share of the question's content words it contains,
weighted by how rare each word is among the retrieved chunks (so the word every chunk
shares counts little; the words of the unit's own section heading count as its own), plus a share for
its chunk's retrieval score, which is usually the more reliable signal.
The best unit leads; the next best join it while they add words of the question the answer
does not cover yet. A short code block right after a chosen sentence comes along with it,
because in a documentation book "how do I…" is usually answered by the command that follows.
Units are shown in the book's order within each source, each followed by ``[n]``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from chat.terms import content_terms, split_sentences

MAX_CODE_LINES = 12
MAX_UNIT_CHARS = 600
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d+[.)])\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")


@dataclass
class Unit:
    source: int  # 1-based source number
    position: int  # order within its source
    text: str
    kind: str  # sentence, item, row, code
    terms: frozenset[str]
    score: float = 0.0


def units_of(text: str, source: int) -> list[Unit]:
    """A chunk's text as answer units: sentences of prose, list items, and code blocks."""
    out: list[Unit] = []
    lines = text.splitlines()
    i, paragraph = 0, []

    def flush():
        if paragraph:
            for sentence in split_sentences(" ".join(paragraph)):
                add(sentence[:MAX_UNIT_CHARS], "sentence")
            paragraph.clear()

    def add(body: str, kind: str):
        terms = frozenset(content_terms(body))
        if terms or kind == "code":
            out.append(Unit(source, len(out), body, kind, terms))

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker = fence.group(2)
            block = [line]
            i += 1
            while i < len(lines):
                block.append(lines[i])
                if lines[i].strip().startswith(marker[0] * len(marker)) and len(block) > 1:
                    break
                i += 1
            if len(block) - 2 <= MAX_CODE_LINES:
                add("\n".join(block), "code")
        elif not line.strip() or _HEADING.match(line) or _TABLE_RULE.match(line):
            flush()
        elif _LIST_ITEM.match(line):
            flush()
            item = [_LIST_ITEM.sub("", line, count=1)]
            while i + 1 < len(lines) and lines[i + 1].startswith(("  ", "\t")) and lines[i + 1].strip() \
                    and not _LIST_ITEM.match(lines[i + 1]):
                i += 1
                item.append(lines[i].strip())
            for sentence in split_sentences(" ".join(item)):
                add(sentence[:MAX_UNIT_CHARS], "item")
        elif line.lstrip().startswith("|"):
            flush()
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set(":- ") for c in cells):
                add(" — ".join(c for c in cells if c)[:MAX_UNIT_CHARS], "row")
        else:
            paragraph.append(line.strip())
        i += 1
    flush()
    return out


def compose_extractive(question: str, sources: list, *, max_units: int = 3) -> str:
    """An answer from ``sources`` (objects with ``text``, ``heading_path`` and ``score``, numbered from 1)."""
    question_terms = set(content_terms(question))
    all_units = [units_of(chunk.text, n) for n, chunk in enumerate(sources, 1)]
    units = [u for group in all_units for u in group]
    if not units:
        return ""
    # Rarity among the retrieved chunks: a word in every source tells them apart less.
    chunk_terms = [set(content_terms(f"{chunk.heading_path} {chunk.text}")) for chunk in sources]
    idf = {t: math.log(1 + len(sources) / (1 + sum(t in terms for terms in chunk_terms))) + 0.1
           for t in question_terms}
    weight_total = sum(idf.values()) or 1.0
    top_score = max((c.score for c in sources), default=1.0) or 1.0
    sections = [set(content_terms(chunk.heading_path.rsplit(" > ", 1)[-1])) for chunk in sources]
    for unit in units:
        chunk, section = sources[unit.source - 1], sections[unit.source - 1]
        # A sentence means what its section heading says: "pass the folder" under "Ingest a folder".
        covered = (sum(idf[t] for t in question_terms & unit.terms)
                   + sum(idf[t] for t in (question_terms & section) - unit.terms)) / weight_total
        rank_prior = 0.3 * (chunk.score / top_score)
        # Very short units (a label, "Example:") rarely answer anything on their own; a table row out of
        # its table loses its column headers.
        shape = 0.5 if len(unit.terms) < 3 else 0.85 if unit.kind == "row" else 1.0
        unit.score = (covered * shape + rank_prior) if unit.kind != "code" else 0.0
    chosen = _choose(units, question_terms, idf, max_units)
    by_source: dict[int, list[Unit]] = {}
    for unit in chosen:
        by_source.setdefault(unit.source, []).append(unit)
    # Code that directly follows a chosen sentence joins it.
    for source, picked in by_source.items():
        group = all_units[source - 1]
        for unit in list(picked):
            following = group[unit.position + 1] if unit.position + 1 < len(group) else None
            if following is not None and following.kind == "code" and following not in picked \
                    and unit.text.rstrip().endswith(":"):
                picked.append(following)
    order = sorted(by_source, key=lambda s: min(chosen.index(u) for u in by_source[s] if u in chosen))
    parts = []
    for source in order:
        for unit in sorted(by_source[source], key=lambda u: u.position):
            if unit.kind == "code":
                parts.append(f"\n{unit.text}\n")
            else:
                parts.append(f"{unit.text.rstrip()} [{source}]")
    return _join(parts)


def _choose(units: list[Unit], question_terms: set[str], idf: dict[str, float], max_units: int) -> list[Unit]:
    ranked = sorted((u for u in units if u.kind != "code"), key=lambda u: (-u.score, u.source, u.position))
    if not ranked:
        return []
    chosen = [ranked[0]]
    covered = set(ranked[0].terms & question_terms)
    best = ranked[0].score
    for unit in ranked[1:]:
        if len(chosen) >= max_units:
            break
        new = (unit.terms & question_terms) - covered
        if unit.score >= 0.6 * best and new and sum(idf[t] for t in new) >= 0.1 * sum(idf.values()):
            chosen.append(unit)
            covered |= unit.terms & question_terms
    return chosen


def _join(parts: list[str]) -> str:
    text = ""
    for part in parts:
        if part.startswith("\n"):
            text = text.rstrip() + "\n\n" + part.strip() + "\n\n"
        else:
            text = (text + (" " if text and not text.endswith("\n") else "") + part)
    return text.strip()
