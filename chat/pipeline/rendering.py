"""An answer as safe HTML: Markdown rendered, sanitised, citation markers turned into links.

Answers quote the book and, with an LLM, the model's own words; neither may put markup on
the page. So raw HTML in the Markdown is escaped rather than passed through (the renderer's
HTML handlers are removed), and the result is cleaned again with an allow-list (nh3) that
keeps only formatting tags and http(s)/mailto links. Citation markers ``[n]`` outside code and
math become links to source ``n``'s section in the book; a marker that names no source stays text.
TeX math (``$…$``, ``$$…$$``) is shown as the book wrote it, in a ``bookchat-math`` span, never
read as Markdown (``$x_1 * y_2$`` is not emphasis).

Code blocks are taken out of the Markdown before it is rendered and rendered here, because books
write more after a fence's language than Python-Markdown's ``fenced_code`` accepts (it turned
```` ```js title="a.js" ```` into a paragraph of inline code). Every fence syntax the indexer reads is
understood: Docusaurus (``js title="a.js" {1,4-6} showLineNumbers npm2yarn``), MkDocs
(``{ .py title="a.py" linenums="1" }``, ``py hl_lines="2"``), mdBook (``rust,ignore``) and plain
Jekyll/CommonMark. The language picks a Pygments lexer (unknown ones stay plain text), ``title``
becomes the block's caption, and the rest of the meta (line ranges, line numbers, npm2yarn, which
shows the npm command as written) is dropped. Highlighting is Pygments' short class names only, so
the page's and the widget's stylesheets colour them for light and dark themes; the copy button is
added by their scripts (a page without JavaScript still shows the block). An unclosed fence runs
to the end of the answer, as CommonMark says.
"""

from __future__ import annotations

import html
import re
import secrets
from dataclasses import dataclass

import markdown
import nh3
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from chat.pipeline.source_cards import Source
from chat.pipeline.terms import MATH
from ingestion.reading.fences import closes, opening

ALLOWED_TAGS = {"p", "br", "hr", "ul", "ol", "li", "pre", "code", "em", "strong", "b", "i", "blockquote", "a",
                "table", "thead", "tbody", "tr", "th", "td", "h3", "h4", "h5", "h6", "del", "div", "span"}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "th": {"align"}, "td": {"align"},
                      "div": {"class", "data-lang"}, "span": {"class"}}  # (Pygments' and math's classes)
_CODE = re.compile(r'(<pre\b.*?</pre>|<code\b.*?</code>|<a\b.*?</a>|<div class="bookchat-code-title">.*?</div>'
                   r'|<span class="bookchat-math">.*?</span>)', re.DOTALL)
_MARKER = re.compile(r"\[(\d{1,2})\]")
_HEADING = re.compile(r"<(/?)h[12]\b")


def _markdown() -> markdown.Markdown:
    md = markdown.Markdown(extensions=["tables", "sane_lists"], output_format="html")
    md.preprocessors.deregister("html_block")  # raw HTML blocks stay text…
    md.inlinePatterns.deregister("html")  # …and so do inline tags (the escaper shows them literally)
    return md


def safe_url(url: str) -> bool:
    """Only web links and site-relative paths become hrefs (never ``javascript:`` and the like)."""
    return url.startswith(("https://", "http://", "/", "#")) and not url.startswith("//")


