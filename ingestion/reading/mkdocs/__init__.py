r"""MkDocs conventions: the site's config, its pages and their order, page URLs, heading ids, snippets, and the
Markdown extensions' syntax read as the site renders it.

These mirror MkDocs 1.6 (``config/base.py``, ``utils/yaml.py``, ``structure/files.py``, ``structure/nav.py``,
``structure/pages.py``), Python-Markdown 3 (``extensions/toc.py``, ``attr_list.py``, ``abbr.py``) and
pymdown-extensions (``slugs.py``, ``snippets.py``, ``tabbed.py``), so the URLs and anchors we cite are the ones the
built site serves. Nothing here imports them: they are not dependencies of bookchat.

Decisions:
- The config is ``mkdocs.yml``, else ``mkdocs.yaml``, at the book's root (MkDocs' own order). It is read with a
  safe loader that tolerates MkDocs' tags: ``!ENV VAR`` is None and ``!ENV [VAR, …, default]`` its default (the
  indexing machine's environment is not read: an index must not depend on, or leak, it); ``!relative`` is its
  string; ``!!python/name:x`` and ``!!python/object/apply:x`` become a ``PythonRef`` naming ``x`` (nothing is
  imported or called); any other tag is its plain value. Bad input never raises: it is a warning, and the
  defaults stand.
- ``INHERIT`` is merged as MkDocs does (``mergedeep`` REPLACE: mappings merged key by key, recursively, the child
  wins; lists and scalars replaced whole), relative to the file that names it, recursively. A missing file or a
  loop is a warning. Only ``.yml``/``.yaml`` files are read as parents (a monorepo's base config may sit above
  the book's folder).
- ``docs_dir`` (default ``docs``) is relative to the config file's folder. ``site_url`` gets a trailing ``/``
  as MkDocs adds it; without one, page URLs are site-relative (``/guide/``): the site is assumed to be served at
  the root of its host.
- Pages are the Markdown files (``.md``, ``.markdown``, ``.mdown``, ``.mkdn``, ``.mkd``) under ``docs_dir`` that
  are not excluded: dot files/folders and ``/templates/`` (MkDocs' defaults), ``exclude_docs`` and
  ``draft_docs`` (what ``mkdocs build`` leaves out), and a ``README.md`` beside an ``index.md`` in the same
  folder. ``exclude_docs``/``draft_docs``/``not_in_nav`` are gitignore patterns, matched with a small subset of
  gitignore (``*``, ``**``, ``?``, leading/trailing ``/``, ``!`` negation; no character classes).
- ``nav`` entries are pages (a file under ``docs_dir``), sections (a title and children) or links (an
  external URL, or a path that names no page: a warning, as MkDocs logs it). Without ``nav``, the order is
  MkDocs': files sorted by folder (as a tuple of names, so a folder's own files come before its subfolders'),
  then ``index``/``README`` first, then by name, nested by folder (``not_in_nav`` pages left out).
  ``nav_order`` lists each page once, at its first place; pages not in ``nav`` are still pages (``page_files``).
- URLs as ``File.url``: ``index.md``/``README.md`` → the folder's URL, ``foo.md`` → ``foo/`` with
  ``use_directory_urls`` (default true), else ``foo.html`` (and ``index.html``); percent-quoted as MkDocs does.
- Heading ids as the ``toc`` extension makes them: its slugify (default ``markdown.extensions.toc.slugify``:
  NFKD→ASCII, drop what is not ``\w``/space/``-``, strip, lowercase, runs of ``[-\s]`` → separator;
  ``slugify_unicode`` keeps Unicode; ``pymdownx.slugs.slugify(case=…, percent_encode=…, normalize=…)``), the
  text being the heading's rendered text (markup, tags and images dropped, entities decoded). An explicit
  ``{#id}``/``{: #id }`` (attr_list) is used verbatim and reserved for the whole page before any other id is
  made; duplicates get ``_1``, ``_2``… (``toc.unique``: ``x_1`` taken → ``x_2``; an empty slug → ``_1``).
- Material's blog plugin: posts (``blog/posts/``) are published at ``blog/<date>/<slug>/`` (``blog``).
- ``clean_mkdocs`` rewrites a page in place, line for line, outside fenced code: content tabs
  (``=== "Title"``, ``===!``, ``===+``) become a ``**Title:**`` label line (as a Docusaurus ``TabItem``) and their
  four-space-indented content is dedented; abbreviation definitions (``*[HTML]: …``) are blanked (the site shows
  them only as tooltips); attr lists are removed from inline elements (``[x](y){ .md-button }``) and blocks
  (a ``{: .class }`` line closing a paragraph); headings keep theirs for ``heading_ids``. Admonitions, ``!!!`` and
  PyMdown's ``/// note`` blocks alike, are read for every ``.md`` page (``ingestion.reading.generators``).
- Snippets (``pymdownx.snippets``) are expanded first, everywhere, code blocks included (that is how a site puts a
  file into a code block), and may add lines (``expand_snippets`` says which page line each stands for, as
  ``ingestion.reading.partials`` does). Paths are relative to ``base_path`` (default ``.``: MkDocs runs from the
  config file's folder, so the project root, not ``docs_dir``), tried in order; a file outside the project root
  is never read. ``;--8<--`` is an escape, ``; path`` in a block a comment; ``file:2:5`` (and ``:-3``,
  ``2:5,8:9``) line ranges and ``file:name`` sections (``--8<-- [start:name]`` … ``[end:name]``) select lines;
  ``auto_append`` files are appended to every page. URL snippets are not downloaded (a warning). A snippet that
  includes itself, directly or not, is skipped with a warning (pymdownx skips it silently).
- The book's language is ``theme.language`` (Material's; ``theme.locale`` for MkDocs' own themes), through
  ``INHERIT`` too; ``ingest --language`` wins over it (``ingestion.languages``).
- A site's own include macros are left as text: FastAPI's ``{* ../../docs_src/app.py hl[3] *}`` (its docs' own
  MkDocs hook, not MkDocs' or pymdownx's syntax) stays one line of the passage naming the example file. Reading it
  would put the same example programs, in several Python versions, into every translation of the book; the
  page's prose, which the questions are about, is what each language's book has of its own.

Modules: ``config`` (mkdocs.yml), ``pages`` (pages, nav, URLs; ``read_mkdocs``), ``headings`` (ids), ``cleanup``
(tabs, abbreviations, attribute lists), ``snippets``, ``blog`` (posts' URLs).
"""

