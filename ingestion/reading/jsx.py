"""Reading JSX and the JavaScript inside it, as much as MDX cleanup needs: a tag and its attributes, where a
``{expression}``, a string or an ESM block ends, and which props of a component are page text.

Decisions:
- A lexer, not a JavaScript parser: brackets are matched knowing strings, template literals (with ``${}``) and
  comments; bracket kinds are not checked. A JS string that reaches the end of its line stops there (an apostrophe
  in JSX text is not a string).
- JSX attribute strings have no escapes and may span lines; ``{'text'}`` and ``{`text`}`` (without ``${}``) are
  read as their text, any other expression is left as written.
- A component is a tag whose name starts with a capital letter or holds a dot (``<Tabs>``, ``<Foo.Bar>``), or a
  fragment (``<>``); lowercase names are HTML (or prose, when not an HTML element: ``mdx`` decides).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAG_START = re.compile(r"<(/?)([A-Za-z][\w.:-]*)?")
_ATTR_NAME = re.compile(r"[^\s=/>{}\"'<]+")
_UNQUOTED_VALUE = re.compile(r"[^\s>]+")
_JS_STOP = re.compile(r"[{}()\[\]'\"`/]")
_JS_ESCAPES = {"n": "\n", "t": "\t", "r": "", "0": "\0"}

# String props of self-closing components that are page text (see component_prose); others count as
# text only when their value reads like prose, and never when the prop is known to hold a name or a URL.
PROSE_PROPS = frozenset({"title", "description", "label", "alt", "summary", "caption", "subtitle", "heading",
                         "text", "content", "question", "answer", "message", "tooltip", "note"})
NON_PROSE_PROPS = frozenset({"id", "className", "class", "href", "src", "to", "url", "link", "path", "icon",
                             "image", "img", "type", "variant", "color", "size", "width", "height", "style",
                             "target", "rel", "key", "value", "language", "lang", "slug", "name", "theme"})
_PROSE_VALUE = re.compile(r"[^\W\d_]{2,}[ \t]+[^\W\d_]{2,}")  # two words of letters
_URL_LIKE = re.compile(r"^\S*[/#@][^\s]*$|://")


@dataclass
class Tag:
    name: str
    closing: bool
    self_closing: bool
    attrs: dict[str, str]  # string values without quotes; expressions as written, with braces
    end: int  # index just past ``>``


def is_component(name: str) -> bool:
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


def tab_labels(tag: Tag) -> dict[str, str]:
    """``<Tabs values={[{label: 'Apple', value: 'apple'}, …]}>`` → ``{"apple": "Apple", …}``."""
    if tag.name != "Tabs" or not tag.attrs.get("values", "").startswith("{"):
        return {}
    return {m.group("v1") or m.group("v2") or "": m.group("l1") or m.group("l2") or ""
            for m in _TAB_VALUE.finditer(tag.attrs["values"])}


def parse_tag(seg: str, start: int) -> Tag | None:
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
            return Tag(name, closing, True, attrs, pos + 2)
        if seg.startswith(">", pos):
            return Tag(name, closing, False, attrs, pos + 1)
        if closing or pos >= n:
            return None
        if seg[pos] == "{":  # {...spread}
            pos = skip_js(seg, pos)
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
        return skip_js(seg, pos)
    value = _UNQUOTED_VALUE.match(seg, pos)
    return value.end() if value else -1


def skip_js(text: str, start: int) -> int:
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
            end = skip_js(text, pos + 1)
            pos = len(text) if end < 0 else end
        else:
            pos += 1
    return len(text)



def string_literal(expression: str) -> str | None:
    """The value of a lone JS string or template literal (without ``${}``), else None."""
    expression = expression.strip()
    if len(expression) < 2 or expression[0] not in "'\"`" or expression[-1] != expression[0]:
        return None
    skip = _skip_template if expression[0] == "`" else _skip_string
    if skip(expression, 0) != len(expression) or (expression[0] == "`" and "${" in expression):
        return None
    return re.sub(r"\\(.)", lambda m: _JS_ESCAPES.get(m.group(1), m.group(1)), expression[1:-1], flags=re.S)


def esm_end(seg: str, start: int) -> int:
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
    return skip_js("(" + code + "\n)", 0) == len(code) + 3
