"""``ingestion.reading.mkdocs.cleanup``: a page's MkDocs extension syntax rewritten line for line (content tabs,
abbreviations, attribute lists), never inside fenced code or inline code, and only for the extensions the site
enables."""

from __future__ import annotations

from pathlib import Path

from ingestion.reading.mkdocs.cleanup import clean_mkdocs, clean_mkdocs_lines
from ingestion.reading.mkdocs.config import MkDocsSite

PAGE = """=== "Tab *one*"

    content

*[HTML]: Hyper Text
[Go](x){ .md-button }
Para
{: .note }
```
[a](b){ .c }
```
# Heading {#id}
`x{.y}` and [a]{.b}"""


def test_tabs_abbreviations_and_attr_lists_are_rewritten_keeping_every_line():
    cleaned = clean_mkdocs(PAGE)
    assert cleaned.split("\n") == [
        "**Tab one:**", "", "content", "", "", "[Go](x)", "Para", "", "```", "[a](b){ .c }", "```",
        "# Heading {#id}", "`x{.y}` and [a]"]


def test_only_an_attr_list_closing_a_paragraph_is_removed():
    lines = ["Para", "{: .note }", "", "{: .alone }"]
    clean_mkdocs_lines(lines)
    assert lines == ["Para", "", "", "{: .alone }"]


def test_a_site_without_the_extensions_keeps_their_syntax(tmp_path):
    site = MkDocsSite(root=tmp_path, config_file=tmp_path / "mkdocs.yml", site_name="S", docs_dir=Path("docs"),
                      markdown_extensions={"toc": {}})
    assert clean_mkdocs(PAGE, site) == PAGE


def test_a_longer_fence_is_not_closed_by_a_shorter_one():
    text = "````\n```\n*[X]: y\n```\n````\n*[X]: y"
    assert clean_mkdocs(text).split("\n") == ["````", "```", "*[X]: y", "```", "````", ""]
