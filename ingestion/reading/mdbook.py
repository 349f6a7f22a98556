"""mdBook conventions: its ``book.toml``, its ``SUMMARY.md``, its page URLs and heading ids, and what its
preprocessors and renderer do to a chapter's text (``{{#title}}``, ``{{#playground}}``, hidden code lines).

Pure functions, no Django: the indexer decides what to do with them. They mirror mdBook 0.5 (crates
``mdbook-core`` config, ``mdbook-summary``, ``mdbook-driver``'s ``index`` and ``links`` preprocessors,
``mdbook-html``'s ``utils.rs``, ``tree.rs`` and ``hide_lines.rs``) and the guide that documents them, so that
what we cite is what ``mdbook build`` serves.

Decisions:
- ``book.toml`` is read with ``tomllib``; bad input never raises: an unreadable file or a value of the wrong
  type is a warning and mdBook's default (``src``, language ``en``, ``site-url`` ``/``, smart punctuation on).
  Environment overrides (``MDBOOK_BOOK__SRC``…) are not read.
- ``SUMMARY.md`` is parsed as mdBook's ``SummaryParser`` does, on CommonMark tokens: the first ``# h1`` (when
  it comes first) is the summary's title; then prefix chapters (links before the first list), numbered
  chapters (lists, nested at any depth; ``# h1`` part titles between them; numbering goes on across lists
  and parts, drafts are numbered too), then suffix chapters (links after the last list). Where mdBook would
  stop the build (a list item that is not a link, a list after the suffix chapters, a file listed twice) we
  warn and leave that item out. Links are raw destinations (``<…>`` unwrapped, escapes and entities
  resolved) in which, as mdBook does, only ``%20`` is decoded; ``./`` and ``a/../`` are normalised; a link
  out of the source folder is a warning and not a page.
- A chapter whose file is missing stays in the navigation with a warning (mdBook creates it empty, as
  ``create-missing`` is on by default) but is not a page. Pages are the chapters with an existing file, in
  SUMMARY order; SUMMARY.md, files it does not list (included snippets, ``404.md``) and drafts are not pages.
- URLs: ``<site-url><path>.html``; a ``README.md`` (file stem ``readme`` in any case, any extension, any
  folder) is that folder's ``index.html`` while the ``index`` preprocessor runs (the default); ``site-url``
  is joined with exactly one ``/``, so with mdBook's default ``/`` the URL is root-relative (``/ch01.html``)
  until a base URL is given. The path is percent-encoded as a browser requests it (space → ``%20``,
  non-ASCII as UTF-8); ``index.html`` is kept, as mdBook's own links keep it.
- Heading ids: mdBook's ``id_from_content`` on the heading's rendered text, then ``unique_id`` within the
  page (``x``, ``x-1``, ``x-2``…, the first suffix not taken). A ``{#custom}`` id from a heading attribute
  block is used verbatim and, as in mdBook, takes no part in the counting. Rust's ``char::is_alphanumeric``
  (Unicode ``Alphabetic``/``Numeric``) is approximated with ``unicodedata``: letters, numbers, spacing
  marks, vowel-sign-like non-spacing marks and the circled/squared letters are kept; other marks (accents,
  viramas) are dropped, as in mdBook.
- ``{{#title}}`` and hidden lines are applied to raw text, as mdBook's preprocessor does (inside code blocks
  too); hidden code lines (``# `` in Rust, ``[output.html.code.hidelines]`` or ``hidelines=`` for other
  languages) are not part of what the page shows and are dropped (or blanked, to keep line numbers).
"""

from __future__ import annotations

import posixpath
import re
import tomllib
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from markdown_it import MarkdownIt

CONFIG_FILE = "book.toml"
SUMMARY_FILE = "SUMMARY.md"
DEFAULT_SRC = "src"
DEFAULT_LANGUAGE = "en"
DEFAULT_SITE_URL = "/"


@dataclass(frozen=True)
class Chapter:
    """One entry of ``SUMMARY.md``."""

    title: str
    path: str | None  # relative to the source folder, posix; None for a draft chapter
    number: str | None = None  # "4.1" for numbered chapters; None for prefix and suffix chapters
    level: int = 1  # 1 for prefix, suffix and top-level numbered chapters; 2 for their sub-chapters…
    part: str | None = None  # the part title (``# Part`` in SUMMARY.md) the chapter is under

    @property
    def draft(self) -> bool:
        return self.path is None


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


