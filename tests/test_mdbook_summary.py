"""``ingestion.reading.mdbook.summary``: SUMMARY.md read into chapters, on the cases the book-level tests in
tests/test_mdbook.py leave out (link names with images and line breaks, paths mdBook normalises, separators)."""

from __future__ import annotations

from ingestion.reading.mdbook.summary import Chapter, parse_summary


def test_a_link_name_keeps_image_alt_text_and_joins_its_lines():
    _, chapters, _ = parse_summary("- [![logo](x.png) Intro](intro.md)\n- [Two\nlines](two.md)\n")
    assert [c.title for c in chapters] == ["logo Intro", "Two lines"]


def test_paths_decode_only_space_and_are_normalised():
    _, chapters, _ = parse_summary("- [A](a%20b\\c.md)\n- [B](./x/../y.md)\n- [C](caf%C3%A9.md)\n")
    assert [c.path for c in chapters] == ["a b/c.md", "y.md", "caf%C3%A9.md"]


def test_separators_are_skipped_and_numbering_goes_on():
    _, chapters, warnings = parse_summary("- [A](a.md)\n\n---\n\n- [B](b.md)\n")
    assert chapters == [Chapter("A", "a.md", "1", 1), Chapter("B", "b.md", "2", 1)] and warnings == []


def test_a_paragraph_right_after_a_part_title_is_not_a_suffix_chapter():
    text = "# Summary\n\n# Part\n\nAn intro to the part.\n\n- [A](a.md)\n\n[End](end.md)\n"
    title, chapters, _ = parse_summary(text)
    assert title == "Summary"
    assert chapters == [Chapter("A", "a.md", "1", 1, "Part"), Chapter("End", "end.md")]


def test_a_draft_is_a_chapter_without_a_path():
    _, [chapter], _ = parse_summary("- [Soon]()\n")
    assert chapter.draft and chapter.path is None and chapter.number == "1"
