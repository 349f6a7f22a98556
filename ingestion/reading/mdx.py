"""MDX/JSX cleanup that keeps line numbers: turns a Docusaurus MDX page body into plain Markdown.

``clean_mdx`` rewrites lines in place and never adds or removes a line, so every line of the result
is the same line of the source (the parser computes offsets from line numbers). Code fences are
left untouched; ``mdx-code-block`` fences are unwrapped (Docusaurus renders their content as MDX).

Decisions:
- ESM ``import``/``export`` blocks at the top level and ``{/* */}``/``<!-- -->`` comments become blank.
- JSX and HTML tags are removed and their children kept. A ``TabItem`` becomes ``**Label:** `` in front of
  its content, ``<Admonition type="tip" title="T">`` becomes ``**Tip (T):** `` (bold: a label, not words).
  ``<CodeBlock>{`…`}</CodeBlock>`` becomes a fenced code block. ``<head>``/``<script>``/``<style>``/``<svg>``
  are dropped with content.
- Lowercase tags that are not HTML elements (``<robot>`` in prose) are text, not JSX.
- Self-closing components keep their prose props as a line ``Name: title — description`` (string props
  named ``title``, ``description``, ``label``, ``alt``, ``summary``… or whose value has two words of
  letters and is not a URL; never ``{expressions}``, booleans, ids, classNames or hrefs). Components
  without such props are dropped, with one warning per unknown name per file.
- Unbalanced component tags raise ParseError in ``.mdx`` files; in ``.md`` files (which may be read
  as CommonMark) they only warn. Unbalanced lowercase HTML is tolerated.
- ``{'text'}`` / ``{`text`}`` expressions become their text; other ``{expressions}`` stay literal.
- Admonitions ``:::type[Title]`` become a label line (``**Tip (Title):**``) and their content is kept.
- Other generators' syntax (Liquid/Jinja tags, mdBook includes, MkDocs ``!!!`` admonitions) is rewritten
  first, by ``ingestion.reading.generators``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

from bookchat.base.errors import ParseError
from ingestion.reading.documents import Issue, Label, admonition_label, fence_for
from ingestion.reading.generators import clean_generator_syntax, highlight_fences
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

_COMMENT_HEADING_ID = re.compile(r"\s*#([^\s{}*]+)\s*$")
_ATX_HEADING_START = re.compile(r" {0,3}#{1,6}\s")
_HTML_TAG_NAMES = """
    a abbr address area article aside audio b bdi bdo blockquote body br button canvas caption
    center cite code col colgroup data dd del details dfn dialog div dl dt em embed fieldset
    figcaption figure font footer form h1 h2 h3 h4 h5 h6 head header hr html i iframe img input ins
    kbd label legend li link main mark meta nav noscript object ol optgroup option p param picture
    pre q s samp script section select small source span strike strong style sub summary sup svg
    table tbody td template textarea tfoot th thead time title tr track u ul var video wbr