# -- book.toml ------------------------------------------------------------------------------------------


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


# -- SUMMARY.md -----------------------------------------------------------------------------------------


def parse_summary(text: str) -> tuple[str | None, list[Chapter], list[str]]:
    """``(summary title, chapters in order, warnings)`` of a ``SUMMARY.md``'s text (see the module docstring).
    Separators (``---``) are read and skipped: they are not chapters."""
    markdown = MarkdownIt("commonmark")
    markdown.normalizeLink = lambda url: url  # keep destinations as written, as pulldown-cmark does
    markdown.validateLink = lambda url: True
    tokens = markdown.parse(text)
    return _SummaryParser(tokens).parse()


class _SummaryParser:
    def __init__(self, tokens: list):
        self.tokens = tokens
        self.pos = 0
        self.chapters: list[Chapter] = []
        self.warnings: list[str] = []

    def parse(self) -> tuple[str | None, list[Chapter], list[str]]:
        title = self._title()
        self._affix(prefix=True)
        self._numbered_parts()
        self._affix(prefix=False)
        return title, self.chapters, self.warnings

    # The title: an h1 that comes first (HTML blocks before it are skipped).
    def _title(self) -> str | None:
        while self.pos < len(self.tokens) and self.tokens[self.pos].type == "html_block":
            self.pos += 1
        if self._at("heading_open", "h1"):
            title = _inline_text(self.tokens[self.pos + 1])
            self.pos += 3
            return title
        return None

    def _affix(self, *, prefix: bool) -> None:
        while self.pos < len(self.tokens):
            token = self.tokens[self.pos]
            if token.type in ("bullet_list_open", "ordered_list_open") or self._at("heading_open", "h1"):
                if not prefix:
                    line = token.map[0] + 1 if token.map else "?"
                    self.warnings.append(f"line {line}: suffix chapters cannot be followed by a list or a part "
                                         "title (mdBook stops there); the rest is not read")
                    self.pos = len(self.tokens)
                return
            if token.type == "inline":
                for name, href in _links(token):
                    self.chapters.append(Chapter(name, _chapter_path(href)))
            self.pos += 1

    def _numbered_parts(self) -> None:
        counter = [0]  # top-level numbers go on across lists and parts
        part = None
        while self.pos < len(self.tokens):
            if self._at("paragraph_open"):
                return  # the suffix chapters
            if self._at("heading_open", "h1"):
                part = _inline_text(self.tokens[self.pos + 1])
                self.pos += 3
            self._numbered(counter, part)

    def _numbered(self, counter: list[int], part: str | None) -> None:
        first = True
        while self.pos < len(self.tokens):
            token = self.tokens[self.pos]
            if token.type == "paragraph_open":
                if not first:
                    return
                self.pos = self._close_of(self.pos) + 1  # mdBook skips a paragraph right after a part title
            elif self._at("heading_open", "h1"):
                return
            elif token.type in ("bullet_list_open", "ordered_list_open"):
                self._list(parent=(), counter=counter, part=part)
            elif token.nesting == 1:
                self.pos = self._close_of(self.pos) + 1  # any other block is skipped with its content
            else:
                self.pos += 1  # hr (a separator), code, html…
            first = False

    def _list(self, *, parent: tuple[int, ...], counter: list[int] | None, part: str | None) -> None:
        """The list at ``self.pos``; ``counter``: the numbers already used at the top level (None below it)."""
        close = self._close_of(self.pos)
        self.pos += 1
        index = 0
        while self.pos < close:
            token = self.tokens[self.pos]
            if token.type != "list_item_open":
                self.pos += 1
                continue
            item_close = self._close_of(self.pos)
            link = self._item_link(self.pos, item_close)
            if link is None:
                line = token.map[0] + 1 if token.map else "?"
                self.warnings.append(f"line {line}: a list item must be only a link (mdBook stops there); "
                                     "left out with its sub-chapters")
                self.pos = item_close + 1
                continue
            index += 1
            number = (*parent, index + (counter[0] if counter is not None else 0))
            name, href = link
            self.chapters.append(Chapter(name, _chapter_path(href), ".".join(map(str, number)), len(number), part))
            self.pos += 1
            while self.pos < item_close:
                if self.tokens[self.pos].type in ("bullet_list_open", "ordered_list_open"):
                    self._list(parent=number, counter=None, part=part)
                else:
                    self.pos += 1
            self.pos = item_close + 1
        if counter is not None:
            counter[0] += index
        self.pos = close + 1

    def _item_link(self, start: int, close: int) -> tuple[str, str] | None:
        """The link a list item starts with (its first block's inline content must start with it)."""
        for token in self.tokens[start + 1:close]:
            if token.type == "paragraph_open":
                continue
            if token.type != "inline":
                return None
            children = [child for child in token.children or [] if not (child.type == "text" and not child.content)]
            if not children or children[0].type != "link_open":
                return None
            return next(iter(_links(token)))
        return None

    def _at(self, kind: str, tag: str | None = None) -> bool:
        if self.pos >= len(self.tokens):
            return False
        token = self.tokens[self.pos]
        return token.type == kind and (tag is None or token.tag == tag)

    def _close_of(self, start: int) -> int:
        depth = 0
        for index in range(start, len(self.tokens)):
            depth += self.tokens[index].nesting
            if depth == 0:
                return index
        return len(self.tokens) - 1


