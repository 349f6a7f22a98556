"""The static read of a Docusaurus config, for when node can't run it: plain quoted literals only.

``read_literals`` gives the raw shape the node helper sends (``title``, ``url``, ``baseUrl``,
``trailingSlash``, ``i18n``, ``presets``), so ``ingestion.reading.site_config`` checks both reads the same way.

Decisions:
- Comments are blanked first (strings kept), so a commented-out ``// url: '…'`` is not read.
- A key is an object key: after ``{`` or ``,`` (not ``a ? url : b``). It counts at the shallowest brace depth
  it appears at (the config's ``title``, not ``navbar.title``); when an occurrence there is not a plain
  literal (quoted without escapes, ``true``/``false``, or a list of such strings) or two disagree, the key
  is not read ("not_read") and Docusaurus's default applies.
- Docs options come only from ``docs: {…}`` / ``docs: false`` inside the ``presets: […]`` array
  (``themeConfig.docs`` is another thing); ``plugins`` are not read, with a note when a docs plugin is there.
"""

from __future__ import annotations

import bisect
import re

# Comments, and the three kinds of string; an unclosed comment or template runs to the end (linear time).
_TOKENS = re.compile(r"""//[^\n]*|/\*(?:[^*]|\*(?!/))*+(?:\*/|\Z)"""
                     r"""|'(?:[^'\\\n]|\\.)*+'|"(?:[^"\\\n]|\\.)*+"|`(?:[^`\\]|\\.)*+(?:`|\Z)""")
_STRING = r"""'([^'\\\n]*)'|"([^"\\\n]*)\""""
_END = r"[ \t]*(?=[,}\]\n]|$)"
_LITERALS = {
    "string": re.compile(rf"(?:{_STRING}){_END}"),
    "bool": re.compile(rf"(true|false)\b{_END}"),
    "string_or_false": re.compile(rf"(?:{_STRING}|(false)\b){_END}"),
    "strings": re.compile(rf"\[\s*((?:(?:{_STRING})\s*,\s*)*(?:(?:{_STRING})\s*,?\s*)?)\]{_END}"),
}
_ANY_STRING = re.compile(_STRING)
_DOCS_PLUGIN = re.compile(r"""['"](?:[^'"\n]*plugin-)?content-docs['"]""")
_MAX_HITS = 200
_ABSENT, _OTHER = object(), object()
_DOCS_OPTIONS = (("id", "string"), ("path", "string"), ("routeBasePath", "string"),
                 ("sidebarPath", "string_or_false"), ("includeCurrentVersion", "bool"), ("lastVersion", "string"),
                 ("onlyIncludeVersions", "strings"), ("disableVersioning", "bool"), ("versions", None))


def read_literals(text: str) -> tuple[dict, list[str], list[str]]:
    """``(raw, not_read, notes)``: the literal values found; the keys present but not plain literals; notes
    on what a static read can't see."""
    source = _Source(text)
    raw, not_read, notes = {}, [], []

    def take(target: dict, key: str, kind: str | None, label: str, **where) -> None:
        value = source.value(key, kind, **where)
        if value is _OTHER:
            not_read.append(label)
        elif value is not _ABSENT:
            target[key] = value

    for key, kind in (("title", "string"), ("url", "string"), ("baseUrl", "string"), ("trailingSlash", "bool")):
        take(raw, key, kind, key)
    i18n_block = source.block("i18n", "{")
    if i18n_block is _OTHER:
        not_read.append("i18n")
    elif i18n_block is not _ABSENT:
        i18n = {}
        for key, kind in (("defaultLocale", "string"), ("locales", "strings"), ("path", "string")):
            take(i18n, key, kind, f"i18n.{key}", region=i18n_block)
        if i18n:
            raw["i18n"] = {"defaultLocale": "en", **i18n}
    raw["presets"] = [["classic", _preset_options(source, not_read)]]
    if _DOCS_PLUGIN.search(source.code):
        notes.append("a docs plugin is listed in plugins: its docs are not read without running the config")
    return raw, not_read, notes


