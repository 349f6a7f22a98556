"""Answer composition for the extractive generator: the retrieved passages' own words, read as one answer.

No model and no network. Each passage is cut into blocks (paragraphs of sentences, lists,
code blocks, tables) and units (a sentence, a list item, a table row). A unit scores by the
share of the question's content words it holds, weighted by their rarity among the passages
(the words of its own section heading count as its own: "pass the folder" under "Ingest a
folder"), plus a share of its passage's rank score (the re-ranker's probability).

Then, in order:
1. **Lead** with the best unit and the *answering span* around it: a sentence that restates
   the question is usually followed by the one that answers it ("limits the feed to 20
   entries by default. To keep them all, set ``limit: false``"), so the next sentences of the
   same paragraph come along while they stay short or keep to the question's words.
2. **Keep structures whole**: a span ending with a colon brings the code block, list or table
   it introduces (a code block also when the colon ends the one-sentence paragraph a short lead
   brought along); for a "how do I…" question a lead inside a list brings the whole list with its
   intro line (numbered steps stay numbered), and a code block the span brought is followed to
   the next step when the sentence after it announces another block ("Then, add these lines to
   `mkdocs.yml`:"); a table row comes with its column names.
   A list item never stands alone without the line that introduced it (or, for a list that opens the
   passage, the items around it), nor a nested item without the item it belongs to. A lead whose span is
   only a label or an intro with nothing after it ("Strengths:" at a passage's end) is passed over for
   the next best: a heading alone answers nothing.
3. **Add** a unit from another passage only when it covers words of the question the lead
   does not and scores nearly as well; at most ``max_units`` prose units in all. A question in another language
   than the book's (``across_languages``) shares no words with it, so there the next units are added by score
   alone (their sentence vectors' nearness to the question, moved to the book's language, weighs in it), up to the
   same cap. Measured on docusaurus-docs' translated set (BENCHMARKS.md, "Questions in other languages"): answer
   contains Spanish 0.45 → 0.50, French 0.40 → 0.50, Urdu 0.30 → 0.45, Chinese 0.40 → 0.50. Weighing the sentence
   vectors' gap three or six times as much for these questions moved it by one question either way: not kept.
4. **Code**: a question that asks for code (``wants_code``: how to…, or a command, snippet, example,
   config, script) whose answer holds no code block yet gets the block that goes with the lead
   (``_code_for``; the lead's section counts whole, as a long section is indexed as several
   passages and its command may sit in another than the table of its options), with the sentence
   before it. A code block is never cut in the middle: one longer than ``MAX_CODE_LINES`` is
   shortened at a line boundary to a last line ``…``, and a note after it cites the section where
   the rest is. Citation markers never go inside code.
5. **Cite** each run of one passage's units once, with the passage that holds them; a unit
   that several passages hold is taken from (and cited to) the best-ranked one only.
Units keep the book's order within a passage; the lead's passage comes first.

**Context is not evidence.** For a question about a passage the reader selected ("ask about this"), the
selection's words and, for a follow-up, the previous question's words say what the question is about, not
what it asks: they weigh ``CONTEXT_WEIGHT`` of the question's own. The selected units are never quoted
back (the reader has them); the units right after the selection get a bonus that fades unit by unit
(``NEAR_SELECTION``), as the book's answer to "what does this mean?" is most often what it says next.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from chat.pipeline.terms import content_terms, normalise
from chat.pipeline.units import SHORTENED, Block, Unit, answer_units, blocks_of
from ingestion.indexing.chunking import unbold_labels

MAX_LIST_ITEMS = 10
MAX_SPAN_CHARS = 420  # the lead span grows past its first sentence only up to this length
ADD_SHARE = 0.6  # a unit from another passage joins when it scores this share of the lead
HOW_TO_BONUS = 0.25
CODE_SHARE = 0.4  # a code block from another passage joins when it and its intro hold this share of the question
CODE_RANK_SHARE = 0.3  # …and its passage ranks at least this share of the lead's
CODE_NEAR_BONUS = 0.15  # a block in the lead's passage, and again one right by the lead's paragraph
RANK_PRIOR = 0.3  # weight of the passage's rank score (the re-ranker's probability) in a unit's score
SIMILARITY_WEIGHT = 2.0  # per unit of cosine that a unit's sentence vector falls below the best unit's
CONTEXT_WEIGHT = 0.3  # a word of the selected passage or of the question a follow-up follows, against one of its own
NEAR_SELECTION = (0.4, 0.3, 0.2, 0.15, 0.1, 0.05)  # bonus of the 1st, 2nd, … unit after the selected passage
LEAD_TRIES = 5  # units tried in turn for a lead whose span reads as an answer
_HOW_TO = re.compile(r"\bhow\s+(?:do|can|should|would|to)\s|(?:^|[.!?]\s+)\s*(?:how\s+does\b"
                     r"|what\s+(?:are\s+the\s+)?steps\b|steps\s+to\b|(?:show|tell)\s+me\s+how\b)", re.IGNORECASE)
# Words that ask for code: the command, the snippet, what to put in a file, what to run.
_CODE_WORDS = re.compile(r"\b(?:commands?|curl|snippets?|examples?|syntax|scripts?|code|install(?:ing)?|"
                         r"configur(?:e|ing)|config|cli|terminal|shell|show\s+me|what\s+(?:do|should)\s+i\s+"
                         r"(?:put|write|type|add|run|set))\b", re.IGNORECASE)


def ends_with_colon(text: str) -> bool:
    """A sentence that introduces what follows (``To build, run:``, a label ``**npm:**``)."""
    return text.rstrip().rstrip("*_").endswith(":")


def is_how_to(question: str) -> bool:
    return bool(_HOW_TO.search(question))


def wants_code(question: str) -> bool:
    """A question a code block may answer: how to do something, or one that asks for a command or snippet."""
    return is_how_to(question) or bool(_CODE_WORDS.search(question))


def compose_extractive(question: str, sources: list, *, max_units: int = 3, selected_text: str = "",
                       context: str = "", across_languages: bool = False) -> str:
    """An answer from ``sources`` (objects with ``text``, ``heading_path`` and ``score``, numbered from 1).

    ``selected_text``: the passage the reader selected and asks about; ``context``: the question a follow-up
    follows. Their words weigh ``CONTEXT_WEIGHT`` of the question's own (they say what the question is about, not
    what it asks), and the selection is never quoted back: the answer is what the book says around it.
    ``across_languages``: the question is in another language than the book's (step 3 of the module docstring)."""
    passages = [blocks_of(chunk.text, n) for n, chunk in enumerate(sources, 1)]
    units = [u for blocks in passages for block in blocks for u in block.units]
    if not any(u.kind != "code" for u in units):
        return ""
    terms = _QuestionTerms.of(question, sources, selected_text=selected_text, context=context)
    given = _selected_units(units, selected_text)  # the reader has these already
    how_to, code_wanted = is_how_to(question), wants_code(question)
    _score_units(units, sources, passages, terms, given, how_to=how_to,
                 follow_up=bool(context) and not selected_text)
    ranked = sorted((u for u in units if u.kind != "code" and id(u) not in given),
                    key=lambda u: (-u.score, u.source, u.position))
    if not ranked:  # the passages hold nothing but the selection
        return ""
    lead, chosen = _lead(ranked, passages, terms.question, how_to, code_wanted)
    chosen = [u for u in chosen if id(u) not in given]
    chosen = [u for u in _from_selection(passages[lead.source - 1], lead, given) if u not in chosen] + chosen
    chosen = _add_units(chosen, ranked, lead, passages, sources, terms, given, max_units=max_units,
                        by_meaning=across_languages)
    if code_wanted and not any(u.kind == "code" for u in chosen):
        # The block that shows what the question asks: its own words, not those of what it is about.
        chosen += [u for u in _code_for(passages, sources, lead, terms.own, {t: terms.idf[t] for t in terms.own})
                   if u not in chosen]
    return _render(chosen, passages, lead.source)


