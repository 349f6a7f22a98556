"""Books from other generators (Jekyll, MkDocs, mdBook): their template syntax is not indexed as prose."""

from __future__ import annotations

from ingestion.reading.parsing import parse_document

JEKYLL = """# Setup

{% comment %}
a draft paragraph nobody should read
{% endcomment %}
Install it with {{ site.tool }} and {% include note.html %} then run it.
Write `{{ page.title }}` in a template to show the title.

```liquid
{% for post in site.posts %}{{ post.title }}{% endfor %}
```
"""


def texts(doc) -> list[tuple[str, str]]:
    return [(block.kind, block.text) for block in doc.blocks]


def test_liquid_comments_tags_and_outputs_are_not_prose_but_code_and_inline_code_keep_them():
    doc = parse_document(JEKYLL, rel_path="guide/setup.md")
    prose = " ".join(text for kind, text in texts(doc) if kind != "code")
    assert "draft paragraph" not in prose and "comment" not in prose
    assert "site.tool" not in prose and "include" not in prose and "Install it with" in prose
    assert "`{{ page.title }}`" in prose, "a page about Liquid quotes it in inline code"
    code = [text for kind, text in texts(doc) if kind == "code"]
    assert code and "{% for post in site.posts %}" in code[0]


def test_a_comment_tag_quoted_in_inline_code_hides_nothing():
    page = ("# Comments\n\nWrap a draft in `{% comment %}` to hide it; the rest of this page still reads.\n\n"
            "## After\n\nEnd it with `{% endcomment %}`, as the template guide shows.\n")
    prose = " ".join(text for kind, text in texts(parse_document(page, rel_path="guide/comments.md")) if kind != "code")
    assert "`{% comment %}`" in prose and "the rest of this page still reads" in prose
    assert "as the template guide shows" in prose, "an unclosed quoted tag used to drop the rest of the page"


def test_mdx_pages_keep_their_jsx_object_literals():
    doc = parse_document("# Colours\n\n<span style={{color: 'red'}}>Red text</span> is red.\n",
                         rel_path="colours.mdx")
    assert any("Red text is red." in text for _, text in texts(doc))


def test_mkdocs_admonitions_become_a_label_and_their_indented_body_is_read_as_text():
    page = ('# Install\n\n!!! warning "Careful now"\n    Do not run this as root.\n\n    - first step\n'
            '    - second step\n\n??? note\n    Folded away.\n\nBack to normal text.\n')
    blocks = texts(parse_document(page, rel_path="install.md"))
    assert ("paragraph", "**Warning (Careful now):**\nDo not run this as root.") in blocks
    assert ("list", "- first step\n- second step") in blocks
    assert ("paragraph", "**Note:**\nFolded away.") in blocks
    assert not any(kind == "code" for kind, _ in blocks), "not one indented code block"


def test_an_mdbook_include_is_named_in_a_warning_and_not_left_as_text():
    doc = parse_document("# Main\n\nThe program:\n\n{{#include ../src/main.rs:2:10}}\n", rel_path="ch1.md")
    assert not any("#include" in text for _, text in texts(doc))
    assert [(w.line, "{{#include ../src/main.rs:2:10}}" in w.message) for w in doc.warnings] == [(5, True)]


def test_a_new_books_title_comes_from_its_index_page_or_readme_before_its_folder_name(book_dir, db):
    from ingestion.indexing.indexer import default_title
    from ingestion.reading.discovery import discover

    book_dir.write("guide/first.md", "# First\n\nText.\n")
    assert default_title(discover(book_dir.root)) == "Book", "no index page: the folder's name"
    book_dir.write("README.md", "# Robotics Lecture Notes\n\nWelcome.\n")
    assert default_title(discover(book_dir.root)) == "Robotics Lecture Notes"
    book_dir.write("index.md", "---\ntitle: Course Handbook\n---\nWelcome.\n")
    assert default_title(discover(book_dir.root)) == "Course Handbook", "index.md first, its front matter title"


def test_a_folder_named_for_what_it_holds_takes_its_title_from_the_folder_above(tmp_path, db):
    from ingestion.indexing.indexer import default_title
    from ingestion.reading.discovery import discover

    docs = tmp_path / "robot-course" / "docs"
    docs.mkdir(parents=True)
    (docs / "intro.md").write_text("# Intro\n\nText.\n", encoding="utf-8")
    assert default_title(discover(docs)) == "Robot Course", "not “Docs”: a refusal names the book by its title"