def _preset_options(source: _Source, not_read: list[str]) -> dict:
    presets = source.block("presets", "[")
    if not isinstance(presets, tuple):
        return {}
    block = source.block("docs", "{", region=presets, direct=False)
    if block is _ABSENT:
        return {}
    if block is _OTHER:
        if source.value("docs", "bool", region=presets, direct=False) is False:
            return {"docs": False}
        not_read.append("docs")
        return {}
    options = {}
    for key, kind in _DOCS_OPTIONS:
        value = source.value(key, kind, region=block)
        if value is _OTHER:
            not_read.append(f"docs.{key}")
        elif value is not _ABSENT:
            options[key] = value
    return {"docs": options}


class _Source:
    """The config's text with comments blanked (``code``) and, in ``masked``, string contents too."""

    def __init__(self, text: str):
        code, masked, last = [], [], 0
        for match in _TOKENS.finditer(text):
            token = match.group()
            code.append(text[last:match.start()])
            masked.append(text[last:match.start()])
            if token.startswith("/"):
                blank = re.sub(r"[^\n]", " ", token)
                code.append(blank)
                masked.append(blank)
            else:
                code.append(token)
                masked.append(token[0] + re.sub(r"[^\n]", "_", token[1:-1]) + token[-1])
            last = match.end()
        code.append(text[last:])
        masked.append(text[last:])
        self.code, self.masked = "".join(code), "".join(masked)
        self._braces = [m.start() for m in re.finditer(r"[{}]", self.masked)]
        depth, self._depths = 0, []
        for position in self._braces:
            depth += 1 if self.masked[position] == "{" else -1
            self._depths.append(depth)

    def depth(self, position: int) -> int:
        """How many braces are open before ``position``."""
        index = bisect.bisect_left(self._braces, position)
        return self._depths[index - 1] if index else 0

    def _keys(self, key: str, region: tuple[int, int] | None, direct: bool) -> list[tuple[int, re.Match]]:
        """``(depth, match)`` of each object key ``key`` (``key:``, ``'key':``, ``"key":``), shallowest kept;
        ``direct``: only the keys of the object ``region`` is the inside of."""
        start, end = region or (0, len(self.code))
        pattern = re.compile(rf"""(?<![\w$.'"])(?:{key}|'{key}'|"{key}")\s*:\s*""")
        hits = []
        for match in pattern.finditer(self.code, start, end):
            before = match.start() - 1
            while before >= 0 and self.code[before].isspace():  # comments are blanks by now
                before -= 1
            if self.masked[match.start()] != self.code[match.start()] or self.code[before:before + 1] not in ("{", ","):
                continue  # inside a string, or not an object key
            hits.append((self.depth(match.start()), match))
            if len(hits) >= _MAX_HITS:
                break
        if region and direct:
            hits = [hit for hit in hits if hit[0] == self.depth(start)]
        top = min((depth for depth, _ in hits), default=None)
        return [hit for hit in hits if hit[0] == top]

    def value(self, key: str, kind: str | None, region: tuple[int, int] | None = None, direct: bool = True):
        """The key's literal value; ``_ABSENT``; or ``_OTHER`` (not a plain literal, or two that disagree)."""
        values = []
        for _, match in self._keys(key, region, direct):
            literal = _LITERALS[kind].match(self.code, match.end()) if kind else None
            if literal is None:
                return _OTHER
            values.append(_literal_value(kind, literal))
        if not values:
            return _ABSENT
        return values[0] if all(value == values[0] for value in values) else _OTHER

    def block(self, key: str, opener: str, region: tuple[int, int] | None = None, direct: bool = True):
        """``(start, end)`` of the ``{…}`` or ``[…]`` given to ``key`` (just inside its brackets); ``_ABSENT``;
        or ``_OTHER`` when the key has another value."""
        hits = self._keys(key, region, direct)
        if not hits:
            return _ABSENT
        position = hits[0][1].end()
        if self.masked[position:position + 1] != opener:
            return _OTHER
        closer, depth = "}" if opener == "{" else "]", 0
        for index in range(position, len(self.masked)):
            char = self.masked[index]
            if char in "{[":
                depth += 1
            elif char in "}]":
                depth -= 1
                if depth == 0:
                    return (position + 1, index) if char == closer else _OTHER
        return _OTHER


def _literal_value(kind: str, match: re.Match):
    if kind == "bool":
        return match.group(1) == "true"
    if kind == "strings":
        return [string.group(1) if string.group(1) is not None else string.group(2)
                for string in _ANY_STRING.finditer(match.group(1))]
    if kind == "string_or_false" and match.group(3):
        return False
    return match.group(1) if match.group(1) is not None else match.group(2)
