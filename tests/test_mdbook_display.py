"""``ingestion.reading.mdbook.display``: what mdBook's renderer shows of a page — the info-string reading and the
fences of a playground, beside the hidden-line cases of tests/test_mdbook.py."""

from __future__ import annotations

from ingestion.reading.mdbook.display import code_language, hide_prefixed_lines, playground_block, visible_code


def test_the_language_is_the_info_strings_first_word():
    assert code_language("rust,ignore") == "rust"
    assert code_language("  python\tlinenos") == "python"
    assert code_language(",,") == ""


def test_an_empty_prefix_hides_nothing():
    assert hide_prefixed_lines("~a\nb", "") == "~a\nb"


def test_a_languageless_block_keeps_every_line_even_with_hidelines_configured():
    assert visible_code("~a\nb", "", {"": "~"}) == "~a\nb"


def test_a_playground_whose_file_holds_a_fence_gets_a_longer_fence():
    block = playground_block('let s = "```";')
    assert block == '````rust\nlet s = "```";\n````\n'
