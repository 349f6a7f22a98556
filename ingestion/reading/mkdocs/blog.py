"""Material for MkDocs' blog plugin: where a post is published.

With the ``blog`` plugin (``plugins: [blog]``, also ``material/blog``), the Markdown files under
``post_dir`` (``blog/posts/`` by default) are posts, published at ``<blog_dir>/<post_url_format>/``
rather than at their file's path: ``blog/2023/11/30/adding-a-badge-to-your-project/``. As the
plugin does it (Material 9):

- ``post_url_format`` (``{date}/{slug}``) takes ``{date}`` (the post's ``date``, or ``date.created``,
  in ``post_url_date_format``, ``yyyy/MM/dd``), ``{slug}`` (front matter ``slug``, else the title
  slugified: front matter ``title``, else the first ``# `` heading's text, else the file's name as MkDocs
  titles a page, ``my_post.md`` → ``my post``; ``pymdownx.slugs.slugify`` in lower case with
  ``post_slugify_separator``), ``{file}`` (the file's name without ``.md``, ``README`` as ``index``) and
  ``{categories}`` (the first ``post_url_max_categories`` of ``categories``, slugified, joined by
  ``/``); the path is normalised and made a page of its own (``use_directory_urls`` applies).
- Date formats are Unicode (LDML) patterns; the ``yyyy``, ``yy``, ``MMMM``, ``MMM``, ``MM``, ``M``,
  ``dd`` and ``d`` fields are read (English month names), any other letters are kept as written.
- A post without a readable date is published where its file is (the plugin would refuse to build).
- A custom ``post_slugify`` function is not run: the default is used, with a warning.
- The archive, category and pagination pages the plugin generates list posts and are not indexed.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import re

import yaml

from ingestion.reading.mkdocs.config import BlogOptions, PythonRef, Slugify
from ingestion.reading.mkdocs.headings import heading_text, slug_as

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_DATE_FIELD = re.compile(r"yyyy|yy|MMMM|MMM|MM|M|dd|d")
_FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?\r?\n)?(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_H1 = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
_SLUGIFY = Slugify("pymdownx", case="lower")


def blog_options(plugins: object, warnings: list[str]) -> BlogOptions | None:
    """The blog plugin's options from ``plugins`` (a list of names or one-key mappings, or a mapping), or None
    when it is not there (or ``enabled: false``)."""
    for name, options in _plugin_entries(plugins):
        if name not in ("blog", "material/blog"):
            continue
        options = options if isinstance(options, dict) else {}
        if options.get("enabled", True) is False:
            return None
        text = {key: str(options[key]) for key in ("blog_dir", "post_url_format", "post_url_date_format",
                                                   "post_slugify_separator", "categories_slugify_separator")
                if isinstance(options.get(key), str | int) and not isinstance(options.get(key), bool)}
        blog_dir = text.get("blog_dir", "blog").strip("/") or "."
        post_dir = options.get("post_dir", "{blog}/posts")
        post_dir = post_dir.replace("{blog}", blog_dir) if isinstance(post_dir, str) else f"{blog_dir}/posts"
        if isinstance(options.get("post_slugify"), PythonRef | str):
            warnings.append("blog post_slugify is not run: posts' URLs use the plugin's default slugify")
        most = options.get("post_url_max_categories", 1)
        return BlogOptions(blog_dir=blog_dir, post_dir=posixpath.normpath(post_dir).strip("/"),
                           post_url_format=text.get("post_url_format", "{date}/{slug}"),
                           post_url_date_format=text.get("post_url_date_format", "yyyy/MM/dd"),
                           post_url_max_categories=most if isinstance(most, int) and not isinstance(most, bool) else 1,
                           post_slugify_separator=text.get("post_slugify_separator", "-"),
                           categories_slugify_separator=text.get("categories_slugify_separator", "-"))
    return None


def _plugin_entries(plugins: object) -> list[tuple[object, object]]:
    """``plugins`` as (name, options) pairs: MkDocs takes a mapping, or a list of names and one-key mappings."""
    if isinstance(plugins, dict):
        return list(plugins.items())
    if not isinstance(plugins, list):
        return []
    return [next(iter(item.items())) if isinstance(item, dict) and len(item) == 1 else (item, {}) for item in plugins]


def _file_name(rel_path: str) -> str:
    """MkDocs' name of a page's file: without its extension, ``README`` as ``index``."""
    stem = posixpath.splitext(posixpath.basename(rel_path))[0]
    return "index" if stem == "README" else stem


def post_rel_path(options: BlogOptions, rel_path: str, text: str, *, emoji: bool = False) -> str | None:
    """Where the post ``rel_path`` (its Markdown ``text``) is published, as the path of the ``.md`` file MkDocs
    would build there (``blog/2023/11/30/slug.md``); None when it is not a post or has no readable date."""
    if not options.is_post(rel_path):
        return None
    match = _FRONT_MATTER.match(text)
    try:
        meta = yaml.safe_load(match.group(1) or "") if match else {}
    except yaml.YAMLError:
        return None
    meta = meta if isinstance(meta, dict) else {}
    date = meta.get("date")
    date = date.get("created") if isinstance(date, dict) else date
    if isinstance(date, str):
        try:
            date = dt.datetime.fromisoformat(date.strip())
        except ValueError:
            return None
    if not isinstance(date, dt.date):
        return None
    slug = meta.get("slug")
    if not isinstance(slug, str) or not slug.strip():
        title = meta.get("title")
        if not isinstance(title, str) or not title.strip():
            body = text[match.end():] if match else text
            heading = _H1.search(body)
            title = (heading_text(heading.group(1), emoji=emoji) if heading
                     else _file_name(rel_path).replace("-", " ").replace("_", " "))
        slug = slug_as(title, _SLUGIFY, options.post_slugify_separator)
    categories = meta.get("categories") if isinstance(meta.get("categories"), list) else []
    categories = [slug_as(str(name), _SLUGIFY, options.categories_slugify_separator)
                  for name in categories[:max(options.post_url_max_categories, 0)]]
    fields = {"date": _format_date(date, options.post_url_date_format), "slug": slug.strip(),
              "file": _file_name(rel_path), "categories": "/".join(categories)}
    try:
        path = options.post_url_format.format(**fields)
    except (KeyError, IndexError, ValueError):
        return None
    path = posixpath.normpath(path.strip("/"))
    return posixpath.normpath(posixpath.join(options.blog_dir, f"{path}.md"))


def _format_date(date: dt.date, pattern: str) -> str:
    def field(match: re.Match) -> str:
        token = match.group()
        return {"yyyy": f"{date.year:04d}", "yy": f"{date.year % 100:02d}", "MMMM": _MONTHS[date.month - 1],
                "MMM": _MONTHS[date.month - 1][:3], "MM": f"{date.month:02d}", "M": str(date.month),
                "dd": f"{date.day:02d}", "d": str(date.day)}[token]

    return _DATE_FIELD.sub(field, pattern)
