"""An mdBook's ``book.toml`` and what bookchat reads from it; ``read_mdbook`` reads the book with its SUMMARY.md."""

from __future__ import annotations

import posixpath
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ingestion.reading.mdbook.html import DEFAULT_SITE_URL, page_url
from ingestion.reading.mdbook.summary import Chapter, parse_summary

CONFIG_FILE = "book.toml"
SUMMARY_FILE = "SUMMARY.md"
DEFAULT_SRC = "src"
DEFAULT_LANGUAGE = "en"


@dataclass
class MdBook:
    """An mdBook's configuration and navigation, read from ``book.toml`` and ``SUMMARY.md``."""

    root: Path
    title: str | None = None
    src: Path = Path(DEFAULT_SRC)  # relative to ``root`` as written in book.toml (``source_dir`` is absolute)
    site_url: str = DEFAULT_SITE_URL
    language: str = DEFAULT_LANGUAGE
    chapters: list[Chapter] = field(default_factory=list)
    hidelines: dict[str, str] = field(default_factory=dict)  # language → prefix of hidden lines
    smart_punctuation: bool = True
    index_readme: bool = True  # whether the ``index`` preprocessor turns README.md into index.html
    summary_title: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def source_dir(self) -> Path:
        return self.root / self.src

    @property
    def pages(self) -> list[str]:
        """The chapters' files that exist, in SUMMARY order (drafts and missing files are not pages)."""
        seen: set[str] = set()
        pages = []
        for chapter in self.chapters:
            if chapter.path and chapter.path not in seen and (self.source_dir / chapter.path).is_file():
                seen.add(chapter.path)
                pages.append(chapter.path)
        return pages

    def is_page(self, rel_path: str) -> bool:
        """Whether ``rel_path`` (relative to the source folder) is rendered as a page of the book."""
        return posixpath.normpath(rel_path) in self.pages

    def url(self, rel_path: str) -> str:
        """The page's URL in this book (see :func:`page_url`)."""
        return page_url(self.site_url, rel_path, index_readme=self.index_readme)


def read_mdbook(root: Path) -> MdBook | None:
    """The mdBook at ``root``; None when there is no ``root/book.toml``. Never raises for bad input."""
    root = Path(root)
    config_path = root / CONFIG_FILE
    if not config_path.is_file():
        return None
    book = MdBook(root=root)
    config = _read_toml(config_path, book.warnings)
    _apply_config(book, config)
    summary_path = book.source_dir / SUMMARY_FILE
    if not book.source_dir.is_dir():
        book.warnings.append(f"source folder {book.src.as_posix()}/ not found")
        return book
    if not summary_path.is_file():
        book.warnings.append(f"{_rel(book, summary_path)} not found: mdBook has no chapters without it")
        return book
    try:
        text = summary_path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        book.warnings.append(f"{_rel(book, summary_path)} not read ({exc})")
        return book
    book.summary_title, chapters, warnings = parse_summary(text)
    book.warnings += [f"{_rel(book, summary_path)}: {w}" for w in warnings]
    book.chapters = _checked_chapters(book, chapters)
    return book


def _read_toml(path: Path, warnings: list[str]) -> dict:
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        warnings.append(f"{CONFIG_FILE} not read ({exc}); mdBook's defaults are used")
        return {}


def _apply_config(book: MdBook, config: dict) -> None:
    def table(data: object, *keys: str) -> dict:
        for key in keys:
            data = data.get(key) if isinstance(data, dict) else None
        return data if isinstance(data, dict) else {}

    def value(data: dict, key: str, kind: type, where: str):
        found = data.get(key)
        if found is None:
            return None
        if not isinstance(found, kind) or (kind is str and not found.strip()):
            book.warnings.append(f"{CONFIG_FILE}: {where}.{key} is not a{' non-empty' if kind is str else ''} "
                                 f"{kind.__name__}; ignored")
            return None
        return found

    meta, html = table(config, "book"), table(config, "output", "html")
    book.title = value(meta, "title", str, "[book]")
    src = value(meta, "src", str, "[book]")
    if src is not None:
        book.src = Path(src)
    book.language = value(meta, "language", str, "[book]") or DEFAULT_LANGUAGE
    book.site_url = value(html, "site-url", str, "[output.html]") or DEFAULT_SITE_URL
    smart = value(html, "smart-punctuation", bool, "[output.html]")
    if smart is None:  # mdBook 0.4's name (off by default there); 0.5 turned it on by default
        smart = value(html, "curly-quotes", bool, "[output.html]")
    book.smart_punctuation = True if smart is None else smart
    for language, prefix in table(html, "code", "hidelines").items():
        if isinstance(prefix, str) and prefix:
            book.hidelines[language] = prefix
        else:
            book.warnings.append(f"{CONFIG_FILE}: [output.html.code.hidelines].{language} is not a prefix; ignored")
    defaults = value(table(config, "build"), "use-default-preprocessors", bool, "[build]")
    book.index_readme = defaults is not False or "index" in table(config, "preprocessor")


def _rel(book: MdBook, path: Path) -> str:
    try:
        return path.relative_to(book.root).as_posix()
    except ValueError:
        return path.as_posix()


def _checked_chapters(book: MdBook, chapters: list[Chapter]) -> list[Chapter]:
    """The chapters, each file checked: out of the source folder or listed twice → left out; missing → warned."""
    kept, seen = [], set()
    for chapter in chapters:
        if chapter.path is not None:
            if chapter.path.startswith("../") or chapter.path == ".." or chapter.path.startswith("/"):
                book.warnings.append(f"chapter {chapter.title!r} links to {chapter.path}, outside the source "
                                     "folder; not indexed")
                continue
            if chapter.path in seen:
                book.warnings.append(f"{chapter.path} is listed twice in {SUMMARY_FILE} (mdBook stops there); "
                                     f"{chapter.title!r} left out")
                continue
            seen.add(chapter.path)
            if not (book.source_dir / chapter.path).is_file():
                book.warnings.append(f"chapter {chapter.title!r}: {book.src.as_posix()}/{chapter.path} not found "
                                     "(mdBook builds it as an empty page)")
        kept.append(chapter)
    return kept
