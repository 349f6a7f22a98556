"""``ingestion.reading.mkdocs.blog``: Material's blog plugin options and where a post is published, on cases
tests/test_mkdocs.py leaves out (a custom slugify, separators, a format naming an unknown field)."""

from __future__ import annotations

from ingestion.reading.mkdocs.blog import blog_options, post_rel_path
from ingestion.reading.mkdocs.config import BlogOptions, PythonRef

POST = "---\ndate: 2024-01-02\ntitle: Hello World\n---\n\nText.\n"


def test_a_custom_post_slugify_is_warned_and_a_boolean_category_count_ignored():
    warnings = []
    options = blog_options({"blog": {"post_slugify": PythonRef("custom.slug"), "post_slugify_separator": "_",
                                     "post_url_max_categories": True}}, warnings)
    assert options == BlogOptions(post_slugify_separator="_")
    assert warnings == ["blog post_slugify is not run: posts' URLs use the plugin's default slugify"]


def test_the_slug_uses_the_posts_separator():
    assert post_rel_path(BlogOptions(post_slugify_separator="_"), "blog/posts/a.md", POST) == \
        "blog/2024/01/02/hello_world.md"


def test_a_format_with_a_parent_step_is_normalised_and_short_months_are_named():
    options = BlogOptions(post_url_format="{date}/../{slug}", post_url_date_format="MMM yyyy")
    assert post_rel_path(options, "blog/posts/a.md", POST) == "blog/hello-world.md"


def test_a_format_naming_an_unknown_field_publishes_nothing():
    assert post_rel_path(BlogOptions(post_url_format="{nope}"), "blog/posts/a.md", POST) is None


def test_what_counts_as_a_post():
    assert BlogOptions(post_dir=".").is_post("x/a.markdown")
    assert not BlogOptions().is_post("blog/posts/a.txt")
    assert not BlogOptions().is_post("blog/postscript/a.md")


def test_a_post_with_no_title_and_no_heading_is_named_after_its_file_as_mkdocs_titles_it():
    untitled = "---\ndate: 2024-01-02\n---\n\nText.\n"
    assert post_rel_path(BlogOptions(), "blog/posts/a.md", untitled) == "blog/2024/01/02/a.md"
    assert post_rel_path(BlogOptions(), "blog/posts/My_first-post.md", untitled) == \
        "blog/2024/01/02/my-first-post.md"
    assert post_rel_path(BlogOptions(post_url_format="{file}"), "blog/posts/README.md", untitled) == "blog/index.md"
