"""A passage read as blocks of answer units, in the book's order: paragraphs of sentences, lists of items, code
blocks, tables of rows. The extractive generator (``chat.pipeline.extractive``) composes answers from them, and sentence
vectors (``chat.pipeline.sentences``) are made for the units that read as prose (``answer_units``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chat.pipeline.terms import content_terms, split_sentences
from ingestion.reading.fences import closes, opening

MAX_CODE_LINES = 20  # a longer code block is shortened at a line boundary, with SHORTENED as its last line
SHORTENED = "…"
MAX_UNIT_CHARS = 600
LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")
# A "how do I…" sentence anywhere in the question ("The build fails. How do I…"), not only at its start.


@dataclass
class Unit:
    source: int  # 1-based source number
    block: int  # index of its block within the source
    position: int  # order within its source
    text: str
    kind: str  # sentence, item, row, code
    terms: frozenset[str]
    score: float = 0.0


@dataclass
class Block:
    kind: str  # paragraph, list, code, table
    units: list[Unit] = field(default_factory=list)
    ordered: bool = False
    header: list[str] = field(default_factory=list)  # a table's column names
    depths: list[int] = field(default_factory=list)  # a list's item indents


def blocks_of(text: str, source: int) -> list[Block]:
    """A passage's text as blocks of answer units, in the book's order."""
    return _BlockReader(text, source).read()


class _BlockReader:
    """Reads a passage line by line into blocks: a fence is one code unit, a list one unit per item, a table one
    per row (the row above its rule holds the column names), a paragraph one per sentence."""

    def __init__(self, text: str, source: int):
        self.lines = text.split("\n")  # as the fence reader splits: a U+2028 inside a line is not a line break
        self.source = source
        self.blocks: list[Block] = []
        self.position = 0
        self.paragraph: list[str] = []

    def read(self) -> list[Block]:
        i = 0
        while i < len(self.lines):
            line = self.lines[i]
            if fence := opening(line):
                self.flush()
                i = self.fenced(i, fence)
            elif not line.strip() or HEADING.match(line):
                self.flush()
            elif item := LIST_ITEM.match(line):
                self.flush()
                i = self.listed(i, ordered=item.group(2)[0].isdigit())
            elif line.lstrip().startswith("|"):
                self.flush()
                i = self.table(i)
            else:
                self.paragraph.append(line.strip())
            i += 1
        self.flush()
        return self.blocks

    def unit(self, body: str, kind: str) -> Unit | None:
        terms = frozenset(content_terms(body))
        if not terms and kind != "code":
            return None
        self.position += 1
        return Unit(self.source, len(self.blocks), self.position, body, kind, terms)

    def add(self, block: Block) -> None:
        if block.units:
            self.blocks.append(block)

    def flush(self) -> None:
        if self.paragraph:
            block = Block("paragraph")
            for sentence in split_sentences(" ".join(self.paragraph)):
                if (u := self.unit(sentence[:MAX_UNIT_CHARS], "sentence")) is not None:
                    block.units.append(u)
            self.paragraph.clear()
            self.add(block)

    def fenced(self, i: int, fence: re.Match) -> int:
        """The fence opening at line ``i``: one code unit. Returns the index of its last line."""
        lines, body = self.lines, [self.lines[i]]
        i += 1
        while i < len(lines):
            body.append(lines[i])
            if closes(lines[i], fence["marker"]):
                break
            i += 1
        if (u := self.unit("\n".join(_shortened(body, fence)), "code")) is not None:
            self.blocks.append(Block("code", [u]))
        return i

    def listed(self, i: int, *, ordered: bool) -> int:
        """The list starting at line ``i``: one unit per item (its indented lines joined); a blank line between
        items keeps the list going. Returns the index of its last line."""
        lines, block = self.lines, Block("list", ordered=ordered)
        while i < len(lines) and (item := LIST_ITEM.match(lines[i])):
            body = [LIST_ITEM.sub("", lines[i], count=1)]
            while (i + 1 < len(lines) and lines[i + 1].startswith(("  ", "\t")) and lines[i + 1].strip()
                   and not LIST_ITEM.match(lines[i + 1]) and not opening(lines[i + 1])):
                i += 1
                body.append(lines[i].strip())
            if (u := self.unit(" ".join(body)[:MAX_UNIT_CHARS], "item")) is not None:
                block.units.append(u)
                block.depths.append(len(item.group(1).expandtabs(4)))
            if i + 2 < len(lines) and not lines[i + 1].strip() and LIST_ITEM.match(lines[i + 2]):
                i += 1
            i += 1
        self.add(block)
        return i - 1

    def table(self, i: int) -> int:
        """The table starting at line ``i``: one unit per row. Returns the index of its last line."""
        lines, block = self.lines, Block("table")
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            if TABLE_RULE.match(lines[i]):
                if not block.header and block.units:  # the row above the rule held the column names
                    block.header = re.split(r"\s+—\s+", block.units.pop().text)
            elif (u := self.unit(" — ".join(c for c in cells if c)[:MAX_UNIT_CHARS], "row")) is not None:
                block.units.append(u)
            i += 1
        self.add(block)
        return i - 1


def _shortened(fenced: list[str], fence: re.Match) -> list[str]:
    """A fenced block's lines (``fence``: its opening), its code cut after ``MAX_CODE_LINES`` lines with a line
    ``…`` (the answer then says where the rest is); a block without its closing fence (the passage ends inside
    it) is closed."""
    closed = len(fenced) > 1 and closes(fenced[-1], fence["marker"])
    code = fenced[1:-1] if closed else fenced[1:]
    closing = fenced[-1] if closed else fence["indent"] + fence["marker"]
    if len(code) > MAX_CODE_LINES:
        cut = MAX_CODE_LINES
        while cut > MAX_CODE_LINES // 2 and code[cut - 1].strip():  # end on a blank line when one is near
            cut -= 1
        cut = cut if cut > MAX_CODE_LINES // 2 else MAX_CODE_LINES
        indent = code[cut - 1][:len(code[cut - 1]) - len(code[cut - 1].lstrip())]
        code = [*code[:cut], f"{indent}{SHORTENED}"]
    return [fenced[0], *code, closing]


def answer_units(blocks: list[Block]) -> list[Unit]:
    """A passage's units that can be read as prose (code blocks aside), in its order: the units sentence
    vectors are made for (``chat.pipeline.sentences``)."""
    return [u for block in blocks for u in block.units if u.kind != "code"]
