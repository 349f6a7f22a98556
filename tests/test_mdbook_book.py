"""``ingestion.reading.mdbook.book``: book.toml's settings and the pages ``read_mdbook`` finds, on the cases
tests/test_mdbook.py leaves out (mdBook 0.4's ``curly-quotes``, a byte-order mark, pages by normalised path)."""

from __future__ import annotations

from pathlib import Path

from ingestion.reading.mdbook.book import MdBook, read_mdbook
from ingestion.reading.mdbook.summary import Chapter


def _book(root: Path, toml: str, summary: str, files: tuple[str, ...]) -> Path:
    (root / "book.toml").write_text(toml, encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "SUMMARY.md").write_text(summary, encoding="utf-8")
    for name in files:
        (root / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "src" / name).write_text(f"# {name}\n", encoding="utf-8")
    return root


def test_curly_quotes_is_read_when_smart_punctuation_is_not_set(tmp_path):
    book = read_mdbook(_book(tmp_path, "[output.html]\ncurly-quotes = false\n", "- [A](a.md)\n", ("a.md",)))
    assert book.smart_punctuation is False and book.warnings == []


def test_a_byte_order_mark_and_wrong_types_are_read_or_warned(tmp_path):
    toml = "\ufeff[book]\ntitle = 'T'\nlanguage = ''\n[output.html]\nsite-url = 5\n"
    book = read_mdbook(_book(tmp_path, toml, "- [A](a.md)\n", ("a.md",)))
    assert (book.title, book.language, book.site_url) == ("T", "en", "/")
    assert book.warnings == ["book.toml: [book].language is not a non-empty str; ignored",
                             "book.toml: [output.html].site-url is not a non-empty str; ignored"]


def test_is_page_normalises_the_path_and_url_uses_the_site_url(tmp_path):
    toml = "[output.html]\nsite-url = '/docs/'\n"
    book = read_mdbook(_book(tmp_path, toml, "- [Intro](guide/README.md)\n", ("guide/README.md",)))
    assert book.is_page("guide/./README.md") and not book.is_page("SUMMARY.md")
    assert book.url("guide/README.md") == "/docs/guide/index.html"


def test_pages_skip_drafts_and_missing_files_in_summary_order(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "b.md").write_text("# B\n")
    (tmp_path / "src" / "a.md").write_text("# A\n")
    book = MdBook(root=tmp_path, chapters=[Chapter("B", "b.md", "1"), Chapter("Draft", None, "2"),
                                           Chapter("Gone", "gone.md", "3"), Chapter("A", "a.md", "4")])
    assert book.pages == ["b.md", "a.md"]
