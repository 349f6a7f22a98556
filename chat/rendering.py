"""An answer as safe HTML: Markdown rendered, sanitised, citation markers turned into links.

Answers quote the book and, with an LLM, the model's own words; neither may put markup on
the page. So raw HTML in the Markdown is escaped rather than passed through (the renderer's
HTML handlers are removed), and the result is cleaned again with an allow-list (nh3) that
keeps only formatting tags and http(s)/mailto links. Citation markers ``[n]`` outside code
become links to source ``n``'s section in the book; a marker that names no source stays text.
"""

from __future__ import annotations

import html
import re

import markdown
import nh3

ALLOWED_TAGS = {"p", "br", "hr", "ul", "ol", "li", "pre", "code", "em", "strong", "b", "i", "blockquote", "a",
                "table", "thead", "tbody", "tr", "th", "td", "h3", "h4", "h5", "h6", "del"}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"}}
_CODE = re.compile(r"(<pre\b.*?</pre>|<code\b.*?</code>|<a\b.*?</a>)", re.DOTALL)
_MARKER = re.compile(r"\[(\d{1,2})\]")
_HEADING = re.compile(r"<(/?)h[12]\b")


def _markdown() -> markdown.Markdown:
    md = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists"], output_format="html")
    md.preprocessors.deregister("html_block")  # raw HTML blocks stay text…
    md.inlinePatterns.deregister("html")  # …and so do inline tags (the escaper shows them literally)
    return md


def safe_url(url: str) -> bool:
    """Only web links and site-relative paths become hrefs (never ``javascript:`` and the like)."""
    return url.startswith(("https://", "http://", "/", "#")) and not url.startswith("//")


def render_answer(answer: str, sources: list[dict], href=None) -> str:
    """The answer as sanitised HTML with citation links (``sources`` as in the response: ``n``, ``url``…).

    A marker links to its source's ``url`` in the book, or to ``href(source)`` when given (the chat page
    links markers to the source cards below the answer)."""
    if not answer:
        return ""
    rendered = _markdown().convert(answer)
    rendered = _HEADING.sub(r"<\1h4", rendered)  # an answer's headings never outrank the page's
    clean = nh3.clean(rendered, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES,
                      url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer")
    by_number = {s["n"]: s for s in sources}

    def link(match: re.Match) -> str:
        source = by_number.get(int(match.group(1)))
        target = href(source) if source is not None and href else (source or {}).get("url") or ""
        if source is None or not safe_url(target):
            return match.group(0)
        title = " › ".join(p for p in (source.get("chapter"), source.get("section")) if p)
        return (f'<a class="bookchat-cite" href="{html.escape(target, quote=True)}" '
                f'data-n="{source["n"]}" title="{html.escape(title, quote=True)}">[{source["n"]}]</a>')

    parts = _CODE.split(clean)
    return "".join(part if i % 2 else _MARKER.sub(link, part) for i, part in enumerate(parts))