@dataclass
class _QuestionTerms:
    """The question's content words (``own``), the selection's and followed question's (``context``), both
    (``question``), and each one's weight: its IDF over the sources, times ``CONTEXT_WEIGHT`` for context words."""

    own: set[str]
    context: set[str]
    question: set[str]
    idf: dict[str, float]
    weight_total: float

    @classmethod
    def of(cls, question: str, sources: list, *, selected_text: str, context: str) -> _QuestionTerms:
        own = set(content_terms(question))
        context_terms = set(content_terms(f"{selected_text} {context}")) - own
        both = own | context_terms
        chunk_terms = [set(content_terms(f"{chunk.heading_path} {chunk.text}")) for chunk in sources]
        idf = {t: (math.log(1 + len(sources) / (1 + sum(t in terms for terms in chunk_terms))) + 0.1)
               * (CONTEXT_WEIGHT if t in context_terms else 1.0) for t in both}
        return cls(own, context_terms, both, idf, sum(idf.values()) or 1.0)


def _score_units(units: list[Unit], sources: list, passages: list[list[Block]], terms: _QuestionTerms, given: set,
                 *, how_to: bool, follow_up: bool) -> None:
    """Each prose unit's ``score``: the question's words it (or its section's heading) covers, its passage's rank,
    nearness to the selection, how far its meaning falls below the best unit's, and the how-to bonus."""
    top_score = max((c.score for c in sources), default=1.0) or 1.0
    sections = [set(content_terms(chunk.heading_path.rsplit(" > ", 1)[-1])) for chunk in sources]
    near = _near_selection(passages, given)
    similarity = _similarities(sources, passages)
    # The cosines are with the question as searched, which for a follow-up holds the question it follows too.
    similarity_weight = SIMILARITY_WEIGHT * (CONTEXT_WEIGHT if follow_up else 1.0)
    best_similarity = max((v for k, v in similarity.items() if k not in given), default=0.0) if similarity else 0.0
    for unit in units:
        if unit.kind == "code":
            continue
        chunk, section = sources[unit.source - 1], sections[unit.source - 1]
        covered = (sum(terms.idf[t] for t in terms.question & unit.terms)
                   + sum(terms.idf[t] for t in (terms.question & section) - unit.terms)) / terms.weight_total
        rank_prior = RANK_PRIOR * (chunk.score / top_score)
        # Very short units (a label, "Example:") rarely answer anything on their own.
        shape = 0.5 if len(unit.terms) < 3 else 0.9 if unit.kind == "row" else 1.0
        unit.score = covered * shape + rank_prior + near.get(id(unit), 0.0)
        if similarity:  # what the unit means, not only the words it shares (chat/pipeline/sentences.py)
            unit.score -= similarity_weight * max(0.0, best_similarity - similarity[id(unit)])
        if how_to and _introduces(passages[unit.source - 1], unit):
            unit.score += HOW_TO_BONUS  # "how do I…" is answered by the steps or code a sentence introduces


