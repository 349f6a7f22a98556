"""Every URL bookchat stored for a book, and every one its answers cite, opens the right place of the site the
generator builds: the page exists and has the anchor.

    .venv/bin/python -m bench.citations --book mkdocs-material --site path/to/site \\
        --questions bench/questions/mkdocs-material.jsonl
    .venv/bin/python -m bench.citations --book mdbook-guide --mdbook ../shared/data/mdbook-guide \\
        --questions bench/questions/mdbook-guide.jsonl

``--site``: a folder the generator built (``mkdocs build``, ``docusaurus build``), read as a web server
serves it: ``/a/`` is ``a/index.html``, ``/a`` is ``a.html`` or ``a/index.html``; an anchor is any
``id``/``name`` attribute of that file. ``--mdbook``: mdBook can't be installed here, so the book
itself stands for its build: the pages are SUMMARY.md's chapters at their ``.html`` paths, and a
page's ids are its headings' as mdBook makes them (``ingestion.reading.mdbook``, whose rules the
hand-checked fixture in tests/test_mdbook.py holds), found by markdown-it in the page with its
``{{#include}}`` files inlined.

``--questions``: each question is asked as ``evaluate`` asks it, and the passages its answer cites are
counted apart. Prints what was checked and every URL that does not resolve; exits 1 if any.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bench.fit_reranker import _setup

_ID = re.compile(r"""\s(?:id|name)=(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


class BuiltSite:
    """A site folder as a static web server serves it."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._ids: dict[Path, set[str]] = {}

    def ids(self, path: str) -> set[str] | None:
        """The anchors of the page at URL path ``path`` (below the site's base), None when there is no page."""
        path = unquote(path).strip("/")
        candidates = [f"{path}/index.html", f"{path}.html", path] if path else ["index.html"]
        for candidate in candidates:
            file = self.folder / candidate
            if file.is_file() and file.suffix == ".html":
                if file not in self._ids:
                    text = file.read_text(encoding="utf-8", errors="replace")
                    self._ids[file] = {html.unescape(next(g for g in m.groups() if g is not None))
                                       for m in _ID.finditer(text)}
                return self._ids[file]
        return None


class MdBookPages:
    """An mdBook's pages and heading ids, from the book's own files (see the module docstring)."""

    def __init__(self, root: Path):
        from markdown_it import MarkdownIt

        from ingestion.reading import mdbook
        from ingestion.reading.conventions import detect

        self.book = mdbook.read_mdbook(Path(root))
        if self.book is None:
            raise SystemExit(f"{root}: no book.toml")
        self._markdown = MarkdownIt("commonmark")
        self._includes = detect(Path(root)).resolver(self.book.root / self.book.src, max_bytes=10_000_000,
                                                     site_root=None, pages={})
        self._pages = {mdbook.html_path(page, index_readme=self.book.index_readme): page for page in self.book.pages}

    def ids(self, path: str) -> set[str] | None:
        from ingestion.reading import mdbook

        page = self._pages.get(unquote(path).strip("/"))
        if page is None:
            return None
        text = (self.book.root / self.book.src / page).read_text(encoding="utf-8", errors="replace")
        text, _ = mdbook.title_directive("\n".join(self._includes.inline(text.split("\n"), rel_path=page).lines))
        seen: dict[str, int] = {}
        ids = set()
        tokens = self._markdown.parse(text)
        for index, token in enumerate(tokens):
            if token.type == "heading_open":
                content, custom_id, _ = mdbook.split_heading_attributes(tokens[index + 1].content)
                inline = self._markdown.parseInline(content)[0].children or []
                smart = mdbook.smart_dashes if self.book.smart_punctuation else str
                plain = "".join(smart(child.content) if child.type == "text" else child.content
                                for child in inline if child.type in ("text", "code_inline"))
                ids.add(mdbook.heading_id(plain, seen, custom_id=custom_id))
        return ids


def unresolved(urls: list[str], site, base_path: str) -> list[str]:
    """The URLs of ``urls`` whose page or anchor ``site`` doesn't have, each with why."""
    problems = []
    for url in sorted(set(urls)):
        parts = urlsplit(url)
        if not parts.path.startswith(base_path):
            problems.append(f"{url}: not under the site's base {base_path}")
            continue
        ids = site.ids(parts.path[len(base_path):])
        if ids is None:
            problems.append(f"{url}: no such page")
        elif parts.fragment and unquote(parts.fragment) not in ids:
            problems.append(f"{url}: the page has no #{unquote(parts.fragment)}")
    return problems


def cited_urls(book_slug: str, questions_file: Path) -> tuple[int, list[str]]:
    """(answers, the URLs they cite) for each question of ``questions_file`` asked of the book."""
    from chat.quality.evaluation import load_questions, run_evaluation
    from ingestion.models import Chunk

    _, records = run_evaluation(load_questions(questions_file), book_slug=book_slug)
    chunk_ids = [chunk for record in records for chunk in record.get("cited") or []]
    urls = dict(Chunk.objects.filter(pk__in=chunk_ids).values_list("pk", "url"))
    return sum(1 for record in records if record.get("cited")), [urls[chunk] for chunk in chunk_ids if chunk in urls]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--book", required=True, help="the indexed book's slug")
    built = parser.add_mutually_exclusive_group(required=True)
    built.add_argument("--site", type=Path, help="the folder the generator built")
    built.add_argument("--mdbook", type=Path, help="the mdBook's root (book.toml), standing for its build")
    parser.add_argument("--questions", type=Path, help="also check what these questions' answers cite")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    _setup()
    from ingestion.models import Book, Chunk, Document

    book = Book.objects.get(slug=args.book)
    site = BuiltSite(args.site) if args.site else MdBookPages(args.mdbook)
    urls = list(Chunk.objects.filter(book=book).values_list("url", flat=True))
    urls += list(Document.objects.filter(book=book).values_list("url", flat=True))
    base_path = urlsplit(book.base_url or "/").path.rstrip("/") + "/"
    report = {"book": book.slug, "urls": len(set(urls)), "unresolved": unresolved(urls, site, base_path)}
    if args.questions:
        answers, cited = cited_urls(book.slug, args.questions)
        report |= {"answers_citing": answers, "citations": len(cited), "distinct_cited_urls": len(set(cited)),
                   "cited_unresolved": unresolved(cited, site, base_path)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{book.slug}: {report['urls']} stored page and passage URLs, {len(report['unresolved'])} unresolved")
        if args.questions:
            print(f"  {report['citations']} citations in {report['answers_citing']} answers "
                  f"({report['distinct_cited_urls']} URLs), {len(report['cited_unresolved'])} unresolved")
        for problem in report["unresolved"] + report.get("cited_unresolved", []):
            print(f"  {problem}")
    return 1 if report["unresolved"] or report.get("cited_unresolved") else 0


if __name__ == "__main__":
    sys.exit(main())
