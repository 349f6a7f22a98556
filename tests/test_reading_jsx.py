"""``ingestion.reading.jsx``: the JSX lexer MDX cleanup relies on — tags and their attributes, where a JS
expression or an ESM block ends, string literals, and which component props are page text."""

from __future__ import annotations

from ingestion.reading.jsx import (
    Tag,
    component_prose,
    esm_end,
    is_component,
    parse_tag,
    skip_js,
    string_literal,
    tab_labels,
)


def test_a_tag_with_strings_spreads_flags_expressions_and_unquoted_values():
    seg = '<Step title="Install it" id="x" {...rest} open count={1 + "}"} href=/a/b />rest'
    tag = parse_tag(seg, 0)
    assert tag == Tag("Step", False, True, {"title": "Install it", "id": "x", "open": "", "count": '{1 + "}"}',
                                            "href": "/a/b"}, len(seg) - 4)


def test_what_is_not_a_tag():
    assert parse_tag("< 3", 0) is None  # prose
    assert parse_tag("</Tabs x>", 0) is None  # a closing tag has no attributes
    assert parse_tag('<a href="unclosed', 0) is None
    assert parse_tag("<>x", 0) == Tag("", False, False, {}, 2)  # a fragment
    assert parse_tag("</Tabs  >", 0) == Tag("Tabs", True, False, {}, 9)


def test_components_are_capitalised_dotted_or_fragments():
    assert is_component("Foo.Bar") and is_component("") and is_component("Tabs")
    assert not is_component("div")


def test_prose_props_are_text_and_names_urls_and_flags_are_not():
    attrs = {"title": "Install", "description": "Use apt", "id": "step-one", "href": "Some words here",
             "path": "/docs/guide", "extra": "Read the guide now", "flag": "true", "data": "{x}"}
    assert component_prose("Step", attrs) == "Step: Install — Use apt — Read the guide now"
    assert component_prose("Icon", {"name": "rocket"}) == ""


def test_tab_labels_in_either_key_order():
    tag = parse_tag("<Tabs values={[{label: 'Apple', value: 'apple'}, {value: 'pear', label: \"Pear\"}]}>", 0)
    assert tab_labels(tag) == {"apple": "Apple", "pear": "Pear"}
    assert tab_labels(Tag("Other", False, False, {"values": "{[]}"}, 0)) == {}


def test_skip_js_knows_strings_templates_and_comments():
    code = '{a: "}", b: `${ {c} }`, // }\n d /* } */}'
    assert skip_js(code + " after", 0) == len(code)
    assert skip_js("{ never closed", 0) == -1


def test_string_literals_are_unescaped_and_anything_else_is_none():
    assert string_literal("'it\\'s\\n'") == "it's\n"
    assert string_literal("`plain`") == "plain"
    assert string_literal("`a${b}`") is None
    assert string_literal("'a' + 'b'") is None
    assert string_literal("x") is None


def test_an_esm_block_ends_at_the_first_blank_line_where_its_code_is_complete():
    seg = 'import A from "a"\nexport const x = {\n\n  y: 1,\n}\n\n# Title'
    assert seg[:esm_end(seg, 0)] == 'import A from "a"\nexport const x = {\n\n  y: 1,\n}'