def _links(inline) -> list[tuple[str, str]]:
    """``(name, href)`` of each link in an inline token: the name is its text and code, as mdBook takes it."""
    found, name, href = [], None, None
    for child in inline.children or []:
        if child.type == "link_open" and name is None:
            name, href = [], child.attrGet("href") or ""
        elif child.type == "link_close" and name is not None:
            found.append(("".join(name), href))
            name = None
        elif name is not None:
            name.append(_child_text(child))
    return found


def _inline_text(inline) -> str:
    return "".join(_child_text(child) for child in inline.children or [])


def _child_text(child) -> str:
    if child.type in ("text", "code_inline"):
        return child.content
    if child.type == "softbreak":
        return " "
    if child.type == "image":  # pulldown-cmark gives the alt text as text events
        return "".join(_child_text(c) for c in child.children or [])
    return ""


def _chapter_path(href: str) -> str | None:
    """The chapter's file from its link: None for a draft (``[Title]()``); only ``%20`` is decoded, as in mdBook."""
    if not href:
        return None
    path = posixpath.normpath(href.replace("%20", " ").replace("\\", "/"))
    return path.removeprefix("./")


# -- URLs -----------------------------------------------------------------------------------------------

# Characters a browser leaves as they are in a URL path (RFC 3986 pchar and "/"); the rest is percent-encoded.
_PATH_SAFE = "/!$&'()*+,;=:@~-._"


def html_path(rel_path: str, *, index_readme: bool = True) -> str:
    """The file mdBook writes for a chapter: ``ch01.md`` → ``ch01.html``; ``README.md`` → ``index.html`` of its
    folder while the ``index`` preprocessor runs."""
    path = PurePosixPath(posixpath.normpath(rel_path.replace("\\", "/")).removeprefix("./"))
    if index_readme and path.stem.lower() == "readme":
        path = path.with_name("index.md")
    return (path.with_suffix(".html") if path.suffix else path.with_name(path.name + ".html")).as_posix()


def page_url(site_url: str, rel_path: str, *, index_readme: bool = True) -> str:
    """A chapter's URL: ``site_url`` (``/`` by default: the URL is then root-relative) + its HTML file,
    percent-encoded as a browser requests it."""
    base = (site_url or DEFAULT_SITE_URL).rstrip("/") + "/"
    return base + quote(html_path(rel_path, index_readme=index_readme), safe=_PATH_SAFE)


# -- Heading ids ----------------------------------------------------------------------------------------

# Rust's char::is_whitespace (Unicode White_Space).
_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
                        + "".join(chr(c) for c in range(0x2000, 0x200B)))