def _add_units(chosen: list[Unit], ranked: list[Unit], lead: Unit, passages: list[list[Block]], sources: list,
               terms: _QuestionTerms, given: set, *, max_units: int, by_meaning: bool = False) -> list[Unit]:
    """``chosen`` and, up to ``max_units`` prose units, the next best units (with their context) that add a
    question word not yet covered (any, ``by_meaning``: a question in another language than the book's), score at
    least ``ADD_SHARE`` of the lead, and come from a passage ranked at least half as high as the lead's."""
    covered_terms = set().union(*(u.terms for u in chosen)) & terms.question
    seen = {normalise(u.text) for u in chosen}
    prose = sum(u.kind != "code" for u in chosen)
    for unit in ranked:
        if prose >= max_units:
            break
        if unit in chosen or normalise(unit.text) in seen or unit.score < ADD_SHARE * lead.score:
            continue
        new = (unit.terms & terms.own) - covered_terms  # the context's words say what it is about, not what to add
        if not by_meaning and (not new or sum(terms.idf[t] for t in new) < 0.1 * terms.weight_total):
            continue
        if unit.source != lead.source and sources[unit.source - 1].score < 0.5 * sources[lead.source - 1].score:
            continue
        extra = [u for u in _context(passages[unit.source - 1], unit) if id(u) not in given]
        chosen += [u for u in extra if u not in chosen]
        seen |= {normalise(u.text) for u in extra}
        covered_terms |= unit.terms & terms.question
        prose += sum(u.kind != "code" for u in extra)
    return chosen


