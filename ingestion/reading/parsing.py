"""Parse one Docusaurus Markdown/MDX page into a ParsedDocument: metadata, headings, content blocks.

Pipeline: YAML front matter → imported partials inlined (``ingestion.reading.partials``; each line remembers
its page line) → MDX cleanup that keeps every line in place (``ingestion.reading.mdx``) →
markdown-it block structure (``token.map``) → blocks cut from the cleaned lines, whose offsets and
line numbers point into the original text.

Decisions:
- Block text is the Markdown as written: inline markup and links ``[text](url)`` are kept; MDX is
  removed, HTML entities are decoded outside code, and the block's indentation is removed.
- Headings H1–H4 are not blocks: they label blocks (``Block.headings``). H5/H6 become ``**Title**``
  paragraphs. The H1 used as the title is listed in ``headings`` and chains but is never a block.
- Code: ```` ```lang\\ncode\\n``` ```` — meta (``{1,3}``, ``showLineNumbers``…) and Docusaurus magic
  comments (``// highlight-next-line``) dropped. A ``title="x"`` stays in the info string
  (```` ```js title="x" ````): Markdown renderers ignore it, the file name still helps retrieval, and
  the text always starts with its fence. The fence grows when the code itself holds a fence.
  Indented code does not exist (MDX).
- A label line (``Note:``, ``Tip (Title):``, a tab's ``npm:``) is merged into the next paragraph, list,
  quote or table of its admonition/tab; before code or math it stays a small paragraph of its own.
- No "html" or "admonition" blocks are produced: tags are stripped and admonitions are flattened.
"""

from __future__ import annotations

import datetime
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

from bookchat.base.errors import ParseError
from ingestion.reading.conventions import Conventions, HeadingAnchors
from ingestion.reading.documents import Block, Heading, Issue, Label, ParsedDocument, fence_for
from ingestion.reading.docusaurus import title_from_path
from ingestion.reading.fences import FENCE_LINE, decode_entities, fence_roles
from ingestion.reading.mdx import CleanResult, clean_mdx
from ingestion.reading.partials import PartialResolver

_MD = (
    MarkdownIt("commonmark", {"html": False})
    .enable(["table", "strikethrough"])
    .disable(["code", "html_block"])  # MDX has no indented code; tags are already stripped
    .use(dollarmath_plugin)
    .disable("math_inline")  # `$` in prose is money, not math, unless a site enables remark-math
    .disable("inline")  # block structure is all we need; heading titles are parsed on their own
)
_MD_INLINE = MarkdownIt("commonmark", {"html": False}).enable("strikethrough")
_LINE_BREAK = re.compile(r"\r\n?|\n")
_TITLE_META = re.compile(r"""title=(["'])(.*?)\1""")
_MAGIC_COMMENT = re.compile(
    r"^\s*(?://|#|<!--|\{/\*|/\*|--|%|;)\s*"
    r"(?:highlight-(?:next-line|start|end)|this-will-error|error-(?:next-line|start|end))"
    r"\s*(?:-->|\*/\}|\*/)?\s*$"
)
_MARKDOWN_LANGS = frozenset({"md", "mdx", "markdown"})
_CONTAINERS = {"bullet_list_open": "list", "ordered_list_open": "list", "blockquote_open": "quote",
               "table_open": "table"}


@dataclass
class _Raw:
    """A block before offsets are attached: 0-based inclusive lines of the (cleaned) text."""

    kind: str
    text: str
    first: int
    last: int
    headings: tuple[Heading, ...]