from ingestion.reading.mkdocs.blog import (  # noqa: F401  (the package's API)
    blog_options,
    post_rel_path,
)
from ingestion.reading.mkdocs.cleanup import (  # noqa: F401  (the package's API)
    clean_mkdocs,
    clean_mkdocs_lines,
)
from ingestion.reading.mkdocs.config import (  # noqa: F401  (the package's API)
    CONFIG_NAMES,
    MARKDOWN_SUFFIXES,
    MAX_CONFIG_BYTES,
    MAX_INHERIT_DEPTH,
    MAX_SNIPPET_DEPTH,
    BlogOptions,
    MkDocsSite,
    NavEntry,
    PythonRef,
    Slugify,
    SnippetOptions,
    TocOptions,
    find_config,
    load_site,
    merge,
)
from ingestion.reading.mkdocs.headings import (  # noqa: F401  (the package's API)
    heading_id,
    heading_ids,
    heading_text,
    reserve_explicit_ids,
    slugify,
    split_heading_attrs,
    unique_id,
)
from ingestion.reading.mkdocs.pages import (  # noqa: F401  (the package's API)
    default_nav,
    file_sort_key,
    matches_gitignore,
    nav_order,
    page_files,
    page_path,
    page_url,
    read_mkdocs,
)
from ingestion.reading.mkdocs.snippets import (  # noqa: F401  (the package's API)
    expand_snippets,
    snippet_lines,
)