def _lead(ranked: list[Unit], passages: list[list[Block]], question_terms: set[str], how_to: bool,
          code_wanted: bool) -> tuple[Unit, list[Unit]]:
    """The best unit whose span reads as an answer, and that span: a bare label or an intro whose list or code is
    not in the passage ("Strengths:" at a passage's end) answers nothing, so the next best leads. The best unit
    when none does."""
    for unit in ranked[:LEAD_TRIES]:
        span = _span(passages[unit.source - 1], unit, question_terms, how_to, code_wanted)
        if not _bare(span):
            return unit, span
    return ranked[0], _span(passages[ranked[0].source - 1], ranked[0], question_terms, how_to, code_wanted)


def _bare(span: list[Unit]) -> bool:
    """A span that is only a heading-like label or an intro with nothing after it."""
    prose = [u for u in span if u.kind != "code"]
    return len(span) == 1 and (ends_with_colon(prose[0].text) or len(prose[0].terms) < 3) if prose else True


def _selected_units(units: list[Unit], selected_text: str) -> set[int]:
    """``id`` of the units the reader selected: those inside the selection or holding it."""
    selected = normalise(selected_text) if selected_text else ""
    if not selected:
        return set()
    out = set()
    for u in units:
        text = normalise(u.text)
        if u.kind == "code" or len(text) <= 20:
            continue
        # Whole, or cut at the selection's start or end (a selection of a sentence and a half).
        cut = len(text) > 40 and (text[:40] in selected or text[-40:] in selected)
        if text in selected or selected in text or cut:
            out.add(id(u))
    return out


def _from_selection(blocks: list[Block], lead: Unit, given: set[int]) -> list[Unit]:
    """The units between the selection and a lead later in the same paragraph: the book's answer reads on from
    where the selection ends."""
    units = blocks[lead.block].units
    at = units.index(lead)
    marks = [n for n, u in enumerate(units[:at]) if id(u) in given]
    return units[marks[-1] + 1:at] if marks else []


def _near_selection(passages: list[list[Block]], given: set[int]) -> dict[int, float]:
    """``id(unit)`` → a bonus for the units after the selection in its passage (``NEAR_SELECTION``, fading with
    each unit; the unit just before it gets the last step): a question about a selected passage is most often
    answered by what the book says next."""
    bonus: dict[int, float] = {}
    for blocks in passages:
        units = answer_units(blocks)
        marks = [n for n, u in enumerate(units) if id(u) in given]
        if not marks:
            continue
        for step, unit in enumerate(units[marks[-1] + 1:]):
            if step >= len(NEAR_SELECTION):
                break
            bonus[id(unit)] = max(bonus.get(id(unit), 0.0), NEAR_SELECTION[step])
        if marks[0] > 0:
            before = units[marks[0] - 1]
            bonus[id(before)] = max(bonus.get(id(before), 0.0), NEAR_SELECTION[-1])
    return bonus


def _similarities(sources: list, passages: list[list[Block]]) -> dict[int, float] | None:
    """``id(unit)`` → the question's cosine with the unit, when every source has its units' (the
    ``similarities`` of an ``Excerpt``, in ``answer_units`` order); else ``None``."""
    out = {}
    for chunk, blocks in zip(sources, passages, strict=True):
        units = answer_units(blocks)
        given = getattr(chunk, "similarities", None)
        if given is None or len(given) != len(units):
            return None
        out.update((id(u), s) for u, s in zip(units, given, strict=True))
    return out


