"""``ingestion.reading.mdx``: an MDX page body cleaned to Markdown line for line — ESM, comments and tags removed,
labels written for tabs and admonitions, prose props kept, code left alone — and what it reports (code lines,
labels, removed lines, warnings, or a ParseError for a ``.mdx`` page whose tags don't balance)."""

from __future__ import annotations

import pytest

from bookchat.base.errors import ParseError
from ingestion.reading.mdx import clean_mdx, find_code_lines


def _clean(text: str, rel_path: str = "p.mdx"):
    return clean_mdx(text.split("\n"), rel_path=rel_path)


def test_imports_go_and_a_tab_item_becomes_a_label_for_its_content():
    page = ('import Tabs from "@theme/Tabs"\n\n# Title\n\n<Tabs>\n<TabItem value="npm" label="npm">\n\nRun it.\n\n'
            "</TabItem>\n</Tabs>")
    result = _clean(page)
    assert result.lines == ["", "", "# Title", "", "", "**npm:** ", "", "Run it.", "", "", ""]
    assert len(result.lines) == len(page.split("\n"))
    assert {line: (label.text, label.end_line) for line, label in result.labels.items()} == {5: ("**npm:**", 9)}
    assert result.removed == {0, 4, 9, 10}


def test_comments_string_expressions_and_prose_props_with_one_warning_per_unknown_component():
    result = _clean('Text {/* hidden */} and <!-- gone --> {"kept"} {x + 1}\n\n<Step title="Install" />\n'
                    "<Unknown />\n<Unknown />")
    assert result.lines == ["Text  and  kept {x + 1}", "", "Step: Install", "", ""]
    assert [(issue.line, issue.message) for issue in result.warnings] == [(4, "dropped JSX component <Unknown />")]


def test_html_keeps_its_text_but_script_goes_with_its_content_and_unknown_lowercase_tags_are_prose():
    result = _clean("<details>\n<summary>More</summary>\n\nBody <robot> here\n</details>\n\n<script>\nvar x = 1;\n"
                    "</script>")
    assert result.lines == ["", "More", "", "Body <robot> here", "", "", "", "", ""]


def test_an_admonition_becomes_a_label_and_code_fences_are_untouched():
    result = _clean(":::tip[Careful]\n\nDo it.\n\n:::\n\n```js\n<Not a tag>\n```")
    assert result.lines == ["**Tip (Careful):**", "", "Do it.", "", "", "", "```js", "<Not a tag>", "```"]
    assert result.code_lines == {6, 7, 8}


def test_an_unclosed_component_fails_an_mdx_page_but_only_warns_in_a_markdown_page():
    with pytest.raises(ParseError, match="never closed"):
        _clean("<Tabs>\nunclosed")
    result = _clean("<Tabs>\nunclosed", "p.md")
    assert result.lines == ["", "unclosed"]
    assert [(issue.line, issue.message) for issue in result.warnings] == [(1, "JSX tag <Tabs> is never closed")]


def test_a_code_block_component_becomes_a_fence_and_an_mdx_code_block_is_unwrapped():
    assert _clean('<CodeBlock language="py">\n{`print(1)\nx`}\n</CodeBlock>').lines == ["```py", "print(1)", "x",
                                                                                         "```"]
    assert _clean('```mdx-code-block\n<Foo title="A b" />\n```').lines == ["", "Foo: A b", ""]


def test_find_code_lines_separates_mdx_code_blocks():
    assert find_code_lines(["```", "x", "```", "y"]) == ({0, 1, 2}, [])
    assert find_code_lines(["```mdx-code-block", "x", "```"]) == (set(), [(0, 3)])
