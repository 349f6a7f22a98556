"""Heading-aware chunking of a parsed page into passages that fit the embedder's input window.

How a page becomes chunks:
1. Blocks are grouped into sections by their H2/H3 headings; a chunk never spans two of them.
2. A section smaller than ``min_tokens`` joins the next section under the same parent (or
   the previous one), so no chunk is a heading or a line alone.
3. Blocks are packed in order up to ``target_tokens`` (heading path included). A new H4
   starts a new chunk once the current one is big enough. A block larger than the budget
   is split: prose on sentences, lists and quotes on lines, code and tables on lines (each
   piece re-fenced / re-headed and marked ``continued``); a sentence or line still too big
   is split on words. Consecutive pieces of prose share ``overlap_tokens`` of sentences.
4. Every chunk's embedded text (heading path + text) is checked against the embedder's own
   token count and its input window; nothing over it leaves this module.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ingestion.reading.documents import Block, Heading, ParsedDocument

# Bump when the chunking rules or the text the parser gives them change (3: labels of tabs and admonitions
# are bold; 4: PyMdown's ``///`` blocks are read): documents indexed under another version are read and chunked
# again, and only passages whose text changed are embedded (the others keep their vectors, ``embedding_key``).
CHUNKER_VERSION = "4"

HEADING_SEPARATOR = " > "
_SENTENCE_END = re.compile(r"(?:(?<=[.!?…。！？])|(?<=[.!?…。！？][\"')\]]))\s+")
_PROSE = {"paragraph", "sentence", "quote", "admonition", "list", "html", "math"}


@dataclass(frozen=True)
class ChunkingOptions:
    target_tokens: int = 300
    min_tokens: int = 64
    overlap_tokens: int = 40
    max_tokens: int = 512  # the embedder's input window: a hard limit

    def fingerprint(self, embedder_name: str) -> str:
        raw = f"{CHUNKER_VERSION}|{self.target_tokens}|{self.min_tokens}|{self.overlap_tokens}|{self.max_tokens}"
        return hashlib.sha256(f"{raw}|{embedder_name}".encode()).hexdigest()[:16]


@dataclass
class ChunkDraft:
    """A chunk before it is embedded and stored."""

    text: str
    heading_path: str
    headings: tuple[Heading, ...]
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    token_count: int = 0
    continued: bool = False
    start_headings: tuple[Heading, ...] | None = None  # the headings where the text starts, when deeper

    @property
    def anchor(self) -> str:
        """Where a link should land: the deepest section the text starts in; none for a page's H1 (top of page)."""
        sections = [h for h in (self.start_headings or self.headings) if h.level >= 2]
        return sections[-1].anchor if sections else ""

    @property
    def embed_text(self) -> str:
        return embedding_text(self.heading_path, self.text)


def embedding_text(heading_path: str, text: str) -> str:
    """What is embedded (and indexed) for a chunk: its heading path, then its text (labels unbolded)."""
    text = unbold_labels(text)
    return f"{heading_path}\n\n{text}" if heading_path else text


# A label at the start of a line, ``**Tip (Title):**`` or a tab's ``**npm:**`` (ingestion.reading.mdx writes them bold).
_BOLD_LABEL = re.compile(r"^(\s*)\*\*([^*\n]{1,120}:)\*\*(?=\s|$)", re.MULTILINE)


def unbold_labels(text: str) -> str:
    """``text`` with its labels' bold markers dropped: the bold is for the reader, and the embedder and the
    chunker's token budget see the words alone (a passage embeds the same whether its labels are bold or not)."""
    return _BOLD_LABEL.sub(r"\1\2", text) if "**" in text else text


@dataclass
class _Unit:
    """A piece of a block: the whole block, or a sentence/line group of an oversized one."""

    text: str
    tokens: int
    kind: str
    block: Block
    joiner: str = "\n\n"  # put between this unit and the one before it in the same chunk
    continued: bool = False


@dataclass
class _Section:
    key: tuple[Heading, ...]
    blocks: list[Block] = field(default_factory=list)
    tokens: int = 0


