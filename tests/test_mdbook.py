"""mdBook conventions (``ingestion.reading.mdbook``): book.toml, SUMMARY.md, URLs, heading ids, hidden lines.

Pure functions: no database. The expected values are written by hand from mdBook 0.5's rules (its guide, and
its source where the guide is silent: ``id_from_content``/``unique_id`` in ``mdbook-html/src/utils.rs``,
``hide_lines.rs``, the ``index`` and ``links`` preprocessors, ``mdbook-summary``), not computed by the module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion.reading.mdbook import (
    Chapter,
    heading_id,
    hide_prefixed_lines,
    hide_rust_lines,
    html_path,
    normalize_id,
    page_url,
    parse_summary,
    playground_block,
    read_mdbook,
    smart_dashes,
    split_heading_attributes,
    title_directive,
    unique_id,
    visible_code,
)
from tests.support.shared_data import shared_data


def _book(tmp_path: Path, toml: str | bytes | None, summary: str | None = None,
          files: tuple[str, ...] = ()) -> Path:
    if toml is not None:
        (tmp_path / "book.toml").write_bytes(toml if isinstance(toml, bytes) else toml.encode())
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    if summary is not None:
        (src / "SUMMARY.md").write_text(summary, encoding="utf-8")
    for name in files:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(f"# {name}\n", encoding="utf-8")
    return tmp_path


# -- The mdBook guide (../shared/data/mdbook-guide: book.toml and src/ of mdBook's own guide) ---------------

GUIDE_CHAPTERS = [  # SUMMARY.md's order; (path, number, part)
    ("README.md", None, None),
    ("guide/installation.md", "1", "User guide"),
    ("guide/reading.md", "2", "User guide"),
    ("guide/creating.md", "3", "User guide"),
    ("cli/README.md", "4", "Reference guide"),
    ("cli/init.md", "4.1", "Reference guide"),
    ("cli/build.md", "4.2", "Reference guide"),
    ("cli/watch.md", "4.3", "Reference guide"),
    ("cli/serve.md", "4.4", "Reference guide"),
    ("cli/test.md", "4.5", "Reference guide"),
    ("cli/clean.md", "4.6", "Reference guide"),
    ("cli/completions.md", "4.7", "Reference guide"),
    ("format/README.md", "5", "Reference guide"),
    ("format/summary.md", "5.1", "Reference guide"),
    (None, "5.1.1", "Reference guide"),  # [Draft chapter]()
    ("format/configuration/README.md", "5.2", "Reference guide"),
    ("format/configuration/general.md", "5.2.1", "Reference guide"),
    ("format/configuration/preprocessors.md", "5.2.2", "Reference guide"),
    ("format/configuration/renderers.md", "5.2.3", "Reference guide"),
    ("format/configuration/environment-variables.md", "5.2.4", "Reference guide"),
    ("format/theme/README.md", "5.3", "Reference guide"),
    ("format/theme/index-hbs.md", "5.3.1", "Reference guide"),
    ("format/theme/syntax-highlighting.md", "5.3.2", "Reference guide"),
    ("format/theme/editor.md", "5.3.3", "Reference guide"),
    ("format/mathjax.md", "5.4", "Reference guide"),
    ("format/mdbook.md", "5.5", "Reference guide"),
    ("format/markdown.md", "5.6", "Reference guide"),
    ("continuous-integration.md", "6", "Reference guide"),
    ("for_developers/README.md", "7", "Reference guide"),
    ("for_developers/preprocessors.md", "7.1", "Reference guide"),
    ("for_developers/backends.md", "7.2", "Reference guide"),
    ("misc/contributors.md", None, None),  # the suffix chapter after the `-----------` separator
]

# site-url is "/mdBook/" in the guide's book.toml (it is served at rust-lang.github.io/mdBook/).
GUIDE_URLS = {
    "README.md": "/mdBook/index.html",  # the index preprocessor: README.md → index.md → index.html
    "cli/README.md": "/mdBook/cli/index.html",  # in a folder too (the guide links to ../cli/index.html)
    "format/configuration/README.md": "/mdBook/format/configuration/index.html",
    "for_developers/README.md": "/mdBook/for_developers/index.html",  # the "_" stays as it is
    "guide/installation.md": "/mdBook/guide/installation.html",
    "cli/init.md": "/mdBook/cli/init.html",
    "format/summary.md": "/mdBook/format/summary.html",  # summary.md, not SUMMARY.md: an ordinary chapter
    "format/theme/index-hbs.md": "/mdBook/format/theme/index-hbs.html",
    "format/configuration/environment-variables.md": "/mdBook/format/configuration/environment-variables.html",
    "format/mdbook.md": "/mdBook/format/mdbook.html",
    "continuous-integration.md": "/mdBook/continuous-integration.html",
    "misc/contributors.md": "/mdBook/misc/contributors.html",
}

# (page, heading as written, its rendered text, the id mdBook gives it). The rendered text is what
# `text_in_node` collects: code spans keep their content, backslash escapes and `` ` `` go; then
# `id_from_content`: lowercase, keep alphanumerics/_/-, whitespace → "-", drop the rest.
GUIDE_HEADINGS = [
    ("cli/build.md", "# The build command", "The build command", "the-build-command"),
    ("cli/build.md", "#### Specify a directory", "Specify a directory", "specify-a-directory"),
    # Code span: its text "--open" is kept whole (smart punctuation never applies inside code).
    ("cli/build.md", "#### `--open`", "--open", "--open"),
    ("cli/build.md", "#### `--dest-dir`", "--dest-dir", "--dest-dir"),
    # `\<title\>` renders as "<title>": the escapes go, then "<" and ">" are dropped.
    ("format/mdbook.md", "## Controlling page \\<title\\>", "Controlling page <title>", "controlling-page-title"),
    # Code spans with quotes and "=": `class="left"` and `"right"` → text class="left" and "right".
    ("format/mdbook.md", '### `class="left"` and `"right"`', 'class="left" and "right"', "classleft-and-right"),
    ("format/mdbook.md", "## Font-Awesome icons", "Font-Awesome icons", "font-awesome-icons"),
    ("format/theme/index-hbs.md", "# index.hbs", "index.hbs", "indexhbs"),  # the dot is dropped
    ("404.md", "# Document not found (404)", "Document not found (404)", "document-not-found-404"),
    ("continuous-integration.md", "# Running `mdbook` in continuous integration",
     "Running mdbook in continuous integration", "running-mdbook-in-continuous-integration"),
    ("format/configuration/renderers.md", "### `[output.html.print]`", "[output.html.print]", "outputhtmlprint"),
    ("format/configuration/renderers.md", "#### `[output.html.search.chapter]`", "[output.html.search.chapter]",
     "outputhtmlsearchchapter"),
]


def _guide() -> Path:
    guide = shared_data() / "mdbook-guide"
    if not (guide / "book.toml").is_file():
        pytest.skip(f"{guide} is absent: the shared test data has no mdBook guide")
    return guide


@pytest.mark.needs("shared-data")
def test_the_mdbook_guide_config_and_summary():
    guide = _guide()
    book = read_mdbook(guide)
    assert book is not None
    assert book.warnings == []  # every chapter's file exists
    assert book.title == "mdBook Documentation"
    assert book.src == Path("src") and book.source_dir == guide / "src"
    assert book.site_url == "/mdBook/"
    assert book.language == "en"
    assert book.hidelines == {"python": "~"}
    assert book.smart_punctuation is True and book.index_readme is True
    assert book.summary_title == "Summary"
    assert [(c.path, c.number, c.part) for c in book.chapters] == GUIDE_CHAPTERS
    assert book.chapters[0] == Chapter("Introduction", "README.md")
    assert book.chapters[14] == Chapter("Draft chapter", None, "5.1.1", 3, "Reference guide")
    assert book.chapters[14].draft
    assert book.chapters[21].title == "index.hbs" and book.chapters[21].level == 3
    pages = book.pages
    assert pages == [path for path, _, _ in GUIDE_CHAPTERS if path]
    assert all((guide / "src" / page).is_file() for page in pages)
    # Not pages: SUMMARY.md itself, files SUMMARY.md does not list (an included snippet, a README no chapter
    # names, the 404 page), and drafts.
    for path in ("SUMMARY.md", "cli/arg-watcher.md", "guide/README.md", "404.md", "format/example.rs"):
        assert (guide / "src" / path).is_file()
        assert not book.is_page(path)
    assert book.is_page("format/summary.md") and book.is_page("./cli/init.md")


@pytest.mark.needs("shared-data")
def test_the_mdbook_guide_urls_and_heading_ids():
    guide = _guide()
    book = read_mdbook(guide)
    for path, url in GUIDE_URLS.items():
        assert book.is_page(path), path
        assert book.url(path) == url
    for page, source, text, expected in GUIDE_HEADINGS:
        assert source in (guide / "src" / page).read_text(encoding="utf-8").splitlines(), (page, source)
        assert heading_id(text, {}) == expected, source
    # format/markdown.md renders "### A heading" and "#### A smaller heading" once each (their first
    # occurrences are in a ```markdown block); its headings in order, as mdBook numbers them in one page:
    seen: dict[str, int] = {}
    ids = [heading_id(t, seen) for t in ("Markdown", "Text and paragraphs", "Headings", "A heading",
                                         "A smaller heading", "Lists", "Links", "Images", "Extensions")]
    assert ids == ["markdown", "text-and-paragraphs", "headings", "a-heading", "a-smaller-heading", "lists",
                   "links", "images", "extensions"]


# -- URLs -------------------------------------------------------------------------------------------------

def test_page_urls():
    assert page_url("/", "ch04-01-what-is-ownership.md") == "/ch04-01-what-is-ownership.html"
    assert page_url("https://doc.rust-lang.org/book/", "ch04-01-what-is-ownership.md") == \
        "https://doc.rust-lang.org/book/ch04-01-what-is-ownership.html"
    assert page_url("https://example.org/book", "ch01.md") == "https://example.org/book/ch01.html"  # one "/"
    assert page_url("", "ch01.md") == "/ch01.html"  # no site-url: mdBook's default "/", root-relative
    # README (the file stem, any case, any folder, any extension) → index.html of its folder.
    assert page_url("/", "README.md") == "/index.html"
    assert page_url("/b/", "part/Readme.md") == "/b/part/index.html"
    assert page_url("/", "a/b/readme.markdown") == "/a/b/index.html"
    assert page_url("/", "a/README.md", index_readme=False) == "/a/README.html"
    assert page_url("/", "a/readme-first.md") == "/a/readme-first.html"  # not a README
    assert page_url("/", "index.md") == "/index.html"
    # Folders kept; "./" and "a/../" normalised; spaces, "#", "?", "%" and non-ASCII percent-encoded as a
    # browser requests them; "(", ")", "'", "+" and "," left as they are.
    assert page_url("/", "./appendix/../appendix/a.md") == "/appendix/a.html"
    assert page_url("/", "my chapter.md") == "/my%20chapter.html"
    assert page_url("/", "café/naïve.md") == "/caf%C3%A9/na%C3%AFve.html"
    assert page_url("/", "c#?.md") == "/c%23%3F.html"
    assert page_url("/", "100%.md") == "/100%25.html"
    assert page_url("/", "a (b)'s+c,d.md") == "/a%20(b)'s+c,d.html"
    assert html_path("a.b.md") == "a.b.html" and html_path("notes") == "notes.html"


# -- Heading ids ------------------------------------------------------------------------------------------

def test_normalize_id_as_mdbook():
    # mdBook's own unit tests of id_from_content (mdbook-html/src/utils.rs).
    assert normalize_id("`--passes`: add more rustdoc passes".replace("`", "")) == "--passes-add-more-rustdoc-passes"
    assert normalize_id("Method-call 🐙 expressions \U0001f47c") == "method-call--expressions-"
    assert normalize_id("_-_12345") == "_-_12345"
    assert normalize_id("12345") == "12345"
    assert normalize_id("中文") == "中文"
    assert normalize_id("にほんご") == "にほんご"
    assert normalize_id("한국어") == "한국어"
    assert normalize_id("") == "section"
    assert normalize_id("::") == "section"
    assert normalize_id("!.():") == "section"
    assert normalize_id("   ") == "section"
    assert normalize_id("中文標題 CJK title") == "中文標題-cjk-title"
    assert normalize_id("Über") == "über"
    # Hand-derived: trimmed first, then each inner whitespace character is one "-" (no collapsing).
    assert normalize_id("  Hello,  World!  ") == "hello--world"
    assert normalize_id("Tabs\tand\u00a0nbsp") == "tabs-and-nbsp"
    assert normalize_id("What's new in 2.0?") == "whats-new-in-20"
    assert normalize_id("C++ & Rust") == "c--rust"  # "+", "&" dropped, the two spaces stay
    assert normalize_id("The ✨ Emoji 🎉") == "the--emoji-"  # the emoji go, the spaces around them stay
    assert normalize_id("Ÿ ΣΊΣΥΦΟΣ") == "ÿ-σίσυφος"  # full Unicode lowercase, final sigma
    # Devanagari: vowel signs (Alphabetic) kept, the virama (not Alphabetic) dropped.
    assert normalize_id("हिन्दी") == "हिनदी"
    # A decomposed accent (U+0301, not Alphabetic) is dropped; a precomposed é is a letter.
    assert normalize_id("Cafe\u0301 café") == "cafe-café"


def test_unique_heading_ids_in_a_page():
    seen: dict[str, int] = {}
    assert [heading_id(t, seen) for t in ("Intro", "Intro", "intro", "Intro 1", "Intro")] == \
        ["intro", "intro-1", "intro-2", "intro-1-1", "intro-3"]
    # mdBook tries id-1, id-2… and takes the first not given yet (one set of ids per page).
    seen = {}
    assert [heading_id(t, seen) for t in ("A 1", "A", "A", "A")] == ["a-1", "a", "a-2", "a-3"]
    # Headings with nothing left are "section", counted like any other id (mdBook's own test).
    seen = {}
    assert [heading_id(t, seen) for t in ("::", "!!!", "Real Heading", "***", "   ")] == \
        ["section", "section-1", "real-heading", "section-2", "section-3"]
    # A {#custom} id is used verbatim and not counted: a later "Intro" still gets "intro".
    seen = {}
    assert heading_id("Intro", seen, custom_id="intro") == "intro"
    assert heading_id("Intro", seen) == "intro"
    assert heading_id("Intro", seen) == "intro-1"
    assert unique_id("x", {"x": 0, "x-1": 0}) == "x-2"


def test_heading_attributes():
    # The guide's example (format/markdown.md, "Heading attributes") and pulldown-cmark's heading_attrs spec.
    assert split_heading_attributes("Example heading { #first .class1 .class2 }") == \
        ("Example heading", "first", ["class1", "class2"])
    assert split_heading_attributes("with the ID {#myh1}") == ("with the ID", "myh1", [])
    assert split_heading_attributes("H1 {#first #second #last}") == ("H1", "last", [])
    assert split_heading_attributes("multiple! {.myclass1 myattr #myh3 otherattr=value .myclass2}") == \
        ("multiple!", "myh3", ["myclass1", "myclass2"])
    assert split_heading_attributes("without space, not recommended{#id1}") == \
        ("without space, not recommended", "id1", [])
    assert split_heading_attributes("H1 # {#id1}") == ("H1", "id1", [])  # after the closing sequence
    assert split_heading_attributes("with trailing hash # ### {#id3}") == ("with trailing hash #", "id3", [])
    assert split_heading_attributes("H1 {#id1.class1.class2 .class3}") == ("H1", "id1.class1.class2", ["class3"])
    assert split_heading_attributes("H1 {} {}") == ("H1 {}", None, [])
    assert split_heading_attributes("H1 {#}") == ("H1", None, [])
    # Not attribute blocks: not at the end, unclosed, or with a forbidden character.
    assert split_heading_attributes("H1 { #id1 } foo") == ("H1 { #id1 } foo", None, [])
    assert split_heading_attributes("H2 {#id2") == ("H2 {#id2", None, [])
    assert split_heading_attributes("H1 {<i>foo</i>}") == ("H1 {<i>foo</i>}", None, [])
    assert split_heading_attributes("C# and F#") == ("C# and F#", None, [])
    text, custom, _ = split_heading_attributes("Ünïcode `code` {#stable-id}")
    assert heading_id(text, {}, custom_id=custom) == "stable-id"


def test_smart_punctuation_in_ids():
    # Smart punctuation (on by default) turns "--" into an en dash, which the id then drops; code keeps it.
    assert smart_dashes("a -- b --- c ... d") == "a – b — c … d"
    assert smart_dashes("x----y") == "x––y" and smart_dashes("x-----y") == "x—–y" and smart_dashes("-") == "-"
    assert normalize_id(smart_dashes("The --foo flag")) == "the-foo-flag"
    assert normalize_id("The --foo flag") == "the---foo-flag"  # smart-punctuation = false, or in `code`


# -- SUMMARY.md -------------------------------------------------------------------------------------------

SUMMARY = """\
# Summary

