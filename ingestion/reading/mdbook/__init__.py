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

Modules: ``book`` (book.toml; ``read_mdbook``), ``summary`` (SUMMARY.md), ``html`` (files, URLs, heading ids),
``rendering`` (hidden lines and directives).
"""

from ingestion.reading.mdbook.book import (  # noqa: F401  (the package's API)
    CONFIG_FILE,
    DEFAULT_LANGUAGE,
    DEFAULT_SRC,
    SUMMARY_FILE,
    MdBook,
    read_mdbook,
)
from ingestion.reading.mdbook.display import (  # noqa: F401  (the package's API)
    code_language,
    hide_prefixed_lines,
    hide_rust_lines,
    playground_block,
    title_directive,
    visible_code,
)
from ingestion.reading.mdbook.html import (  # noqa: F401  (the package's API)
    DEFAULT_SITE_URL,
    heading_id,
    html_path,
    normalize_id,
    page_url,
    smart_dashes,
    split_heading_attributes,
    unique_id,
)
from ingestion.reading.mdbook.summary import (  # noqa: F401  (the package's API)
    Chapter,
    parse_summary,
)