class Chunker:
    """Chunks pages for one embedder; ``count_tokens`` is the embedder's own passage token count."""

    def __init__(self, count_tokens: Callable[[str], int], options: ChunkingOptions):
        if options.target_tokens > options.max_tokens:
            options = ChunkingOptions(options.max_tokens, options.min_tokens, options.overlap_tokens,
                                      options.max_tokens)
        self.options = options
        self._count = count_tokens
        self._base = count_tokens("")  # prefix and special tokens added to every text

    # -- token arithmetic ------------------------------------------------------------
    def tokens(self, text: str) -> int:
        """Tokens ``text`` adds to a passage as it is embedded (``unbold_labels``), without the per-passage
        prefix/special tokens."""
        return max(self._count(unbold_labels(text)) - self._base, 0)

    # -- public --------------------------------------------------------------------------
    def chunk(self, doc: ParsedDocument) -> list[ChunkDraft]:
        sections = self._merge_small(self._sections(doc.blocks))
        drafts: list[ChunkDraft] = []
        for section in sections:
            drafts.extend(self._pack(doc, section))
        return [d for draft in drafts for d in self._enforce_window(draft)]

    # -- step 1 and 2: sections ---------------------------------------------------------
    def _sections(self, blocks: list[Block]) -> list[_Section]:
        sections: list[_Section] = []
        for block in blocks:
            key = tuple(h for h in block.headings if h.level <= 3)
            if not sections or sections[-1].key != key:
                sections.append(_Section(key))
            sections[-1].blocks.append(block)
            sections[-1].tokens += self.tokens(block.text)
        return sections

    def _merge_small(self, sections: list[_Section]) -> list[_Section]:
        """Join each section under ``min_tokens`` with a neighbour that has the same parent."""
        merged: list[_Section] = []
        carry: _Section | None = None
        for section in sections:
            if carry is not None:
                if _shares_parent(carry.key, section.key):
                    section = _Section(_common_prefix(carry.key, section.key), carry.blocks + section.blocks,
                                       carry.tokens + section.tokens)
                else:
                    merged.append(carry)
                carry = None
            if section.tokens < self.options.min_tokens:
                carry = section
            else:
                merged.append(section)
        if carry is not None:
            previous = merged[-1] if merged else None
            if previous is not None and _shares_parent(carry.key, previous.key):
                merged[-1] = _Section(_common_prefix(previous.key, carry.key), previous.blocks + carry.blocks,
                                      previous.tokens + carry.tokens)
            else:
                merged.append(carry)
        return merged

    # -- step 3: packing ----------------------------------------------------------------
    def _pack(self, doc: ParsedDocument, section: _Section) -> list[ChunkDraft]:
        opts = self.options
        drafts: list[ChunkDraft] = []
        current: list[_Unit] = []
        size = 0
        budget = self._budget(doc, section.key)

        def close() -> None:
            nonlocal current, size
            if current:
                drafts.append(self._draft(doc, current))
            current, size = [], 0

        for block in section.blocks:
            units = self._units(block, budget)
            starts_subsection = bool(current) and current[-1].block.headings != block.headings
            if starts_subsection and size >= opts.min_tokens:
                close()
            for unit in units:
                if current and size + unit.tokens > budget:
                    previous = current
                    close()
                    current = self._overlap(previous, unit, budget)
                    size = sum(u.tokens for u in current)
                current.append(unit)
                size += unit.tokens
        close()
        return drafts

    def _budget(self, doc: ParsedDocument, key: tuple[Heading, ...]) -> int:
        prefix = self.tokens(heading_path_of(doc, key) + "\n\n")
        return max(self.options.target_tokens - self._base - prefix, 32)

    def _overlap(self, previous: list[_Unit], next_unit: _Unit, budget: int) -> list[_Unit]:
        """Trailing prose units of the previous chunk to repeat at the start of the next one."""
        limit = min(self.options.overlap_tokens, budget - next_unit.tokens)
        if limit <= 0 or next_unit.kind not in _PROSE:
            return []
        carried: list[_Unit] = []
        total = 0
        for unit in reversed(previous):
            if unit.kind not in _PROSE or unit.block.headings != next_unit.block.headings:
                break
            if total + unit.tokens > limit:
                break
            carried.insert(0, unit)
            total += unit.tokens
        return carried

    def _draft(self, doc: ParsedDocument, units: list[_Unit]) -> ChunkDraft:
        headings = units[0].block.headings
        for unit in units[1:]:
            headings = _common_prefix(headings, unit.block.headings)
        # Headings inside the chunk (below its heading path) stay in its text as Markdown headings,
        # so a section that was merged into a neighbour keeps its title.
        parts, chain = [], headings
        for n, unit in enumerate(units):
            if n:
                parts.append(unit.joiner)
            if unit.block.headings != chain and (n == 0 or unit.block is not units[n - 1].block):
                inner = unit.block.headings[len(_common_prefix(chain, unit.block.headings)):]
                parts.append("".join(f"{'#' * h.level} {h.title}\n\n" for h in inner))
                chain = unit.block.headings
            parts.append(unit.text)
        text = "".join(parts).strip()
        blocks = [u.block for u in units]
        draft = ChunkDraft(
            text=text,
            heading_path=heading_path_of(doc, headings),
            headings=headings,
            char_start=min(b.start for b in blocks),
            char_end=max(b.end for b in blocks),
            line_start=min(b.line for b in blocks),
            line_end=max(b.end_line for b in blocks),
            continued=any(u.continued for u in units),
            start_headings=units[0].block.headings,
        )
        draft.token_count = self._count(draft.embed_text)
        return draft

    # -- splitting oversized blocks ---------------------------------------------------------
    def _units(self, block: Block, budget: int) -> list[_Unit]:
        tokens = self.tokens(block.text)
        if tokens <= budget:
            return [_Unit(block.text, tokens, block.kind, block)]
        if block.kind == "code":
            return self._split_code(block, budget)
        if block.kind == "table":
            return self._split_table(block, budget)
        if block.kind == "paragraph":
            pieces, joiner, kind = _sentences(block.text), " ", "sentence"
        else:
            pieces, joiner, kind = block.text.split("\n"), "\n", block.kind
        units = []
        for piece in pieces:
            for part in self._fit(piece, budget):
                units.append(_Unit(part, self.tokens(part), kind, block, joiner=joiner if units else "\n\n"))
        return self._regroup(units, budget)

    def _regroup(self, units: list[_Unit], budget: int) -> list[_Unit]:
        """Join consecutive pieces of one block while they fit, so a split list keeps items together."""
        if not units or units[0].kind == "sentence":
            return units  # sentences stay separate: they are the unit of overlap
        grouped = [units[0]]
        for unit in units[1:]:
            last = grouped[-1]
            joined = last.text + unit.joiner + unit.text
            tokens = self.tokens(joined)
            if tokens <= budget:
                grouped[-1] = _Unit(joined, tokens, last.kind, last.block, last.joiner, last.continued)
            else:
                grouped.append(unit)
        return grouped

    def _split_code(self, block: Block, budget: int) -> list[_Unit]:
        lines = block.text.split("\n")
        opening, closing = lines[0], lines[-1] if len(lines) > 1 else lines[0]
        fenced = opening.lstrip().startswith(("```", "~~~")) and closing.strip().startswith(opening.strip()[:3])
        body = lines[1:-1] if fenced and len(lines) >= 2 else lines
        head, tail = (opening + "\n", "\n" + closing) if fenced else ("", "")
        return self._split_lines(block, body, head, tail, budget)

    def _split_table(self, block: Block, budget: int) -> list[_Unit]:
        lines = block.text.split("\n")
        header = lines[:2] if len(lines) > 2 and set(lines[1].replace("|", "").strip()) <= set("-: ") else []
        head = "\n".join(header) + "\n" if header else ""
        return self._split_lines(block, lines[len(header):], head, "", budget)

    def _split_lines(self, block: Block, lines: list[str], head: str, tail: str, budget: int) -> list[_Unit]:
        room = max(budget - self.tokens(head + tail), 16)
        pieces: list[list[str]] = [[]]
        size = 0
        for line in lines:
            for part in self._fit(line, room):
                cost = self.tokens(part + "\n")
                if pieces[-1] and size + cost > room:
                    pieces.append([])
                    size = 0
                pieces[-1].append(part)
                size += cost
        units = []
        for piece in pieces:
            text = head + "\n".join(piece) + tail
            units.append(_Unit(text, self.tokens(text), block.kind, block, continued=True))
        return units

    def _fit(self, text: str, limit: int) -> list[str]:
        """``text`` as one piece if it fits ``limit`` tokens, else split on words (characters as a last resort)."""
        if self.tokens(text) <= limit:
            return [text]
        words = text.split(" ")
        if len(words) == 1:
            return self._fit_chars(text, limit)
        pieces, current = [], []
        for word in words:
            candidate = " ".join([*current, word])
            if current and self.tokens(candidate) > limit:
                pieces.append(" ".join(current))
                current = [word]
            else:
                current.append(word)
        if current:
            pieces.append(" ".join(current))
        return [p for piece in pieces for p in (self._fit_chars(piece, limit) if self.tokens(piece) > limit
                                                else [piece])]

    def _fit_chars(self, text: str, limit: int) -> list[str]:
        pieces = []
        while text:
            low, high = 1, len(text)
            while low < high:  # longest prefix that fits
                mid = (low + high + 1) // 2
                if self.tokens(text[:mid]) <= limit:
                    low = mid
                else:
                    high = mid - 1
            pieces.append(text[:low])
            text = text[low:]
        return pieces

    # -- step 4: the hard window ------------------------------------------------------------
    def _enforce_window(self, draft: ChunkDraft) -> list[ChunkDraft]:
        if draft.token_count <= self.options.max_tokens:
            return [draft]
        room = self.options.max_tokens - self._base - self.tokens(draft.heading_path + "\n\n")
        out = []
        for piece in self._fit(draft.text, max(room, 16)):
            part = ChunkDraft(piece, draft.heading_path, draft.headings, draft.char_start, draft.char_end,
                              draft.line_start, draft.line_end, continued=True, start_headings=draft.start_headings)
            part.token_count = self._count(part.embed_text)
            out.append(part)
        return out


def heading_path_of(doc: ParsedDocument, headings: tuple[Heading, ...]) -> str:
    """``Category > Page title > Section > Subsection`` (an H1 equal to the title is not repeated)."""
    parts = [doc.category] if doc.category else []
    parts.append(doc.title)
    parts += [h.title for h in headings if not (h.level == 1 and h.title.strip() == doc.title.strip())]
    return HEADING_SEPARATOR.join(p for p in parts if p)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()] or [text]


def _common_prefix(a: tuple[Heading, ...], b: tuple[Heading, ...]) -> tuple[Heading, ...]:
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return a[:n]


def _shares_parent(a: tuple[Heading, ...], b: tuple[Heading, ...]) -> bool:
    """True when both sections sit under the same parent heading (or ``b`` is inside ``a``'s parent)."""
    parent = a[:-1]
    return b[: len(parent)] == parent