# Non-spacing marks that are Unicode Alphabetic (vowel signs and the like), by name.
_ALPHABETIC_MARK_WORDS = ("VOWEL", "ANUSVARA", "CANDRABINDU", "VISARGA", "SIGN AA", "LENGTH MARK", "SUBJOINED",
                          "MEDIAL", "HEBREW POINT", "ARABIC FATHA", "ARABIC KASRA", "ARABIC DAMMA", "ARABIC SUKUN",
                          "ARABIC SHADDA")
# Symbols that are Unicode Alphabetic: circled letters, and the squared/negative letters of the SMP.
_ALPHABETIC_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))
# A heading attribute block (pulldown-cmark): ``{…}`` at the end, with no ``{}<>\`` inside.
_ATTRIBUTE_BLOCK = re.compile(r"\{(?P<attrs>[^{}<>\\\n]*)\}[ \t]*$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")


def _is_alphanumeric(char: str) -> bool:
    """Rust's ``char::is_alphanumeric`` (Unicode Alphabetic or Numeric), approximated with ``unicodedata``."""
    category = unicodedata.category(char)
    if category[0] in "LN" or category == "Mc":
        return True
    if category == "Mn":
        name = unicodedata.name(char, "")
        return any(word in name for word in _ALPHABETIC_MARK_WORDS)
    code = ord(char)
    return category == "So" and any(low <= code <= high for low, high in _ALPHABETIC_SYMBOLS)


def normalize_id(text: str) -> str:
    """mdBook's id for a heading's text: trimmed, lowercased; alphanumerics, ``_`` and ``-`` kept, each
    whitespace character → ``-``, everything else dropped; ``section`` when nothing is left."""
    out = []
    for char in _strip_whitespace(text).lower():
        if char in "_-" or _is_alphanumeric(char):
            out.append(char)
        elif char in _WHITESPACE:
            out.append("-")
    return "".join(out) or "section"


def _strip_whitespace(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] in _WHITESPACE:
        start += 1
    while end > start and text[end - 1] in _WHITESPACE:
        end -= 1
    return text[start:end]


def unique_id(base: str, seen: dict[str, int]) -> str:
    """``base``, or the first of ``base-1``, ``base-2``… not yet in ``seen`` (the ids given so far in the page;
    each maps to the last suffix tried for it), as mdBook's ``unique_id``."""
    if base not in seen:
        seen[base] = 0
        return base
    count = seen[base]
    while True:
        count += 1
        candidate = f"{base}-{count}"
        if candidate not in seen:
            seen[base] = count
            seen[candidate] = 0
            return candidate


def heading_id(text: str, seen: dict[str, int], *, custom_id: str | None = None) -> str:
    """The id mdBook gives a heading whose rendered text is ``text`` (inline markup rendered: code kept, emphasis
    markers, HTML tags and image alt texts gone, entities decoded, smart punctuation applied — see
    :func:`smart_dashes`), unique within the page (``seen``: one dict per page, also for definition-list terms).
    A ``custom_id`` (from ``{#id}``) is returned as is and not counted."""
    if custom_id:
        return custom_id
    return unique_id(normalize_id(text), seen)


def split_heading_attributes(heading: str) -> tuple[str, str | None, list[str]]:
    """A heading's source content → ``(content, custom id or None, classes)``: a trailing ``{#id .class key=v}``
    block (pulldown-cmark's heading attributes: space-separated, the last ``#id`` wins, empty ones ignored) is
    removed, then an ATX closing sequence (``## Title ## {#id}``)."""
    match = _ATTRIBUTE_BLOCK.search(heading)
    if match is None:
        return heading.strip(), None, []
    custom, classes = None, []
    for attribute in match.group("attrs").split():
        if attribute.startswith("#"):
            custom = attribute[1:] or custom
        elif attribute.startswith(".") and attribute[1:]:
            classes.append(attribute[1:])
    content = heading[:match.start()].rstrip(" \t")
    content = _CLOSING_HASHES.sub("", content) if content.endswith("#") else content
    return content.strip(" \t"), custom, classes


