"""``ingestion.reading.mkdocs.snippets``: what a ``--8<--`` line stands for (line ranges, dedented sections, files a
base path may not reach) and the page line each inlined line comes from, beside the fixture site's cases in
tests/test_mkdocs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion.reading.mkdocs.pages import read_mkdocs
from ingestion.reading.mkdocs.snippets import expand_snippets, snippet_lines

CONFIG = "site_name: S\nmarkdown_extensions:\n  - pymdownx.snippets:\n      base_path: [inc]\n" \
         "      dedent_subsections: true\n"
SECTION = "a\n  # --8<-- [start:s]\n    x\n      y\n  # --8<-- [end:s]\nb\n"


@pytest.fixture
def site(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "inc").mkdir()
    (tmp_path / "mkdocs.yml").write_text(CONFIG)
    (tmp_path / "inc" / "five.txt").write_text("l1\nl2\nl3\nl4\nl5\n")
    (tmp_path / "inc" / "sec.py").write_text(SECTION)
    return read_mkdocs(tmp_path)


@pytest.mark.parametrize(("spec", "lines"), [
    ("five.txt::2", ["l1", "l2"]),
    ("five.txt:2:3,5", ["l2", "l3", "l5", ""]),  # ranges joined; a start alone runs to the end
    ("five.txt:-2", ["l5", ""]),  # counted from the end (the file ends in a newline: an empty last line)
    ("sec.py:s", ["x", "  y"]),  # the section's lines, dedented (dedent_subsections)
])
def test_line_ranges_and_sections(site, spec, lines):
    assert snippet_lines(spec, site) == lines


@pytest.mark.parametrize(("spec", "warning"), [
    ("sec.py:nope", "snippet 'sec.py:nope': no section 'nope' in the file"),
    ("http://example.org/x.md", "snippet 'http://example.org/x.md' is a URL; it is not downloaded"),
    ("../mkdocs.yml", "snippet '../mkdocs.yml' not inlined: file not found"),  # not under the base path
])
def test_what_is_not_inlined_is_a_warning(site, spec, warning):
    warnings = []
    assert snippet_lines(spec, site, warnings=warnings) is None
    assert warnings == [warning]


def test_inlined_lines_keep_their_indentation_and_their_page_line(site):
    page = ["intro", '  --8<-- "five.txt:1:2"', ';--8<-- "five.txt"', "--8<--", "five.txt:5", "; comment",
            "--8<--", "end"]
    result = expand_snippets(page, site, rel_path="p.md")
    assert result.lines == ["intro", "  l1", "  l2", '--8<-- "five.txt"', "l5", "", "end"]
    assert result.origins == [0, 1, 1, 2, 4, 4, 7]
    assert result.warnings == [] and len(result.digests) == 2


def test_a_site_without_snippets_leaves_the_page_as_it_is(tmp_path):
    (tmp_path / "mkdocs.yml").write_text("site_name: S\n")
    result = expand_snippets(['--8<-- "x.md"'], read_mkdocs(tmp_path), rel_path="p.md")
    assert result.lines == ['--8<-- "x.md"'] and result.origins == [0]