[Foreword](foreword.md)
[Intro](<intro page.md>)

---

- [Getting started](start/README.md)
    - [Install](start/install.md)
        - [On Linux](start/linux%20notes.md)
        - [Later]()
    - [Hello `world`](./start/hello.md)
- [Ownership *in depth*](ch04.md)

# Part Two

* [Traits](traits.md)
    * [Draft]()

1. [Ordered](ordered.md)

---

[Appendix](appendix/README.md)
[Thanks](thanks.md)
"""


def test_parse_summary():
    title, chapters, warnings = parse_summary(SUMMARY)
    assert title == "Summary" and warnings == []
    assert chapters == [
        Chapter("Foreword", "foreword.md"),
        Chapter("Intro", "intro page.md"),  # <…> unwrapped
        Chapter("Getting started", "start/README.md", "1", 1),
        Chapter("Install", "start/install.md", "1.1", 2),
        Chapter("On Linux", "start/linux notes.md", "1.1.1", 3),  # %20 decoded
        Chapter("Later", None, "1.1.2", 3),  # drafts are numbered
        Chapter("Hello world", "start/hello.md", "1.2", 2),  # code text kept, "./" dropped
        Chapter("Ownership in depth", "ch04.md", "2", 1),  # emphasis markers dropped
        Chapter("Traits", "traits.md", "3", 1, "Part Two"),  # numbers go on across parts
        Chapter("Draft", None, "3.1", 2, "Part Two"),
        Chapter("Ordered", "ordered.md", "4", 1, "Part Two"),  # and across lists
        Chapter("Appendix", "appendix/README.md"),
        Chapter("Thanks", "thanks.md"),
    ]


def test_parse_summary_edge_cases():
    # No "# Summary": the first h1 is still the summary's title, not a part (as mdBook reads it).
    title, chapters, _ = parse_summary("# Book\n\n- [A](a.md)\n\n# Part\n\n- [B](b.md)\n")
    assert title == "Book" and chapters == [Chapter("A", "a.md", "1", 1), Chapter("B", "b.md", "2", 1, "Part")]
    # Only drafts: chapters, none with a file.
    _, chapters, warnings = parse_summary("# Summary\n\n- [One]()\n- [Two]()\n")
    assert [c.draft for c in chapters] == [True, True] and warnings == []
    # An item that is not a link: mdBook stops; we warn and leave it (and its sub-chapters) out.
    _, chapters, warnings = parse_summary("- [A](a.md)\n- Just text\n    - [Sub](sub.md)\n- [B](b.md)\n")
    assert [(c.path, c.number) for c in chapters] == [("a.md", "1"), ("b.md", "2")]
    assert len(warnings) == 1 and "line 2" in warnings[0] and "only a link" in warnings[0]
    # A list after the suffix chapters: mdBook stops; we warn and read no further.
    _, chapters, warnings = parse_summary("- [A](a.md)\n\n[S](s.md)\n\n- [B](b.md)\n")
    assert [c.path for c in chapters] == ["a.md", "s.md"] and "suffix chapters" in warnings[0]
    # Empty, or nothing but prose.
    assert parse_summary("") == (None, [], [])
    assert parse_summary("Just some words.\n") == (None, [], [])


# -- book.toml and bad input -----------------------------------------------------------------------------

def test_no_book_toml_is_not_an_mdbook(tmp_path):
    assert read_mdbook(tmp_path) is None
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "SUMMARY.md").write_text("- [A](a.md)\n")
    assert read_mdbook(tmp_path) is None


@pytest.mark.parametrize("toml", ["", "not = [valid", b"\x00\xff\xfe\x89PNG\r\n", "[book]\ntitle = 3\nsrc = []\n",
                                  "book = 1\noutput = 'x'\n"])
def test_bad_book_toml_gives_defaults(tmp_path, toml):
    root = _book(tmp_path, toml, "# Summary\n\n- [A](a.md)\n", files=("a.md",))
    book = read_mdbook(root)
    assert book is not None
    assert book.title is None and book.src == Path("src") and book.site_url == "/" and book.language == "en"
    assert book.hidelines == {} and book.index_readme is True
    assert book.chapters == [Chapter("A", "a.md", "1", 1)] and book.pages == ["a.md"]
    if toml in ("", "book = 1\noutput = 'x'\n"):
        assert book.warnings == []
    else:
        assert book.warnings and all("book.toml" in w for w in book.warnings)


def test_book_toml_settings(tmp_path):
    toml = """[book]