def smart_dashes(text: str) -> str:
    """pulldown-cmark's smart punctuation for dashes and ellipses, as mdBook renders text outside code (on by
    default): ``---`` → em dash, ``--`` → en dash, ``...`` → ``…``. In an id, this makes ``--`` vanish."""
    def dashes(match: re.Match) -> str:
        count = len(match.group())
        if count % 3 == 0:
            return "—" * (count // 3)
        if count % 2 == 0:
            return "–" * (count // 2)
        if count % 3 == 2:
            return "—" * (count // 3) + "–"
        return "—" * ((count - 4) // 3) + "––"
    return re.sub(r"-{2,}", dashes, text).replace("...", "…")


# -- What the renderer shows ----------------------------------------------------------------------------

_RUST_HIDDEN = re.compile(r"^(\s*)#(.?)(.*)$", re.S)
# mdBook's link preprocessor: an escaped ``\{{#…}}`` (left alone) or ``{{#type argument}}``.
_DIRECTIVE = re.compile(r"\\\{\{#.*\}\}|\{\{\s*#([a-zA-Z0-9_]+)\s+([^}]+)\}\}")


def hide_rust_lines(code: str, *, blank: bool = False) -> str:
    """A Rust code block as mdBook shows it: lines whose first non-blank character is ``#`` followed by a space
    or nothing are hidden (dropped, or emptied with ``blank``); ``##`` shows as ``#``; ``#[attr]``, ``#!`` stay."""
    out = []
    for line in code.split("\n"):
        match = _RUST_HIDDEN.match(line.removesuffix("\r"))
        if match and match.group(2) == "#":
            out.append(match.group(1) + "#" + match.group(3))
        elif match and match.group(2) in ("", " "):
            if blank:
                out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def hide_prefixed_lines(code: str, prefix: str, *, blank: bool = False) -> str:
    """A code block with a ``hidelines`` prefix as mdBook shows it: lines that start with ``prefix`` after their
    indentation are hidden (dropped, or emptied with ``blank``)."""
    if not prefix:
        return code
    out = []
    for line in code.split("\n"):
        if line.lstrip().startswith(prefix):
            if blank:
                out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def code_language(info: str) -> str:
    """A fenced block's language as mdBook reads its info string: the first word (split on spaces, tabs, ``,``)."""
    words = [word for word in re.split(r"[ \t,]", info) if word]
    return words[0] if words else ""


def visible_code(code: str, info: str, hidelines: dict[str, str] | None = None, *, blank: bool = False) -> str:
    """A fenced code block's content without its hidden lines: the Rust rule for ``rust``; for other languages
    a ``hidelines=<prefix>`` word of the info string, else the language's prefix in ``hidelines`` (book.toml)."""
    words = [word for word in re.split(r"[ \t,]", info) if word]
    language = code_language(info)
    if language == "rust":
        return hide_rust_lines(code, blank=blank)
    prefix = next((word.removeprefix("hidelines=") for word in words[1:] if word.startswith("hidelines=")), None)
    prefix = prefix if prefix is not None else (hidelines or {}).get(language) if language else None
    return hide_prefixed_lines(code, prefix, blank=blank) if prefix else code


def title_directive(text: str) -> tuple[str, str | None]:
    """``text`` without its ``{{#title …}}`` directives (the page's ``<title>``; the last one wins), and that
    title or None. What the directive spanned is removed but its newlines stay, so line numbers don't change;
    an escaped ``\\{{#title …}}`` is left as it is."""
    title = None

    def replace(match: re.Match) -> str:
        nonlocal title
        if match.group(1) != "title":
            return match.group()
        title = match.group(2).strip() or None
        return "\n" * match.group().count("\n")

    replaced = _DIRECTIVE.sub(replace, text)
    if replaced == text:
        return text, None
    # Each directive is replaced by its newlines: the lines correspond one to one.
    lines = [line if line.strip() or not old.strip() else ""
             for line, old in zip(replaced.split("\n"), text.split("\n"), strict=True)]
    return "\n".join(lines), title


def playground_block(code: str, attributes: list[str] | None = None) -> str:
    """What ``{{#playground file attr…}}`` stands for: the file in a ```` ```rust,attr… ```` block (mdBook's links
    preprocessor), ending in a newline."""
    info = ",".join(["rust", *(attributes or [])])
    body = code if code.endswith("\n") else code + "\n"
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}{info}\n{body}{fence}\n"