def render_answer(answer: str, sources: list[Source], href=None) -> str:
    """The answer as sanitised HTML with citation links to its ``sources``.

    A marker links to its source's ``url`` in the book, or to ``href(source)`` when given (the chat page
    links markers to the source cards below the answer)."""
    if not answer:
        return ""
    nonce = secrets.token_hex(8)  # the answer can't know it, so can't name a block it doesn't hold
    text, blocks = split_code_blocks(answer, nonce)
    text, maths = _take_math(text, nonce)
    rendered = _markdown().convert(text)
    rendered = re.sub(rf"<p>bookchatcode{nonce}n(\d+)</p>", lambda m: code_block_html(blocks[int(m.group(1))]),
                      rendered)
    rendered = re.sub(rf"bookchatmath{nonce}n(\d+)", lambda m: '<span class="bookchat-math">'
                      f"{html.escape(maths[int(m.group(1))], quote=False)}</span>", rendered)
    rendered = _HEADING.sub(r"<\1h4", rendered)  # an answer's headings never outrank the page's
    clean = nh3.clean(rendered, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES,
                      url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer")
    by_number = {s.n: s for s in sources}

    def link(match: re.Match) -> str:
        source = by_number.get(int(match.group(1)))
        if source is None:
            return match.group(0)
        target = (href(source) if href else source.url) or ""
        if not safe_url(target):
            return match.group(0)
        title = " › ".join(p for p in (source.chapter, source.section) if p)
        return (f'<a class="bookchat-cite" href="{html.escape(target, quote=True)}" '
                f'data-n="{source.n}" title="{html.escape(title, quote=True)}">[{source.n}]</a>')

    parts = _CODE.split(clean)
    return "".join(part if i % 2 else _MARKER.sub(link, part) for i, part in enumerate(parts))


# -- code blocks ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CodeBlock:
    code: str
    lang: str = ""  # the lexer's name as the book wrote it ("js", "rust"), lower case; "" when none
    title: str = ""  # Docusaurus/MkDocs ``title="…"``: shown as the block's caption


_TITLE = re.compile(r"""\btitle=(?:"([^"]*)"|'([^']*)'|(\S+))""")
_FORMATTER = HtmlFormatter(nowrap=True)
MAX_HIGHLIGHT_CHARS = 20_000  # past this a block is shown as plain text: Pygments is fast, but not free
_CODE_OR_MATH = re.compile(rf"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)|({MATH})", re.DOTALL)  # inline code is Markdown's


def _take_math(markdown_text: str, nonce: str) -> tuple[str, list[str]]:
    """``markdown_text`` with each TeX span replaced by a placeholder word, and the spans: Markdown would read
    ``$x_1 * y_2$`` as emphasis; math is shown as the book wrote it."""
    maths: list[str] = []

    def take(match: re.Match) -> str:
        if match.group(2) is None:
            return match.group(0)  # inline code: Markdown's
        maths.append(match.group(2))
        return f"bookchatmath{nonce}n{len(maths) - 1}"

    return (_CODE_OR_MATH.sub(take, markdown_text) if "$" in markdown_text else markdown_text), maths


def split_code_blocks(markdown_text: str, nonce: str = "") -> tuple[str, list[CodeBlock]]:
    """``markdown_text`` with each fenced code block replaced by a placeholder paragraph
    (``bookchatcode{nonce}n{index}``), and the blocks."""
    lines = markdown_text.split("\n")
    out: list[str] = []
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        opened = opening(lines[i])  # any indent: in a list too
        if not opened:
            out.append(lines[i])
            i += 1
            continue
        indent = len(opened["indent"])
        body: list[str] = []
        i += 1
        while i < len(lines) and not closes(lines[i], opened["marker"]):
            line = lines[i]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            i += 1
        i += 1  # the closing fence (or the end of the text)
        lang, title = parse_info(opened.group("info"))
        out += ["", f"bookchatcode{nonce}n{len(blocks)}", ""]
        blocks.append(CodeBlock("\n".join(body), lang, title))
    return "\n".join(out), blocks


def parse_info(info: str) -> tuple[str, str]:
    """A fence's info string as (language, title): ``js title="a.js" {1,3}`` → ``("js", "a.js")``,
    ``{ .py title='b.py' }`` → ``("py", "b.py")``, ``rust,ignore`` → ``("rust", "")``."""
    info = info.strip()
    found = _TITLE.search(info)
    title = next((g for g in found.groups() if g is not None), "").strip() if found else ""
    if info.startswith("{"):  # MkDocs attributes ``{ .py title="…" }``, or a bare Docusaurus range ``{1,3}``
        found_class = re.search(r"(?:^|\s)\.([\w+#-]+)", info.strip("{} "))
        lang = found_class.group(1).lower() if found_class else ""
    else:
        first = info.split(None, 1)[0] if info else ""
        lang = "" if "=" in first else first.split(",", 1)[0].lower()
    return (lang if re.fullmatch(r"[\w+#.-]{1,40}", lang) else ""), title


def code_block_html(block: CodeBlock) -> str:
    """One code block as HTML: an optional caption over ``<pre><code>`` holding Pygments' class spans."""
    code = block.code
    try:
        lexer = get_lexer_by_name(block.lang, stripnl=False, ensurenl=False) if block.lang else None
    except ClassNotFound:
        lexer = None
    if lexer is not None and len(code) <= MAX_HIGHLIGHT_CHARS:
        body = highlight(code, lexer, _FORMATTER).rstrip("\n")
    else:
        body = html.escape(code, quote=False)
    lang = html.escape(block.lang, quote=True)
    title = f'<div class="bookchat-code-title">{html.escape(block.title, quote=False)}</div>' if block.title else ""
    code_class = f' class="language-{lang}"' if lang else ""
    return (f'<div class="bookchat-code" data-lang="{lang}">{title}'
            f"<pre><code{code_class}>{body}</code></pre></div>")


def pre_texts(answer_html: str) -> list[str]:
    """The text of each code block (``<pre>``) of rendered HTML, as the reader sees it."""
    return [html.unescape(re.sub(r"<[^>]+>", "", block)) for block in re.findall(r"<pre\b[^>]*>(.*?)</pre>",
                                                                                  answer_html, re.DOTALL)]