def parse_document(text: str, *, rel_path: str, category: str = "", partials: PartialResolver | None = None,
                   conventions: Conventions | None = None) -> ParsedDocument:
    """Parse a page. Raises ParseError (with file and 1-based line) for content that can't be read.

    With ``partials``, imported MDX partials are inlined where they are used (``ingestion.reading.partials``);
    ``conventions``: the generator's (slug, anchors, its own syntax; ``ingestion.reading.conventions``),
    Docusaurus's by default."""
    conventions = conventions or Conventions()
    lines = _LINE_BREAK.split(text)
    front_matter, body_start = _front_matter(lines, rel_path)
    body = [""] * body_start + lines[body_start:]
    body[0] = body[0].removeprefix("\ufeff")
    inlined = partials.inline(body, rel_path=rel_path) if partials is not None else None
    origins = inlined.origins if inlined is not None else range(len(body))
    try:
        page_lines = list(inlined.lines if inlined is not None else body)
        conventions.clean(page_lines)
        cleaned = clean_mdx(page_lines, rel_path=rel_path)
        env: dict = {}
        tokens = _MD.parse("\n".join(cleaned.lines), env)
        _check_fences(tokens, cleaned.lines, rel_path)
    except ParseError as exc:
        if exc.line is not None and exc.file == rel_path:
            exc.line = origins[exc.line - 1] + 1  # the page's line (of the <Partial /> when inside one)
        raise
    sources = [tokens[i + 1].content for i, token in enumerate(tokens) if token.type == "heading_open"]
    raws, headings, h1_title = _walk(tokens, cleaned, origins, conventions.anchors(sources))
    raws = _merge_labels(raws, cleaned.labels)
    spans = _line_spans(text)
    blocks = [
        Block(raw.kind, raw.text, origins[raw.first] + 1, origins[raw.last] + 1, spans[origins[raw.first]][0],
              spans[origins[raw.last]][1], raw.headings)
        for raw in raws
    ]
    warnings = [Issue(issue.file, origins[issue.line - 1] + 1 if issue.line else issue.line, issue.message)
                for issue in cleaned.warnings]
    if inlined is not None:
        warnings = inlined.warnings + warnings
    return ParsedDocument(
        rel_path=rel_path,
        title=_title(front_matter, h1_title, rel_path),
        slug=conventions.page_slug(rel_path, front_matter),
        front_matter=front_matter,
        category=category,
        blocks=blocks,
        headings=headings,
        warnings=warnings,
        link_definitions={label: (ref["href"], ref["title"]) for label, ref in env.get("references", {}).items()},
    )


# -- front matter -------------------------------------------------------------------------------


def read_front_matter(text: str, *, rel_path: str) -> dict:
    """Only the page's front matter, as ``parse_document`` reads it (ParseError when it can't be read)."""
    return _front_matter(_LINE_BREAK.split(text), rel_path)[0]


def _front_matter(lines: list[str], rel_path: str) -> tuple[dict, int]:
    """Return the front matter and the number of lines it takes (0 when there is none)."""
    if lines[0].removeprefix("\ufeff").rstrip() != "---":
        return {}, 0
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip() == "---"), None)
    if close is None:
        raise ParseError("front matter starting on line 1 is never closed with ---", file=rel_path, line=1)
    try:
        data = yaml.safe_load("\n".join(lines[1:close]))
        if data is not None and not isinstance(data, dict):
            raise ParseError("front matter is not a mapping of keys to values", file=rel_path, line=2)
        return _jsonable(data or {}), close + 1
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = 2 + mark.line if mark is not None else 1
        raise ParseError(f"invalid YAML in front matter: {problem}", file=rel_path, line=line) from exc
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # e.g. `date: 2021-13-45`
        raise ParseError(f"invalid value in front matter: {exc}", file=rel_path, line=2) from exc


def _jsonable(value: object) -> object:
    """YAML values → JSON-serialisable ones (dates become ISO strings)."""
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(item) for item in value), key=str)
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _title(front_matter: dict, h1_title: str | None, rel_path: str) -> str:
    for candidate in (front_matter.get("title"), h1_title, front_matter.get("sidebar_label")):
        if candidate is not None and str(candidate).strip():
            return str(candidate).strip()
    return title_from_path(rel_path)


# -- markdown-it tokens → blocks ------------------------------------------------------------------