title = "Handbook"
src = "content"
language = "fr"
[build]
use-default-preprocessors = false
[output.html]
site-url = "/handbook"
smart-punctuation = false
[output.html.code.hidelines]
python = "~"
sh = 3
"""
    (tmp_path / "book.toml").write_text(toml)
    (tmp_path / "content").mkdir()
    (tmp_path / "content" / "SUMMARY.md").write_text("[Home](README.md)\n")
    (tmp_path / "content" / "README.md").write_text("# Home\n")
    book = read_mdbook(tmp_path)
    assert (book.title, book.src, book.language, book.site_url) == ("Handbook", Path("content"), "fr", "/handbook")
    assert book.smart_punctuation is False and book.hidelines == {"python": "~"}
    assert book.warnings == ["book.toml: [output.html.code.hidelines].sh is not a prefix; ignored"]
    assert book.index_readme is False  # no default preprocessors: README.md stays README.html
    assert book.url("README.md") == "/handbook/README.html"
    (tmp_path / "book.toml").write_text(toml + "[preprocessor.index]\n")
    assert read_mdbook(tmp_path).url("README.md") == "/handbook/index.html"


def test_missing_summary_source_and_chapter_files(tmp_path):
    root = _book(tmp_path, "[book]\ntitle = 'T'\n")
    book = read_mdbook(root)
    assert book.title == "T" and book.chapters == []
    assert book.warnings == ["src/SUMMARY.md not found: mdBook has no chapters without it"]
    (tmp_path / "other").mkdir()
    book = read_mdbook(_book(tmp_path / "other", "[book]\nsrc = 'nowhere'\n"))
    assert book.warnings == ["source folder nowhere/ not found"]
    summary = "- [A](a.md)\n- [Gone](gone.md)\n- [Out](../outside.md)\n- [Again](./a.md)\n"
    (tmp_path / "third").mkdir()
    book = read_mdbook(_book(tmp_path / "third", "", summary, files=("a.md",)))
    assert [c.path for c in book.chapters] == ["a.md", "gone.md"]
    assert book.pages == ["a.md"]  # a missing file is in the navigation but is not a page
    assert book.warnings == [
        "chapter 'Gone': src/gone.md not found (mdBook builds it as an empty page)",
        "chapter 'Out' links to ../outside.md, outside the source folder; not indexed",
        "a.md is listed twice in SUMMARY.md (mdBook stops there); 'Again' left out",
    ]
    (tmp_path / "third" / "src" / "SUMMARY.md").write_bytes(b"\xff\xfe- [A](a.md)")
    book = read_mdbook(tmp_path / "third")
    assert book.chapters == [] and "not read" in book.warnings[0]


def test_summary_with_only_drafts_has_no_pages(tmp_path):
    book = read_mdbook(_book(tmp_path, "[book]\n", "# Summary\n\n- [Soon]()\n    - [Later]()\n"))
    assert [c.title for c in book.chapters] == ["Soon", "Later"] and book.pages == [] and book.warnings == []
    assert not book.is_page("SUMMARY.md")


# -- What the renderer shows -----------------------------------------------------------------------------

def test_hidden_rust_lines():
    # The guide's example (format/mdbook.md, "Hiding code lines").
    code = '# fn main() {\n    let x = 5;\n    let y = 6;\n\n    println!("{}", x + y);\n# }\n'
    assert hide_rust_lines(code) == '    let x = 5;\n    let y = 6;\n\n    println!("{}", x + y);\n'
    # "#" alone and indented "# " lines are hidden; "##" shows one "#"; attributes and "#\t" are not hidden.
    code = "#\n    # use std::io;\n## not hidden\n#[derive(Debug)]\n#![allow(unused)]\n#\tx\nfn f() {}"
    assert hide_rust_lines(code) == "# not hidden\n#[derive(Debug)]\n#![allow(unused)]\n#\tx\nfn f() {}"
    assert hide_rust_lines("# a\nb\n# c", blank=True) == "\nb\n"  # line numbers kept
    assert visible_code("# hidden\nshown", "rust,ignore") == "shown"
    assert visible_code("# shown\nshown", "bash") == "# shown\nshown"  # only Rust by default


def test_hidden_lines_of_other_languages():
    # The guide's python example with `[output.html.code.hidelines] python = "~"`, and its local override.
    code = "~hidden()\nnothidden():\n~    hidden()\n    ~hidden()\n    nothidden()"
    assert visible_code(code, "python", {"python": "~"}) == "nothidden():\n    nothidden()"
    assert hide_prefixed_lines(code, "~", blank=True) == "\nnothidden():\n\n\n    nothidden()"
    local = code.replace("~", "!!!")
    assert visible_code(local, "python,hidelines=!!!", {"python": "~"}) == "nothidden():\n    nothidden()"
    assert visible_code(code, "python") == code
    assert visible_code("# a\nb", "rust", {"rust": "b"}) == "b"  # Rust always has its own rule


def test_title_directive():
    text = "{{#title My Title}}\n# My Chapter\n\nText."
    assert title_directive(text) == ("\n# My Chapter\n\nText.", "My Title")
    assert title_directive("# A\nintro {{#title  Spaced  }} end\n") == ("# A\nintro  end\n", "Spaced")
    assert title_directive("{{#title First}}\n{{#title Second}}") == ("\n", "Second")  # the last one wins
    # A title written over two lines keeps both lines (empty).
    assert title_directive("{{#title Long\ntitle}}\nx") == ("\n\nx", "Long\ntitle")
    # Escaped, or another directive, or no title: left as it is.
    assert title_directive("\\{{#title My Title}}") == ("\\{{#title My Title}}", None)
    assert title_directive("{{#include a.md}}") == ("{{#include a.md}}", None)
    assert title_directive("{{#title}}") == ("{{#title}}", None)
    assert title_directive("No directive") == ("No directive", None)


def test_playground_block():
    # mdBook's links preprocessor: `{{#playground example.rs editable}}` → ```rust,editable … ```.
    assert playground_block('fn main() {\n    println!("Hi");\n}', ["editable"]) == \
        '```rust,editable\nfn main() {\n    println!("Hi");\n}\n```\n'
    assert playground_block("fn main() {}\n") == "```rust\nfn main() {}\n```\n"


def mdbook_page(tmp_path: Path, page: str, files: dict[str, str]) -> list[tuple[str, str]]:
    """``page`` (src/chapter.md of a one-chapter mdBook with ``files`` beside it) as bookchat reads it."""
    from ingestion.reading.conventions import detect
    from ingestion.reading.parsing import parse_document

    (tmp_path / "src").mkdir()
    (tmp_path / "book.toml").write_text('[book]\ntitle = "Playground"\n')
    (tmp_path / "src" / "SUMMARY.md").write_text("# Summary\n\n- [Chapter](chapter.md)\n")
    (tmp_path / "src" / "chapter.md").write_text(page)
    for name, text in files.items():
        (tmp_path / "src" / name).write_text(text)
    conventions = detect(tmp_path)
    resolver = conventions.resolver(tmp_path / "src", max_bytes=1_000_000, site_root=None, pages={})
    doc = parse_document(page, rel_path="chapter.md", partials=resolver, conventions=conventions)
    return [(block.kind, block.text) for block in doc.blocks]


def test_a_playground_is_its_file_in_a_rust_block_with_the_directives_words(tmp_path):
    page = "# Chapter\n\nBefore.\n\n{{#playground example.rs editable}}\n\nAfter.\n"
    blocks = mdbook_page(tmp_path, page, {"example.rs": 'fn main() {\n    println!("Hi");\n}\n'})
    code = [text for kind, text in blocks if kind == "code"]
    assert code == ['```rust,editable\nfn main() {\n    println!("Hi");\n}\n```'], blocks


def test_an_escaped_directive_is_shown_as_text_in_code_spans_and_blocks(tmp_path):
    page = ("# Chapter\n\nWrite `\\{{#playground file.rs}}` to embed a file.\n\n```hbs\n\\{{#include file.rs}}\n```\n\n"
            "Escaped in prose: \\{{#include other.rs}} stays.\n")
    blocks = mdbook_page(tmp_path, page, {})
    text = "\n".join(text for _, text in blocks)
    assert "`{{#playground file.rs}}`" in text and "```hbs\n{{#include file.rs}}\n```" in text, blocks
    assert "\\{{#include other.rs}} stays" in text, "not removed as a directive (Markdown drops the backslash)"
