"""``ingestion.reading.generators``: Jekyll, MkDocs and mdBook syntax in a page rewritten line for line — Liquid
comments, raw blocks, tags and outputs; ``{% highlight %}`` blocks as fences; MkDocs admonitions as label lines —
outside code, and only in ``.md`` pages."""

from __future__ import annotations

from ingestion.reading.generators import clean_generator_syntax, dedent_body, highlight_fences, outside_inline_code


def _cleaned(lines: list[str], code_lines: frozenset[int] = frozenset(), rel_path: str = "p.md"):
    lines = list(lines)
    warnings = clean_generator_syntax(lines, set(code_lines), rel_path=rel_path)
    return lines, [(issue.line, issue.message) for issue in warnings]


def test_liquid_comments_tags_and_outputs_go_outside_code():
    lines, warnings = _cleaned(["A {% comment %}hidden", "still hidden {% endcomment %} B",
                                "{{ site.title }} x `{{ kept }}` {% include a.html %}", "in code {{ x }}",
                                "style={{a: 1}} ${{ secrets.X }}"], code_lines=frozenset({3}))
    assert lines == ["A ", " B", " x `{{ kept }}` ", "in code {{ x }}", "style={{a: 1}} ${{ secrets.X }}"]
    assert warnings == []


def test_a_raw_blocks_content_stays_as_written():
    lines, _ = _cleaned(["Write {% raw %}{{ page.title }}{% endraw %} here {{ gone }}", "{%- raw -%}",
                         "{{ multi }} {% if x %}", "{% endraw %} after {{ y }}", "quoted `{% raw %}` {{ z }}"])
    assert lines == ["Write {{ page.title }} here ", "", "{{ multi }} {% if x %}", " after ", "quoted `{% raw %}` "]


def test_an_mdbook_include_left_mid_line_is_removed_with_a_warning():
    lines, warnings = _cleaned(["mid {{#include f.rs}} line", r"escaped \{{#include g.rs}} stays"])
    assert lines[0] == "mid  line" and "g.rs" in lines[1]
    assert warnings == [(1, "mdBook {{#include f.rs}} is not inlined; its text is not indexed")]


def test_an_mdx_page_keeps_its_braces():
    assert _cleaned(["{{ x }} {% tag %}"], rel_path="p.mdx")[0] == ["{{ x }} {% tag %}"]


def test_admonitions_become_label_lines_with_their_body_dedented():
    lines, _ = _cleaned(['!!! warning "Careful"', "    body", "", "    more", "not body", "??? note", "    n"])
    assert lines == ["**Warning (Careful):**", "body", "", "more", "not body", "**Note:**", "n"]


def test_highlight_blocks_become_fences_only_when_closed_and_only_in_md_pages():
    lines = ["{% highlight ruby linenos %}", "```", "{% endhighlight %}", "{% highlight py %}", "never closed"]
    highlight_fences(lines, rel_path="a.md")
    assert lines == ["````ruby", "```", "````", "{% highlight py %}", "never closed"]
    mdx = ["{% highlight ruby %}", "x", "{% endhighlight %}"]
    highlight_fences(mdx, rel_path="a.mdx")
    assert mdx == ["{% highlight ruby %}", "x", "{% endhighlight %}"]


def test_outside_inline_code_rewrites_text_but_not_spans():
    assert outside_inline_code("a `a` ``a`` a", str.upper) == "A `a` ``a`` A"
    assert outside_inline_code("a `b` c", str.upper, code=lambda span: "") == "A  C"


def test_dedent_body_stops_at_the_first_line_indented_less():
    lines = ["label", "\t  tabbed", "   ", "    kept", "  out", "    after"]
    dedent_body(lines, 1, 4, clear_blank=True)
    assert lines == ["label", "  tabbed", "", "kept", "  out", "    after"]


def test_pymdown_blocks_become_labels_and_their_fences_go():
    lines, _ = _cleaned(["/// note | Technical Details", "", "Body.", "", "///",
                         "//// tab | Python 3.10+", "/// tip", "Inner.", "///", "////",
                         "/// admonition", "    type: warning", "    attrs: {class: x}", "Careful.", "///",
                         "/// details | Why?", "More.", "///",
                         "![img](a.png)", "/// caption", "A figure.", "///"])
    assert lines == ["**Note (Technical Details):**", "", "Body.", "", "",
                     "**Python 3.10+:**", "**Tip:**", "Inner.", "", "",
                     "**Warning:**", "", "", "Careful.", "",
                     "**Details (Why?):**", "More.", "",
                     "![img](a.png)", "", "A figure.", ""]


def test_only_a_closed_block_of_a_known_name_outside_code_and_in_md_pages_is_read():
    rust = ["/// Returns the sum", "///", "/// note", "never closed", "/// tip", "in code", "///"]
    assert _cleaned(rust, code_lines=frozenset({4, 5, 6}))[0] == rust  # a comment, an open block, a block in code
    assert _cleaned(["/// note", "x", "///"], rel_path="p.mdx")[0] == ["/// note", "x", "///"]
    # A closing line of fewer slashes than the opening's doesn't close it.
    assert _cleaned(["//// note", "x", "///"])[0] == ["//// note", "x", "///"]


def test_a_page_with_blocks_is_read_as_its_site_renders_it():
    from ingestion.reading.parsing import parse_document

    page = ("# Request body\n\nTo declare a body, use Pydantic.\n\n/// tip | Tip title\n\nUse `BaseModel`.\n\n///\n\n"
            "```rust\n/// note\nfn f() {}\n///\n```\n")
    text = "\n".join(block.text for block in parse_document(page, rel_path="body.md").blocks)
    assert "**Tip (Tip title):** Use `BaseModel`." in text  # the label joins its first paragraph, as ::: tip's
    assert "/// tip" not in text and "\n///\n" in text  # the code block's lines stay as written