def _check_fences(tokens: list[Token], lines: list[str], rel_path: str) -> None:
    """markdown-it runs an unclosed fence to the end of the file; we report it instead."""
    line_count = len(lines) - 1 if lines[-1] == "" else len(lines)  # text ending in "\n" has no extra line
    for token in tokens:
        if token.type != "fence" or not token.map or token.map[1] < line_count:
            continue
        start, end = token.map
        last = lines[end - 1].strip().lstrip("> \t")
        if end - start >= 2 and last.startswith(token.markup) and not last.strip(token.markup[0]):
            continue
        raise ParseError(f"code fence {token.markup}{token.info.strip()} is never closed", file=rel_path,
                         line=start + 1)


def _walk(tokens: list[Token], cleaned: CleanResult, origins: Sequence[int],
          anchors: HeadingAnchors) -> tuple[list[_Raw], list[Heading], str | None]:
    """Top-level tokens → raw blocks, headings (at their page lines, ``origins``) and the first H1's title."""
    raws: list[_Raw] = []
    headings: list[Heading] = []
    chain: list[Heading] = []
    h1_title: str | None = None
    index = 0
    while index < len(tokens):
        token = tokens[index]
        raw = None
        if token.type == "heading_open":
            level, inline = int(token.tag[1]), tokens[index + 1]
            title, anchor = _heading_title_anchor(inline, anchors)
            if level <= 4:
                heading = Heading(level, title, anchor, origins[token.map[0]] + 1)
                headings.append(heading)
                while chain and chain[-1].level >= level:
                    chain.pop()
                chain.append(heading)
                h1_title = title if level == 1 and h1_title is None else h1_title
            elif title:
                raw = _Raw("paragraph", f"**{title}**", token.map[0], token.map[1] - 1, tuple(chain))
        elif token.type == "paragraph_open":
            raw = _Raw("paragraph", _paragraph_text(cleaned.lines, token.map), *_span(token), tuple(chain))
        elif token.type == "fence":
            raw = _code_block(token, tuple(chain))
        elif token.type in ("math_block", "math_block_label"):
            raw = _Raw("math", f"$$\n{token.content.strip()}\n$$", *_span(token), tuple(chain))
        elif token.type in _CONTAINERS:
            text = _container_text(cleaned, token.map)
            raw = _Raw(_CONTAINERS[token.type], text, *_span(token), tuple(chain))
        if raw is not None and raw.text.strip():
            raws.append(_trim(raw, cleaned.lines))
        index = _next_top_level(tokens, index)
    return raws, headings, h1_title


def _next_top_level(tokens: list[Token], index: int) -> int:
    token = tokens[index]
    if token.nesting != 1:
        return index + 1
    depth = 0
    while index < len(tokens):
        depth += tokens[index].nesting
        index += 1
        if depth == 0:
            return index
    return index


def _span(token: Token) -> tuple[int, int]:
    return token.map[0], token.map[1] - 1


def _trim(raw: _Raw, lines: list[str]) -> _Raw:
    # markdown-it maps may end on blank (or blanked JSX) lines; keep the block tight.
    while raw.last > raw.first and not lines[raw.last].strip():
        raw.last -= 1
    while raw.first < raw.last and not lines[raw.first].strip():
        raw.first += 1
    return raw


def _heading_title_anchor(inline: Token, anchors: HeadingAnchors) -> tuple[str, str]:
    """Plain title (markup removed, as Docusaurus' mdast toString) and anchor of a heading."""
    plain = []
    for child in _MD_INLINE.parseInline(inline.content)[0].children or []:
        if child.type in ("text", "code_inline", "text_special", "image"):
            plain.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            plain.append(" ")
    return anchors.anchor(inline.content, " ".join("".join(plain).split()))


def _paragraph_text(lines: list[str], line_map: list[int]) -> str:
    text = "\n".join(line.strip() for line in lines[line_map[0] : line_map[1]] if line.strip())
    return decode_entities(text)


