"""MkDocs conventions (``ingestion.reading.mkdocs``): config, pages, nav order, URLs, heading ids, snippets and the
extensions' syntax. Pure functions: no database.

The expected URLs, nav order and heading ids of ``tests/data/mkdocs_site`` came from a real ``mkdocs build`` of
that folder with MkDocs 1.6.1, pymdown-extensions 13.1 and Markdown 3.11.3 (default ``mkdocs`` theme), read from
the built HTML and from ``mkdocs.structure.nav.get_navigation``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion.reading.mkdocs import (
    BlogOptions,
    PythonRef,
    Slugify,
    blog_options,
    clean_mkdocs,
    expand_snippets,
    heading_ids,
    matches_gitignore,
    nav_order,
    page_files,
    page_path,
    page_url,
    post_rel_path,
    read_mkdocs,
    slugify,
    snippet_lines,
)
from tests.support.shared_data import shared_data

FIXTURE = Path(__file__).resolve().parent / "data" / "mkdocs_site"


@pytest.fixture
def site():
    return read_mkdocs(FIXTURE)


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def test_no_config_is_not_an_mkdocs_site(tmp_path):
    assert read_mkdocs(tmp_path) is None
    write(tmp_path, {"mkdocs.yaml": "site_name: Alt\n"})
    assert read_mkdocs(tmp_path).site_name == "Alt"


def test_fixture_config_with_inherit_and_env(site):
    assert site.site_name == "Fixture Handbook"  # the child wins
    assert site.site_url == "https://example.org/handbook/"  # !ENV [VAR, default]: the default, "/" added
    assert site.docs_dir == FIXTURE / "docs" and site.use_directory_urls is True
    assert site.config["extra"] == {"colour": "blue", "team": {"lead": "child", "size": 3}, "analytics": None}
    assert site.toc.permalink is True and site.toc.slugify == Slugify()
    assert site.snippets.base_path == [FIXTURE, FIXTURE / "includes"]
    assert site.snippets.auto_append == ["includes/abbreviations.md"]
    assert site.warnings == []


def test_fixture_pages_order_and_urls_as_mkdocs_builds_them(site):
    assert "README.md" not in page_files(site)  # index.md wins; dot files, templates/ and exclude_docs left out
    assert not {".hidden.md", "templates/page.md", "drafts/wip.md"} & set(page_files(site))
    order = [rel for rel in nav_order(site) if not rel.startswith("blog/")]
    assert nav_order(site)[4:7] == ["blog/index.md", "blog/posts/new-moorings.md", "blog/posts/tide-gauge.md"]
    assert order == ["index.md", "Zeta.md", "about.md", "api/README.md", "guide/index.md", "guide/install.md",
                     "guide/z-last.md", "guide/advanced/tips.md"]
    assert [page_url(site, rel) for rel in order] == [
        "https://example.org/handbook/", "https://example.org/handbook/Zeta/", "https://example.org/handbook/about/",
        "https://example.org/handbook/api/", "https://example.org/handbook/guide/",
        "https://example.org/handbook/guide/install/", "https://example.org/handbook/guide/z-last/",
        "https://example.org/handbook/guide/advanced/tips/"]


@pytest.mark.parametrize(("rel", "directory", "flat"), [
    ("index.md", "", "index.html"), ("README.md", "", "index.html"), ("about.md", "about/", "about.html"),
    ("guide/index.md", "guide/", "guide/index.html"), ("guide/README.md", "guide/", "guide/index.html"),
    ("guide/install.md", "guide/install/", "guide/install.html"), ("x.markdown", "x/", "x.html"),
    ("a b/Ünï.md", "a%20b/%C3%9Cn%C3%AF/", "a%20b/%C3%9Cn%C3%AF.html"),  # MkDocs 1.6.1's File.url
])
def test_page_paths_as_mkdocs_file_url(rel, directory, flat):
    assert page_path(rel, True) == directory and page_path(rel, False) == flat


def test_page_url_without_site_url_is_site_relative(tmp_path):
    write(tmp_path, {"mkdocs.yml": "site_name: S\nuse_directory_urls: false\n", "docs/a/b.md": "# B\n"})
    site = read_mkdocs(tmp_path)
    assert site.site_url is None and page_url(site, "a/b.md") == "/a/b.html"


def test_fixture_heading_ids_match_the_built_html(site):
    lines = (FIXTURE / "docs/guide/install.md").read_text().split("\n")
    titles = [line.lstrip("#").strip() for line in lines if line.startswith("#")]
    assert heading_ids(titles, site) == [
        "install", "requirements", "requirements_1", "cafe-creme", "use-pip-install-here", "step-1-download",
        "my-id", "my-id_1", "later_1", "later", "linked-title", "emphasis-and-bold", "unicode-dash", "_1",
        "trailing-hashes", "snake_case_name", "styled", "a_1", "a", "a_2"]


def test_slugify_variants_as_pymdownx_and_toc():  # values from the installed functions
    unicode, lower = Slugify("unicode"), Slugify("pymdownx", case="lower")
    encoded = Slugify("pymdownx", case="lower", percent_encode=True)

    def slug(text, how):
        site = read_mkdocs(FIXTURE)
        site.toc = type(site.toc)(slugify=how)
        return slugify(text, site)

    assert [slug("Café & Crème", how) for how in (Slugify(), unicode, lower, encoded)] == [
        "cafe-creme", "café-crème", "café--crème", "caf%C3%A9--cr%C3%A8me"]
    assert slug("日本語 Text", Slugify()) == "text" and slug("日本語 Text", lower) == "日本語-text"


def test_toc_slugify_option_is_recognised(tmp_path):
    write(tmp_path, {"mkdocs.yml": "site_name: S\nmarkdown_extensions:\n  - toc:\n      separator: _\n"
                                   "      slugify: !!python/object/apply:pymdownx.slugs.slugify\n"
                                   "        kwds: {case: lower}\n"
                                   "  - pymdownx.emoji:\n      emoji_index: !!python/name:material.x.twemoji\n"})
    site = read_mkdocs(tmp_path)
    assert site.toc.slugify == Slugify("pymdownx", case="lower") and site.toc.separator == "_"
    assert site.markdown_extensions["pymdownx.emoji"]["emoji_index"] == PythonRef("material.x.twemoji")
    assert heading_ids(["Hello World", "Hello :smile: World"], site) == ["hello_world", "hello__world"]


def test_content_tabs_abbreviations_and_attr_lists_are_cleaned_line_for_line(site):
    text = ('Intro\n\n=== "Linux"\n\n    Run it.\n\n    ```bash\n    ./go\n    ```\n\n===! "Win *10*"\n\n'
            '    Click.\n\n    === "Nested"\n\n        Deep.\n\nAfter.\n\n*[HTML]: Hyper Text\n\n'
            '[Go](x.md){ .md-button } and `[c](d){ .x }`\nA paragraph\n{: .note }\n\n## Head { #h }\n\n'
            '```md\n=== "Not a tab"\n*[X]: kept in code\n```')
    cleaned = clean_mkdocs(text, site)
    assert cleaned.count("\n") == text.count("\n")
    lines = cleaned.split("\n")
    assert lines[2] == "**Linux:**" and lines[4] == "Run it." and lines[6] == "```bash" and lines[7] == "./go"
    assert lines[10] == "**Win 10:**" and lines[14] == "**Nested:**" and lines[16] == "Deep."
    assert lines[18] == "After." and lines[20] == ""
    assert lines[22] == "[Go](x.md) and `[c](d){ .x }`" and lines[23] == "A paragraph" and lines[24] == ""
    assert lines[26] == "## Head { #h }"
    assert lines[-3:-1] == ['=== "Not a tab"', "*[X]: kept in code"]


def test_snippets_sections_ranges_escapes_and_auto_append(site):
    lines = (FIXTURE / "docs/guide/install.md").read_text().split("\n")
    result = expand_snippets(lines, site, rel_path="guide/install.md")
    text = "\n".join(result.lines)
    assert '```python\ndef main():\n    print("hello")\n```' in text  # a section, inside a code block
    assert "\nimport sys\n" in text  # example.py:1:1, found in the second base path
    assert text.endswith("*[HTML]: Hyper Text Markup Language\n*[CLI]: Command Line Interface\n\n")
    assert len(result.origins) == len(result.lines) and max(result.origins) == len(lines) - 1
    assert result.warnings == [] and len(result.digests) == 3
    escaped = expand_snippets([';--8<-- "includes/notice.md"', "-8<-", "; includes/notice.md", "-8<-"], site,
                              rel_path="x.md", auto_append=False)
    assert escaped.lines == ['--8<-- "includes/notice.md"']
    assert snippet_lines("includes/notice.md", site) == ["Shared notice: back up your data first.", ""]
    assert snippet_lines("example.py:2:2", site) == [""]


def test_snippet_outside_the_root_missing_or_in_a_loop_is_a_warning(tmp_path):
    write(tmp_path / "secret", {"key.md": "secret\n"})
    root = write(tmp_path / "site", {
        "mkdocs.yml": "site_name: S\nmarkdown_extensions:\n  - pymdownx.snippets:\n      base_path: ['.', '..']\n",
        "docs/index.md": "# I\n", "a.md": 'A\n--8<-- "b.md"\n', "b.md": 'B\n--8<-- "a.md"\n'})
    site = read_mkdocs(root)
    result = expand_snippets(['--8<-- "secret/key.md"', '--8<-- "../secret/key.md"', '--8<-- "nope.md"',
                              '--8<-- "a.md"'], site, rel_path="index.md")
    assert "secret" not in result.lines
    assert [line for line in result.lines if line] == ["A", "B"]  # a.md, b.md, then a.md again: skipped
    messages = [issue.message for issue in result.warnings]
    assert any("outside the project" in m for m in messages) and any("file not found" in m for m in messages)
    assert any("includes itself" in m for m in messages)
    assert all(issue.line in (1, 2, 3, 4) for issue in result.warnings)


@pytest.mark.parametrize("content", [b"", b"\x00\xff\xfe binary", b"site_name: [unclosed", b"- just\n- a list\n",
                                     b"site_name: S\nnav: 3\ndocs_dir: 5\nuse_directory_urls: maybe\n",
                                     b"INHERIT: mkdocs.yml\nsite_name: Loop\n", b"INHERIT: missing.yml\n",
                                     b"site_name: !!python/object/apply:os.system ['true']\n"])
def test_bad_config_never_raises(tmp_path, content):
    write(tmp_path, {"mkdocs.yml": content, "docs/index.md": "# I\n"})
    site = read_mkdocs(tmp_path)
    assert site is not None and site.site_name and nav_order(site) == ["index.md"]
    if content.strip():
        assert site.warnings


def test_nav_naming_a_missing_file_or_a_url(tmp_path):
    write(tmp_path, {"mkdocs.yml": "site_name: S\nnav:\n  - Home: index.md\n  - Gone: gone.md\n"
                                   "  - Part:\n    - b.md\n    - Ext: https://example.org/\n    - index.md\n",
                     "docs/index.md": "# I\n", "docs/b.md": "# B\n"})
    site = read_mkdocs(tmp_path)
    assert nav_order(site) == ["index.md", "b.md"]
    assert site.nav[1].url == "gone.md" and site.nav[2].children[1].url == "https://example.org/"
    assert any("gone.md" in w for w in site.warnings)


def test_gitignore_subset():
    assert matches_gitignore(["drafts/"], "drafts/a.md") and matches_gitignore(["/tutorials/**/*.md"],
                                                                                "tutorials/blogs/basic.md")
    assert not matches_gitignore(["*.md", "!keep.md"], "keep.md") and matches_gitignore([".*"], "a/.x.md")


@pytest.mark.needs("shared-data")
def test_material_for_mkdocs_site():
    root = shared_data() / "mkdocs-material"
    if not (root / "mkdocs.yml").is_file():
        pytest.skip(f"{root} holds no mkdocs.yml")
    site = read_mkdocs(root)
    assert (site.site_name, site.site_url, site.docs_dir) == (
        "Material for MkDocs", "https://squidfunk.github.io/mkdocs-material/", root / "docs")
    assert site.use_directory_urls and site.toc.permalink is True and site.toc.slugify == Slugify()
    assert site.snippets.base_path == [root] and site.snippets.auto_append == ["includes/mkdocs.md"]
    assert site.warnings == [] and len(page_files(site)) == 96
    order = nav_order(site)  # checked against MkDocs 1.6.1's get_navigation: 83 pages, same order and URLs
    assert len(order) == 83 and order[:5] == ["index.md", "getting-started.md", "creating-your-site.md",
                                              "publishing-your-site.md", "customization.md"]
    assert order[10:13] == ["tutorials/index.md", "tutorials/blogs/basic.md", "tutorials/blogs/navigation.md"]
    assert order[-1] == "blog/index.md"
    assert page_url(site, "setup/extensions/index.md") == "https://squidfunk.github.io/mkdocs-material/setup/extensions/"
    text = (root / "docs/reference/content-tabs.md").read_text()
    cleaned = clean_mkdocs(text, site)
    assert cleaned.count("\n") == text.count("\n") and "**Feature enabled:**" in cleaned
    assert '\n=== "C++"\n' in cleaned, "the syntax shown inside a code block stays as written"
    ids = heading_ids(["Context <small>optional</small> { #context }", "Usage", "Usage",
                       "Adding a :simple-materialformkdocs: badge to your project"], site)
    assert ids == ["context", "usage", "usage_1", "adding-a-badge-to-your-project"]


@pytest.mark.parametrize("plugins, expected", [
    (["search", "blog"], BlogOptions()),
    ({"material/blog": {"blog_dir": "news/", "post_url_format": "{categories}/{file}"}},
     BlogOptions(blog_dir="news", post_dir="news/posts", post_url_format="{categories}/{file}")),
    ([{"blog": {"blog_dir": ".", "post_dir": "{blog}/articles", "post_url_date_format": "yyyy"}}],
     BlogOptions(blog_dir=".", post_dir="articles", post_url_date_format="yyyy")),
    ([{"blog": {"enabled": False}}], None),
    (["search"], None),
    ("blog", None),  # not a list or mapping: MkDocs would refuse it
])
def test_blog_plugin_options(plugins, expected):
    assert blog_options(plugins, []) == expected


POST = "---\ndate: {date}\n{extra}---\n\n# {heading}\n\nText.\n"


@pytest.mark.parametrize("options, rel_path, text, expected", [
    # Material's defaults: the date, and the first heading's text slugified (code kept, emoji and tags dropped).
    (BlogOptions(), "blog/posts/a.md", POST.format(date="2025-03-07", extra="", heading="New `pilot` boats :boat:"),
     "blog/2025/03/07/new-pilot-boats.md"),
    (BlogOptions(), "blog/posts/2024/b.md", POST.format(date="{created: 2024-11-20, updated: 2025-01-01}",
                                                        extra="title: The gauge, again!\n", heading="Other"),
     "blog/2024/11/20/the-gauge-again.md"),
    (BlogOptions(), "blog/posts/c.md", POST.format(date="2024-01-02T10:00:00", extra="slug: my-slug\n", heading="X"),
     "blog/2024/01/02/my-slug.md"),
    (BlogOptions(post_url_format="{categories}/{slug}", post_url_max_categories=2), "blog/posts/d.md",
     POST.format(date="2024-05-06", extra="categories: [Harbour Works, Tides, Third]\nslug: d\n", heading="X"),
     "blog/harbour-works/tides/d.md"),
    (BlogOptions(post_url_format="{date}/{file}", post_url_date_format="d MMMM yy"), "blog/posts/e.md",
     POST.format(date="2024-05-06", extra="", heading="X"), "blog/6 May 24/e.md"),
    (BlogOptions(blog_dir=".", post_dir="posts"), "blog/posts/f.md",
     POST.format(date="2024-05-06", extra="", heading="F"), None),  # blog at the root: posts are under posts/
    (BlogOptions(), "guide/g.md", POST.format(date="2024-05-06", extra="", heading="G"), None),  # not a post
    (BlogOptions(), "blog/posts/h.md", "# No date\n", None),  # the plugin refuses it; kept at its file's URL
    (BlogOptions(), "blog/posts/i.md", POST.format(date="not a date", extra="", heading="I"), None),
    (BlogOptions(), "blog/posts/j.md", "---\ndate: [unclosed\n---\n# J\n", None),
])
def test_where_a_blog_post_is_published(options, rel_path, text, expected):
    assert post_rel_path(options, rel_path, text, emoji=True) == expected
