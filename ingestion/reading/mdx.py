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

from bookchat.errors import ParseError
from ingestion.reading.documents import Issue, admonition_label, fence_for
from ingestion.reading.generators import clean_generator_syntax, highlight_fences

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
# String props of self-closing components that are page text (see component_prose); others count as
# text only when their value reads like prose, and never when the prop is known to hold a name or a URL.
PROSE_PROPS = frozenset({"title", "description", "label", "alt", "summary", "caption", "subtitle", "heading",
                         "text", "content", "question", "answer", "message", "tooltip", "note"})
NON_PROSE_PROPS = frozenset({"id", "className", "class", "href", "src", "to", "url", "link", "path", "icon",
                             "image", "img", "type", "variant", "color", "size", "width", "height", "style",
                             "target", "rel", "key", "value", "language", "lang", "slug", "name", "theme"})
_PROSE_VALUE = re.compile(r"[^\W\d_]{2,}[ \t]+[^\W\d_]{2,}")  # two words of letters
_URL_LIKE = re.compile(r"^\S*[/#@][^\s]*$|://")
_FENCE_FINDER = MarkdownIt("commonmark").disable(["code", "html_block", "inline"])
_INTERESTING = re.compile(r"\\.|`+|<!--|<|\{|^(?=(?:import|export)[\s{*])", re.M | re.S)
_TAG_START = re.compile(r"<(/?)([A-Za-z][\w.:-]*)?")
_ATTR_NAME = re.compile(r"[^\s=/>{}\"'<]+")
_UNQUOTED_VALUE = re.compile(r"[^\s>]+")
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+)>")
_IMPORT = re.compile(r"import\s*(?:[\"'{*]|[\w$]+\s*,\s*[{*]|[\w$]+[ \t]+from\s*[\"'])")
_EXPORT = re.compile(r"export\s+(?:const|let|var|function|class|default|async|\{|\*)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_WHITESPACE = re.compile(r"\s*")
_STRING_EXPRESSION = re.compile(  # {'text'}, {"text"}, {`text`} (without ${})
    r"""\{\s*('(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\$]|\\.|\$(?!\{))*`)\s*\}""", re.S)
_CODEBLOCK_CLOSE = re.compile(r"\s*</CodeBlock\s*>")
_JS_STOP = re.compile(r"[{}()\[\]'\"`/]")
_ADMONITION_OPEN = re.compile(r"^(\s*):{3,}([A-Za-z][\w-]*)(?:\[(.*)\]|[ \t]+(.*?))?\s*(?:\{[^{}]*\})?\s*$")
_ADMONITION_CLOSE = re.compile(r"^\s*:{3,}\s*$")


@dataclass
class Label:
    """A label line we wrote (``Note:``/``npm:``), valid for content up to ``end_line`` (0-based)."""

    text: str
    end_line: int


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


@dataclass
class _Tag:
    name: str
    closing: bool
    self_closing: bool
    attrs: dict[str, str]  # string values without quotes; expressions as written, with braces
    end: int  # index just past ``>``


def clean_mdx(lines: list[str], *, rel_path: str) -> CleanResult:
    """Clean the page body given as lines (front matter already blanked)."""
    original = lines
    lines = list(lines)
    highlight_fences(lines, rel_path=rel_path)
    code_lines = _unwrap_mdx_code_blocks(lines)
    generator_warnings = clean_generator_syntax(lines, code_lines, rel_path=rel_path)
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
    result = CleanResult(lines, code_lines, scanner.labels, warnings=generator_warnings + scanner.warnings)
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
            if _is_component(element.name):
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
        literal = _string_literal(expression.group(1)) if expression else None
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
        end = _esm_end(seg, start)
        out.append(_newlines(seg[start:end]))
        return end

    # -- tags ----------------------------------------------------------------------------------
    def _tag(self, seg: str, start: int, out: list[str]) -> int:
        autolink = _AUTOLINK.match(seg, start)
        if autolink:
            out.append(autolink.group())
            return autolink.end()
        tag = _parse_tag(seg, start)
        if tag is None or not (_is_component(tag.name) or tag.name.lower() in HTML_TAGS):
            out.append("<")
            return start + 1
        line = self._line(start)
        newlines = _newlines(seg[start : tag.end])
        if tag.closing:
            self._close(tag.name, line)
            out.append(newlines)
            return tag.end
        if tag.self_closing and _is_component(tag.name) and (prose := component_prose(tag.name, tag.attrs)):
            out.append(prose + newlines)
            return tag.end
        if tag.self_closing or tag.name.lower() in VOID_TAGS:
            if _is_component(tag.name) and tag.name not in HARMLESS_COMPONENTS | self._warned:
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
        element = _Open(tag.name, line, self._line(tag.end) if label else None, _tab_labels(tag))
        self.stack.append(element)
        if label:
            self.labels[element.label_line] = Label(label, -1)
        out.append(newlines + (f"{label} " if label else ""))
        return tag.end

    def _label_for(self, tag: _Tag) -> str:
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
            if _is_component(name):
                self._unbalanced(line + 1, f"closing tag </{name}> has no matching opening tag")
            return
        while self.stack:
            element = self.stack.pop()
            if element.label_line is not None:
                self.labels[element.label_line].end_line = line
            if element.name == name:
                return
            if _is_component(element.name):
                message = f"JSX tag <{element.name}> is never closed (</{name}> comes first)"
                self._unbalanced(element.line + 1, message)

    def _drop_element(self, seg: str, start: int, tag: _Tag, line: int, out: list[str]) -> int:
        close = re.compile(rf"</{re.escape(tag.name)}\s*>").search(seg, tag.end)
        if close is None:
            self._unbalanced(line + 1, f"tag <{tag.name}> is never closed")
            out.append(_newlines(seg[start : tag.end]))
            return tag.end
        out.append(_newlines(seg[start : close.end()]))
        return close.end()

    def _code_block(self, seg: str, start: int, tag: _Tag, line: int, out: list[str]) -> int | None:
        """``<CodeBlock language="py">{`code`}</CodeBlock>`` → a fenced block in the same lines."""
        body_start = _WHITESPACE.match(seg, tag.end).end()
        body_end = _skip_js(seg, body_start) if seg.startswith("{", body_start) else -1
        closing = _CODEBLOCK_CLOSE.match(seg, body_end) if body_end > 0 else None
        if closing is None:
            return None
        code = _string_literal(seg[body_start + 1 : body_end - 1])
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


def _is_component(name: str) -> bool:
    return name == "" or name[0].isupper() or "." in name


_TAB_VALUE = re.compile(r"""\{\s*(?:label:\s*(['"])(?P<l1>.*?)\1\s*,\s*value:\s*(['"])(?P<v1>.*?)\3"""
                        r"""|value:\s*(['"])(?P<v2>.*?)\5\s*,\s*label:\s*(['"])(?P<l2>.*?)\7)""")


def component_prose(name: str, attrs: dict[str, str]) -> str:
    """``<Step title="Install" description="Use apt" />`` → ``"Step: Install — Use apt"`` ("" without prose)."""
    texts = []
    for prop, value in attrs.items():
        value = " ".join(value.split())
        if not value or value.startswith("{") or prop in NON_PROSE_PROPS or value in ("true", "false"):
            continue
        if prop in PROSE_PROPS or (_PROSE_VALUE.search(value) and not _URL_LIKE.search(value)):
            texts.append(value)
    return f"{name}: {' — '.join(texts)}" if texts else ""


def _tab_labels(tag: _Tag) -> dict[str, str]:
    """``<Tabs values={[{label: 'Apple', value: 'apple'}, …]}>`` → ``{"apple": "Apple", …}``."""
    if tag.name != "Tabs" or not tag.attrs.get("values", "").startswith("{"):
        return {}
    return {m.group("v1") or m.group("v2") or "": m.group("l1") or m.group("l2") or ""
            for m in _TAB_VALUE.finditer(tag.attrs["values"])}


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


def _parse_tag(seg: str, start: int) -> _Tag | None:
    """Parse a JSX/HTML tag at ``seg[start] == "<"``; None when it is not a well-formed tag."""
    head = _TAG_START.match(seg, start)
    closing, name = head.group(1) == "/", head.group(2) or ""
    if not name and seg[head.end() : head.end() + 1] != ">":
        return None  # `<` followed by a space, digit, `=`…: prose
    pos, attrs, n = head.end(), {}, len(seg)
    while pos < n:
        while pos < n and seg[pos].isspace():
            pos += 1
        if seg.startswith("/>", pos):
            return _Tag(name, closing, True, attrs, pos + 2)
        if seg.startswith(">", pos):
            return _Tag(name, closing, False, attrs, pos + 1)
        if closing or pos >= n:
            return None
        if seg[pos] == "{":  # {...spread}
            pos = _skip_js(seg, pos)
            if pos < 0:
                return None
            continue
        attr = _ATTR_NAME.match(seg, pos)
        if not attr:
            return None
        pos = attr.end()
        while pos < n and seg[pos] in " \t":
            pos += 1
        if not seg.startswith("=", pos):
            attrs[attr.group()] = ""
            continue
        pos += 1
        while pos < n and seg[pos].isspace():
            pos += 1
        value_end = _attribute_value_end(seg, pos)
        if value_end < 0:
            return None
        quoted = seg[pos : pos + 1] in ("'", '"')
        attrs[attr.group()] = seg[pos + 1 : value_end - 1] if quoted else seg[pos:value_end]
        pos = value_end
    return None


def _attribute_value_end(seg: str, pos: int) -> int:
    if pos >= len(seg):
        return -1
    if seg[pos] in "'\"":  # JSX attribute strings have no escapes and may span lines
        end = seg.find(seg[pos], pos + 1)
        return end + 1 if end >= 0 else -1
    if seg[pos] == "{":
        return _skip_js(seg, pos)
    value = _UNQUOTED_VALUE.match(seg, pos)
    return value.end() if value else -1


def _skip_js(text: str, start: int) -> int:
    """``text[start]`` opens a bracket; return the index just past its match (-1 if none).

    Knows JS strings, template literals (with ``${}``) and comments; bracket kinds are not checked."""
    depth, pos, n = 0, start, len(text)
    while pos < n:
        char = text[pos]
        if char in "([{":
            depth += 1
            pos += 1
        elif char in ")]}":
            depth -= 1
            pos += 1
            if depth <= 0:
                return pos
        elif char in "'\"":
            pos = _skip_string(text, pos)
        elif char == "`":
            pos = _skip_template(text, pos)
        elif text.startswith("//", pos):
            newline = text.find("\n", pos)
            pos = n if newline < 0 else newline
        elif text.startswith("/*", pos):
            end = text.find("*/", pos + 2)
            pos = n if end < 0 else end + 2
        else:
            found = _JS_STOP.search(text, pos + 1)
            pos = found.start() if found else n
    return -1


def _skip_string(text: str, pos: int) -> int:
    quote, pos = text[pos], pos + 1
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            pos += 2
        elif char == quote:
            return pos + 1
        elif char == "\n":  # JS strings cannot span lines: recover (e.g. an apostrophe in JSX text)
            return pos
        else:
            pos += 1
    return pos


def _skip_template(text: str, pos: int) -> int:
    pos += 1
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            pos += 2
        elif char == "`":
            return pos + 1
        elif text.startswith("${", pos):
            end = _skip_js(text, pos + 1)
            pos = len(text) if end < 0 else end
        else:
            pos += 1
    return len(text)


_JS_ESCAPES = {"n": "\n", "t": "\t", "r": "", "0": "\0"}


def _string_literal(expression: str) -> str | None:
    """The value of a lone JS string or template literal (without ``${}``), else None."""
    expression = expression.strip()
    if len(expression) < 2 or expression[0] not in "'\"`" or expression[-1] != expression[0]:
        return None
    skip = _skip_template if expression[0] == "`" else _skip_string
    if skip(expression, 0) != len(expression) or (expression[0] == "`" and "${" in expression):
        return None
    return re.sub(r"\\(.)", lambda m: _JS_ESCAPES.get(m.group(1), m.group(1)), expression[1:-1], flags=re.S)


def _esm_end(seg: str, start: int) -> int:
    """End of the ESM block at ``start``: the first blank line where the JS is complete."""
    first_blank = None
    pos = start
    while True:
        newline = seg.find("\n", pos)
        line_end = len(seg) if newline < 0 else newline
        next_end = seg.find("\n", line_end + 1) if newline >= 0 else -1
        next_line = "" if newline < 0 else seg[line_end + 1 : len(seg) if next_end < 0 else next_end]
        if newline < 0 or not next_line.strip():
            if _js_complete(seg[start:line_end]):
                return line_end
            first_blank = line_end if first_blank is None else first_blank
        if newline < 0:
            return first_blank
        pos = line_end + 1


def _js_complete(code: str) -> bool:
    return _skip_js("(" + code + "\n)", 0) == len(code) + 3


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