def _container_text(cleaned: CleanResult, line_map: list[int]) -> str:
    """A list, quote or table as written, minus lines that held only MDX, dedented; nested code
    fences are tidied like top-level ones and runs of blank lines outside code are squeezed."""
    kept = [cleaned.lines[i].rstrip() for i in range(*line_map) if i not in cleaned.removed]
    out: list[str] = []
    lang = ""
    for line, role in fence_roles(textwrap.dedent("\n".join(kept)).strip("\n").split("\n")):
        if role == "open":
            indent, marker = line[: len(line) - len(line.lstrip())], FENCE_LINE.match(line)["marker"]
            lang = _code_info(line.strip()[len(marker) :])
            line = f"{indent}{marker}{lang}"
        elif role == "code" and _is_magic_comment(line, lang):
            continue
        elif role == "text" and not line.strip() and out and not out[-1].strip():
            continue  # a second blank line, left where MDX was removed
        out.append(line)
    return decode_entities("\n".join(out))


def _code_block(token: Token, chain: tuple[Heading, ...]) -> _Raw | None:
    info = _code_info(token.info)
    code_lines = [line.rstrip() for line in token.content.split("\n") if not _is_magic_comment(line, info)]
    code = "\n".join(code_lines).strip("\n")
    if not code.strip():
        return None
    fence = fence_for(code)
    return _Raw("code", f"{fence}{info}\n{code}\n{fence}", *_span(token), chain)


def _is_magic_comment(line: str, info: str) -> bool:
    """Docusaurus strips ``// highlight-next-line`` & co. from rendered code (but not in Markdown
    examples, where they are the point)."""
    return info.split(" ")[0].lower() not in _MARKDOWN_LANGS and bool(_MAGIC_COMMENT.match(line))


def _code_info(info: str) -> str:
    """A fence's info string without Docusaurus meta: ``js title="a.js" {1,3}`` → ``js title="a.js"``;
    MkDocs ``{ .py title="a.py" linenums="1" }`` → ``py title="a.py"``."""
    info = info.strip()
    lang, _, meta = info.partition(" ")
    if lang.startswith("{") or "=" in lang:  # MkDocs ``{ .py title="a.py" }``: the language is its class
        found = re.search(r"(?:^|[\s{])\.([\w+#-]+)", info)
        lang, meta = (found.group(1) if found else ""), info
    title = _TITLE_META.search(meta)
    if title and title.group(2).strip():
        lang += f' title="{title.group(2).strip()}"'
    return lang


def _merge_labels(raws: list[_Raw], labels: dict[int, Label]) -> list[_Raw]:
    """Fold a label-only paragraph (``Note:``) into the next block of the same admonition/tab."""
    out: list[_Raw] = []
    index = 0
    while index < len(raws):
        raw = raws[index]
        label = labels.get(raw.first) if raw.kind == "paragraph" and raw.first == raw.last else None
        if label is None or raw.text != label.text:
            out.append(raw)
            index += 1
            continue
        nxt = raws[index + 1] if index + 1 < len(raws) else None
        end = label.end_line if label.end_line >= 0 else float("inf")
        if nxt is None or nxt.first > end or nxt.headings != raw.headings:
            index += 1  # an empty admonition or tab: nothing to label
            continue
        if nxt.kind in ("code", "math"):
            out.append(raw)
            index += 1
            continue
        glue = " " if nxt.kind == "paragraph" else "\n\n"
        out.append(_Raw(nxt.kind, f"{raw.text}{glue}{nxt.text}", raw.first, nxt.last, nxt.headings))
        index += 2
    return out


def _line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each line of ``text``, line breaks excluded."""
    spans, pos = [], 0
    for brk in _LINE_BREAK.finditer(text):
        spans.append((pos, brk.start()))
        pos = brk.end()
    spans.append((pos, len(text)))
    return spans