def _span(blocks: list[Block], lead: Unit, question_terms: set[str], how_to: bool, code_wanted: bool) -> list[Unit]:
    """The lead unit with what it needs to read as an answer (see the module docstring)."""
    block = blocks[lead.block]
    if block.kind == "list":
        if how_to or len(block.units) <= 3:
            items = block.units[:MAX_LIST_ITEMS]
            after = blocks[lead.block + 1] if lead.block + 1 < len(blocks) else None
            # Steps that end on the command they announce ("3. Start the app with these variables:").
            code = (after.units if after is not None and after.kind == "code" and items == block.units
                    and (code_wanted or ends_with_colon(items[-1].text)) else [])
            return _intro(blocks, lead.block) + items + code
        # One item of a longer list, with what says what the list is: the sentence before it, or else (the list
        # opens the passage) the items around it, so no item stands cut from its list.
        intro = _intro(blocks, lead.block) or _lead_in(blocks, lead.block)
        if intro:
            return intro + _parent(block, lead) + [lead]
        at = block.units.index(lead)
        start = max(0, min(at - MAX_LIST_ITEMS // 2, len(block.units) - MAX_LIST_ITEMS))
        return block.units[start:start + MAX_LIST_ITEMS]
    if block.kind == "table":
        return [lead]
    span = [lead]
    length = len(lead.text)
    for following in block.units[block.units.index(lead) + 1:]:
        if length + len(following.text) > MAX_SPAN_CHARS:
            break
        span.append(following)
        length += len(following.text)
    if lead.block + 1 < len(blocks):
        after = blocks[lead.block + 1]
        ends_paragraph = span[-1] is block.units[-1]
        introduces = ends_with_colon(span[-1].text)
        shown = None  # the block the span brought
        if ends_paragraph and (introduces or (how_to and after.kind in ("code", "list"))):
            span += after.units[:MAX_LIST_ITEMS]
            shown = lead.block + 1
        elif ends_paragraph and after.kind == "paragraph" and length < MAX_SPAN_CHARS // 2:
            span.append(after.units[0])  # a short lead: the answer often opens the next paragraph
            announced = blocks[lead.block + 2] if lead.block + 2 < len(blocks) else None
            if (after.units == span[-1:] and ends_with_colon(span[-1].text) and announced is not None
                    and announced.kind == "code"):  # … and announces a block (a list would take the prose budget)
                span += announced.units
                shown = lead.block + 2
        if how_to and shown is not None and blocks[shown].kind == "code":
            span += _next_step(blocks, shown)
    return span


def _next_step(blocks: list[Block], index: int) -> list[Unit]:
    """The step after the code block at ``index``, when the paragraph after it is one sentence that announces another
    ("Then, add the following lines to `mkdocs.yml`:"): that sentence and its block; else nothing. A sentence
    that opens with a label (``**headTags entry:**``, a tab's) begins an alternative, not a next step."""
    if index + 2 < len(blocks):
        intro, code = blocks[index + 1], blocks[index + 2]
        if (intro.kind == "paragraph" and len(intro.units) == 1 and ends_with_colon(intro.units[0].text)
                and unbold_labels(intro.units[0].text) == intro.units[0].text and code.kind == "code"):
            return intro.units + code.units
    return []


def _code_for(passages: list[list[Block]], sources: list, lead: Unit, question_terms: set[str],
              idf: dict[str, float]) -> list[Unit]:
    """For a question that asks for code and a lead that brought none: the code block that shows what the lead
    says, with the sentence that introduces it, or nothing.

    Each code block of a passage ranked at least ``CODE_RANK_SHARE`` of the lead's, or from the lead's section, is
    scored by the share of the question's words (weighted by rarity) its code and the sentence before it hold; a
    block in the lead's passage gains ``CODE_NEAR_BONUS``, twice over when it sits by the lead's paragraph (right
    before it: a sentence that explains the flags of the command above; or just after it, one paragraph between at
    most). The best block joins, with the sentence before it, when it holds ``CODE_SHARE`` of the question, sits by
    the lead and holds some of it, or is from the lead's section and holds two of its words (one may be chance). A
    block from another passage than the lead's needs a sentence before it, which says what it is for and cites it."""
    weight_total = sum(idf.values()) or 1.0
    lead_score = sources[lead.source - 1].score
    candidates = []
    section = sources[lead.source - 1].heading_path  # a long section is indexed as several passages
    for n, blocks in enumerate(passages, 1):
        same = sources[n - 1].heading_path == section  # the lead's passage, or another part of its section
        if sources[n - 1].score < CODE_RANK_SHARE * lead_score and not same:
            continue
        for index, block in enumerate(blocks):
            lead_in = _lead_in(blocks, index)
            if block.kind != "code" or not (n == lead.source or lead_in):
                continue  # from another passage a block comes with the sentence that says what it is for (and cites it)
            shared = question_terms & (set(block.units[0].terms) | {t for u in lead_in for t in u.terms})
            share = sum(idf[t] for t in shared) / weight_total
            adjacent = n == lead.source and -1 <= index - lead.block <= 2
            near = CODE_NEAR_BONUS * ((n == lead.source) + adjacent)
            if share >= CODE_SHARE or (adjacent and shared) or (same and len(shared) >= 2):
                candidates.append((share + near, -n, -abs(index - lead.block), n, index))
    if not candidates:
        return []
    *_, n, index = max(candidates)
    return _lead_in(passages[n - 1], index) + passages[n - 1][index].units


def _lead_in(blocks: list[Block], index: int) -> list[Unit]:
    """The sentence right before the block at ``index`` (the last of the paragraph before it), if any: what
    says what a code block is for, colon or not ("Use the `queryString` prop to enable this feature.")."""
    return [blocks[index - 1].units[-1]] if index > 0 and blocks[index - 1].kind == "paragraph" else []


def _introduces(blocks: list[Block], unit: Unit) -> bool:
    """Whether ``unit`` is in a paragraph that ends with a colon right before a code block or a list."""
    block = blocks[unit.block]
    return (block.kind == "paragraph" and ends_with_colon(block.units[-1].text)
            and unit.block + 1 < len(blocks) and blocks[unit.block + 1].kind in ("code", "list"))


def _intro(blocks: list[Block], index: int) -> list[Unit]:
    """The sentence that introduces the block at ``index``: its lead-in, when that ends with a colon."""
    return [u for u in _lead_in(blocks, index) if ends_with_colon(u.text)]


def _parent(block: Block, unit: Unit) -> list[Unit]:
    """The item a nested list item belongs to ("- `onlyIncludeVersions`: …" over its "- Tip: …")."""
    index = block.units.index(unit)
    for earlier in range(index - 1, -1, -1):
        if block.depths[earlier] < block.depths[index]:
            return [block.units[earlier]]
    return []


def _context(blocks: list[Block], unit: Unit) -> list[Unit]:
    """A unit added to the lead, with the intro a list item needs and the code a colon announces."""
    block = blocks[unit.block]
    if block.kind == "list":
        return _intro(blocks, unit.block) + _parent(block, unit) + [unit]
    out = [unit]
    if (ends_with_colon(unit.text) and unit is block.units[-1] and unit.block + 1 < len(blocks)
            and blocks[unit.block + 1].kind == "code"):
        out += blocks[unit.block + 1].units
    return out


def _render(chosen: list[Unit], passages: list[list[Block]], lead_source: int) -> str:
    """The chosen units as Markdown: one paragraph per block, the lead's passage first, ``[n]`` after each
    paragraph, list or table (after the list, for a list's intro line; code blocks carry none)."""
    by_source: dict[int, list[Unit]] = {}
    for unit in chosen:
        by_source.setdefault(unit.source, []).append(unit)
    order = [lead_source] + [s for s in by_source if s != lead_source]
    paragraphs: list[str] = []
    for source in order:
        blocks = passages[source - 1]
        groups: list[list[Unit]] = []
        for unit in sorted(by_source[source], key=lambda u: u.position):
            if groups and groups[-1][0].block == unit.block:
                groups[-1].append(unit)
            else:
                groups.append([unit])
        for n, group in enumerate(groups):
            block = blocks[group[0].block]
            following = blocks[groups[n + 1][0].block] if n + 1 < len(groups) else None
            cite = f" [{source}]"
            if block.kind == "code":
                paragraphs.append(group[0].text.strip("\n"))
                if group[0].text.rstrip().rsplit("\n", 2)[-2].strip() == SHORTENED:
                    paragraphs.append(f"*The rest is in the book.*{cite}")  # (too short for the grounding check)
            elif block.kind == "list":
                lines = []
                for unit in group:
                    index = block.units.index(unit)
                    indent = "   " * min(2, block.depths[index] // 2)
                    marker = f"{index + 1}." if block.ordered else "-"
                    lines.append(f"{indent}{marker} {unit.text.strip()}")
                paragraphs.append("\n".join(lines) + cite)
            elif block.kind == "table":
                rows = []
                for unit in group:
                    cells = [c.strip() for c in unit.text.split(" — ")]
                    if block.header and len(block.header) == len(cells):
                        row = "; ".join(f"{h}: {c}" for h, c in zip(block.header, cells, strict=True) if c)
                    else:
                        row = unit.text
                    rows.append(row if row.endswith((".", "!", "?")) else row + ".")
                paragraphs.append(" ".join(rows) + cite)
            else:
                text = " ".join(u.text.strip() for u in group)
                intro = ends_with_colon(text) and following is not None and following.kind == "list"
                paragraphs.append(text if intro else text + cite)
    return "\n\n".join(paragraphs).strip()