"""
HTML_TAGS = frozenset(_HTML_TAG_NAMES.split())
VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
                       "source", "track", "wbr"})
DROP_WITH_CONTENT = frozenset({"head", "script", "style", "svg"})
# Self-closing components that carry no page text worth a warning.
HARMLESS_COMPONENTS = frozenset({"TOCInline", "DocCardList"})
_FENCE_FINDER = MarkdownIt("commonmark").disable(["code", "html_block", "inline"])
_INTERESTING = re.compile(r"\\.|`+|<!--|<|\{|^(?=(?:import|export)[\s{*])", re.M | re.S)
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+)>")
_IMPORT = re.compile(r"import\s*(?:[\"'{*]|[\w$]+\s*,\s*[{*]|[\w$]+[ \t]+from\s*[\"'])")
_EXPORT = re.compile(r"export\s+(?:const|let|var|function|class|default|async|\{|\*)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_WHITESPACE = re.compile(r"\s*")
_STRING_EXPRESSION = re.compile(  # {'text'}, {"text"}, {`text`} (without ${})
    r"""\{\s*('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\$]|\\.|\$(?!\{))*`)\s*\}""", re.S)
_CODEBLOCK_CLOSE = re.compile(r"\s*</CodeBlock\s*>")
_ADMONITION_OPEN = re.compile(r"^(\s*):{3,}([A-Za-z][\w-]*)(?:\[(.*)\]|[ \t]+(.*?))?\s*(?:\{[^{}]*\})?\s*$")
_ADMONITION_CLOSE = re.compile(r"^\s*:{3,}\s*$")


@dataclass
class CleanResult:
    lines: list[str]  # the cleaned body, same length as the input
    code_lines: set[int]  # 0-based lines that belong to real code fences
    labels: dict[int, Label] = field(default_factory=dict)  # 0-based line -> label written there
    removed: set[int] = field(default_factory=set)  # lines that had content and are now blank
    warnings: list[Issue] = field(default_factory=list)


@dataclass
class _Open:
    """An element whose closing tag is still to come."""

    name: str
    line: int  # 0-based line of the opening tag
    label_line: int | None = None  # where its label (tab, Admonition) was written
    tab_labels: dict[str, str] = field(default_factory=dict)  # <Tabs values={[…]}>: value -> label


def clean_mdx(lines: list[str], *, rel_path: str) -> CleanResult:
    """Clean the page body given as lines (front matter already blanked)."""
    original = lines
    lines = list(lines)
    highlight_fences(lines, rel_path=rel_path)
    code_lines = _unwrap_mdx_code_blocks(lines)
    block_labels: dict[int, Label] = {}
    generator_warnings = clean_generator_syntax(lines, code_lines, rel_path=rel_path, labels=block_labels)
    scanner = _Scanner(rel_path, strict=rel_path.lower().endswith(".mdx"))
    index = 0
    while index < len(lines):
        if index in code_lines:
            index += 1
            continue
        end = index
        while end < len(lines) and end not in code_lines:
            end += 1
        cleaned = scanner.clean("\n".join(lines[index:end]), index).split("\n")
        lines[index:end] = cleaned
        index = end
    scanner.finish()
    result = CleanResult(lines, code_lines, scanner.labels | block_labels,
                         warnings=generator_warnings + scanner.warnings)
    _rewrite_admonitions(result, rel_path)
    result.removed = {i for i, line in enumerate(lines) if not line.strip() and original[i].strip()}
    return result


def find_code_lines(lines: list[str]) -> tuple[set[int], list[tuple[int, int]]]:
    """Lines inside fenced code blocks, and the ``(start, end)`` ranges of ``mdx-code-block`` fences."""
    code: set[int] = set()
    unwrap: list[tuple[int, int]] = []
    for token in _FENCE_FINDER.parse("\n".join(lines)):
        if token.type == "fence" and token.map:
            if token.info.strip() == "mdx-code-block":
                unwrap.append((token.map[0], token.map[1]))
            else:
                code.update(range(*token.map))
    return code, unwrap


def _unwrap_mdx_code_blocks(lines: list[str]) -> set[int]:
    # Blank the fence lines of ```mdx-code-block and look again: its content may hold real fences.
    for _ in range(10):
        code, unwrap = find_code_lines(lines)
        if not unwrap:
            return code
        for start, end in unwrap:
            lines[start] = ""
            last = end - 1
            if last > start and lines[last].strip().strip("`~") == "":
                lines[last] = ""
    return find_code_lines(lines)[0]


class _Scanner:
    """Removes MDX syntax from runs of non-code lines; keeps a stack of open tags across runs."""

    def __init__(self, rel_path: str, *, strict: bool):
        self.rel_path = rel_path
        self.strict = strict
        self.stack: list[_Open] = []
        self.labels: dict[int, Label] = {}
        self.warnings: list[Issue] = []
        self._warned: set[str] = set()
        self._seg = ""
        self._first_line = 0
        self._line_cache = (0, 0)  # (position, its line) of the last _line() call

    # -- bookkeeping -------------------------------------------------------------------------
    def _line(self, pos: int) -> int:
        """0-based line of ``pos`` in the current run (counted on from the last call: calls move forward)."""
        last_pos, last_line = self._line_cache
        if pos < last_pos:
            last_pos, last_line = 0, self._first_line
        line = last_line + self._seg.count("\n", last_pos, pos)
        self._line_cache = (pos, line)
        return line

    def _warn(self, line: int | None, message: str) -> None:
        self.warnings.append(Issue(self.rel_path, line, message))

    def _unbalanced(self, line: int, message: str) -> None:
        if self.strict:
            raise ParseError(message, file=self.rel_path, line=line)
        self._warn(line, message)

    def finish(self) -> None:
        for element in reversed(self.stack):
            if is_component(element.name):
                self._unbalanced(element.line + 1, f"JSX tag <{element.name}> is never closed")

    # -- main loop ---------------------------------------------------------------------------
    def clean(self, seg: str, first_line: int) -> str:
        self._seg, self._first_line, self._line_cache = seg, first_line, (0, first_line)
        out: list[str] = []
        pos = 0
        while True:
            match = _INTERESTING.search(seg, pos)
            if not match:
                out.append(seg[pos:])
                return "".join(out)
            out.append(seg[pos : match.start()])
            start, token = match.start(), match.group()
            if token.startswith("\\"):
                out.append(token)
                pos = match.end()
            elif token.startswith("`"):
                pos = self._code_span(seg, start, len(token), out)
            elif token == "<!--":
                end = seg.find("-->", start + 4)
                pos = start + 4 if end < 0 else end + 3
                out.append(token if end < 0 else _newlines(seg[start:pos]))
            elif token == "<":
                pos = self._tag(seg, start, out)
            elif token == "{":
                pos = self._expression(seg, start, out)
            else:
                pos = self._esm(seg, start, out)

    def _code_span(self, seg: str, start: int, run: int, out: list[str]) -> int:
        # Inline code is literal: find a closing run of the same length within the paragraph.
        search = start + run
        while True:
            close = seg.find("`" * run, search)
            if close < 0:
                break
            close_end = close
            while close_end < len(seg) and seg[close_end] == "`":
                close_end += 1
            if _BLANK_LINE.search(seg, start, close):
                break
            if close_end - close == run:
                out.append(seg[start:close_end])
                return close_end
            search = close_end
        out.append("`" * run)
        return start + run

    def _expression(self, seg: str, start: int, out: list[str]) -> int:
        if seg.startswith("{/*", start):
            end = seg.find("*/}", start + 3)
            if end >= 0:
                heading_id = _COMMENT_HEADING_ID.match(seg[start + 3 : end])
                line = seg[seg.rfind("\n", 0, start) + 1 : start]
                if heading_id and _ATX_HEADING_START.match(line) and not seg[end + 3 :].split("\n", 1)[0].strip():
                    out.append(f"{{#{heading_id.group(1)}}}")  # `## Title {/* #id */}`: Docusaurus's v4 heading id
                else:
                    out.append(_newlines(seg[start : end + 3]))
                return end + 3
        # Only {'text'} / {`text`} have a value we can know; other expressions stay as written.
        expression = _STRING_EXPRESSION.match(seg, start)
        literal = string_literal(expression.group(1)) if expression else None
        if literal is None:
            out.append("{")
            return start + 1
        out.append(literal.replace("\n", " ") + _newlines(expression.group()))
        return expression.end()

    def _esm(self, seg: str, start: int, out: list[str]) -> int:
        at_block_start = _previous_line_blank(out)
        # MDX reads ESM at column 0 of any flow position (also inside JSX children), never mid-paragraph.
        if not at_block_start or not (_IMPORT.match(seg, start) or _EXPORT.match(seg, start)):
            out.append(seg[start : start + 6])  # just the word "import"/"export" in prose
            return start + 6
        end = esm_end(seg, start)
        out.append(_newlines(seg[start:end]))
        return end

    # -- tags ----------------------------------------------------------------------------------
    def _tag(self, seg: str, start: int, out: list[str]) -> int:
        autolink = _AUTOLINK.match(seg, start)
        if autolink:
            out.append(autolink.group())
            return autolink.end()
        tag = parse_tag(seg, start)
        if tag is None or not (is_component(tag.name) or tag.name.lower() in HTML_TAGS):
            out.append("<")
            return start + 1
        line = self._line(start)
        newlines = _newlines(seg[start : tag.end])
        if tag.closing:
            self._close(tag.name, line)
            out.append(newlines)
            return tag.end
        if tag.self_closing and is_component(tag.name) and (prose := component_prose(tag.name, tag.attrs)):
            out.append(prose + newlines)
            return tag.end
        if tag.self_closing or tag.name.lower() in VOID_TAGS:
            if is_component(tag.name) and tag.name not in HARMLESS_COMPONENTS | self._warned:
                self._warned.add(tag.name)  # once per name per file
                self._warn(line + 1, f"dropped JSX component <{tag.name} />")
            out.append(newlines + (" " if tag.name.lower() == "br" else ""))
            return tag.end
        if tag.name.lower() in DROP_WITH_CONTENT:
            return self._drop_element(seg, start, tag, line, out)
        if tag.name == "CodeBlock":
            end = self._code_block(seg, start, tag, line, out)
            if end is not None:
                return end
        label = self._label_for(tag)
        element = _Open(tag.name, line, self._line(tag.end) if label else None, tab_labels(tag))
        self.stack.append(element)
        if label:
            self.labels[element.label_line] = Label(label, -1)
        out.append(newlines + (f"{label} " if label else ""))
        return tag.end

    def _label_for(self, tag: Tag) -> str:
        if tag.name == "TabItem":
            value = tag.attrs.get("value", "")
            parent_labels = self.stack[-1].tab_labels if self.stack else {}
            # Docusaurus: labels given by <Tabs values={…}> win over the TabItem's own.
            text = parent_labels.get(value) or tag.attrs.get("label") or value
            text = text.strip().replace("*", "")
            return f"**{text}:**" if text and not text.startswith("{") else ""  # bold: see documents.admonition_label
        if tag.name == "Admonition":
            title = tag.attrs.get("title")
            title = None if title and title.startswith("{") else title
            return admonition_label(tag.attrs.get("type", "note"), title)
        return ""

    def _close(self, name: str, line: int) -> None:
        if name not in [element.name for element in self.stack]:
            if is_component(name):
                self._unbalanced(line + 1, f"closing tag </{name}> has no matching opening tag")
            return
        while self.stack:
            element = self.stack.pop()
            if element.label_line is not None:
                self.labels[element.label_line].end_line = line
            if element.name == name:
                return
            if is_component(element.name):
                message = f"JSX tag <{element.name}> is never closed (</{name}> comes first)"
                self._unbalanced(element.line + 1, message)

    def _drop_element(self, seg: str, start: int, tag: Tag, line: int, out: list[str]) -> int:
        close = re.compile(rf"</{re.escape(tag.name)}\s*>").search(seg, tag.end)
        if close is None:
            self._unbalanced(line + 1, f"tag <{tag.name}> is never closed")
            out.append(_newlines(seg[start : tag.end]))
            return tag.end
        out.append(_newlines(seg[start : close.end()]))
        return close.end()

    def _code_block(self, seg: str, start: int, tag: Tag, line: int, out: list[str]) -> int | None:
        """``<CodeBlock language="py">{`code`}</CodeBlock>`` → a fenced block in the same lines."""
        body_start = _WHITESPACE.match(seg, tag.end).end()
        body_end = skip_js(seg, body_start) if seg.startswith("{", body_start) else -1
        closing = _CODEBLOCK_CLOSE.match(seg, body_end) if body_end > 0 else None
        if closing is None:
            return None
        code = string_literal(seg[body_start + 1 : body_end - 1])
        if code is None:  # e.g. {MyComponentSource} from a raw-loader import: unknowable here
            self._warn(line + 1, "dropped <CodeBlock> whose content is computed at build time")
            out.append(_newlines(seg[start : closing.end()]))
            return closing.end()
        region = seg[start : closing.end()]
        line_start = seg.rfind("\n", 0, start) + 1
        line_end = seg.find("\n", closing.end())
        line_end = len(seg) if line_end < 0 else line_end
        room = region.count("\n") + 1
        code_lines = code.strip("\n").split("\n")
        info = tag.attrs.get("language") or tag.attrs.get("className", "").removeprefix("language-")
        if tag.attrs.get("title", "{").strip()[:1] not in ("{", ""):
            info += f' title="{tag.attrs["title"]}"'
        alone = not seg[line_start:start].strip() and not seg[closing.end() : line_end].strip()
        if not alone or len(code_lines) + 2 > room:
            out.append(f"`{' '.join(text.strip() for text in code_lines)}`" + _newlines(region))
        else:
            _drop_trailing_indent(out)  # an indented fence would eat the code's own indentation
            fence = fence_for(code)
            padding = "\n" * (room - len(code_lines) - 2)
            out.append(f"{fence}{info}\n{padding}" + "\n".join(code_lines) + f"\n{fence}")
        return closing.end()


def _previous_line_blank(out: list[str]) -> bool:
    """Whether the output so far (which ends at a line start) ends with a blank line, or is empty."""
    tail = ""
    for piece in reversed(out):
        tail = piece + tail
        if tail.count("\n") >= 2:
            break
    lines = tail.rsplit("\n", 2)
    return len(lines) < 2 or not lines[-2].strip()


def _drop_trailing_indent(out: list[str]) -> None:
    while out and out[-1].endswith((" ", "\t")):
        out[-1] = out[-1].rstrip(" \t")
        if out[-1]:
            return
        out.pop()


def _newlines(text: str) -> str:
    return "\n" * text.count("\n")


def _rewrite_admonitions(result: CleanResult, rel_path: str) -> None:
    """``:::tip[Title]`` → ``Tip (Title):``; closing ``:::`` → blank. Unclosed → warning."""
    open_lines: list[int] = []  # a closing ::: closes the innermost open admonition
    lines = result.lines
    for index, line in enumerate(lines):
        if index in result.code_lines or ":::" not in line:
            continue
        opening = _ADMONITION_OPEN.match(line)
        if opening:
            indent, kind, bracket, legacy = opening.groups()
            label = admonition_label(kind, bracket if bracket is not None else legacy)
            lines[index] = indent + label
            result.labels[index] = Label(label, len(lines))
            open_lines.append(index)
            continue
        if _ADMONITION_CLOSE.match(line):
            lines[index] = ""
            if open_lines:
                result.labels[open_lines.pop()].end_line = index
            else:
                result.warnings.append(Issue(rel_path, index + 1, "stray ::: closing marker"))
    for open_line in open_lines:
        label = result.labels[open_line].text.strip("*")
        result.warnings.append(Issue(rel_path, open_line + 1, f"admonition '{label}' is never closed (:::)"))
