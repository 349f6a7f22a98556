"""``pymdownx.snippets``: what a ``--8<--`` line stands for, inlined with the page line each line comes from
(the package's docstring says what was decided)."""

from __future__ import annotations

import hashlib
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from ingestion.reading.documents import Issue
from ingestion.reading.mkdocs.config import MAX_SNIPPET_DEPTH, MkDocsSite, SnippetOptions
from ingestion.reading.partials import InlinedLines

# -- snippets ------------------------------------------------------------------------------------------

# pymdownx.snippets' RE_ALL_SNIPPETS and RE_SNIPPET_SECTION.
_SNIPPET = re.compile(r"""^(?P<space>[ \t]*)(?P<escape>;*)(?P<all>(?P<inline_marker>-+8<-+[ \t]+)"""
                      r"""(?P<snippet>(?:"(?:\\"|[^"\n\r])+?"|'(?:\\'|[^'\n\r])+?'))(?![ \t])|"""
                      r"""(?P<block_marker>-+8<-+)(?![ \t]))\r?$""")
_SECTION = re.compile(r"""(?i)^(?P<pre>.*?)(?<!;)(?P<escape>;*)(?P<inline_marker>-+8<-+[ \t]+)"""
                      r"""(?P<section>\[[ \t]*(?P<type>start|end)[ \t]*:[ \t]*(?P<name>[a-z][-_0-9a-z]*)[ \t]*\])"""
                      r"""(?P<post>.*?)$""")
_TARGET = re.compile(r"(?i)^(?P<path>.*?)(?:(?P<lines>(?::-?[0-9]*){1,2}(?:,-?[0-9]*(?::-?[0-9]*)?)*)"
                     r"|:(?P<section>[a-z][-_0-9a-z]*))?$")


@dataclass
class _Expansion:
    warnings: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)


def snippet_lines(spec: str, site: MkDocsSite, *, chain: tuple[Path, ...] = (),
                  warnings: list[str] | None = None) -> list[str] | None:
    """The lines ``--8<-- "spec"`` stands for (``file``, ``file:2:5``, ``file:name``…), nested snippets
    expanded; None (with a warning in ``warnings``) when it can't be read. ``chain``: the files being expanded."""
    state = _Expansion(warnings if warnings is not None else [])
    return _snippet(spec, site, chain, state)


def expand_snippets(lines: list[str], site: MkDocsSite, *, rel_path: str, auto_append: bool = True,
                    page: Path | None = None) -> InlinedLines:
    """The page's lines with its snippets (and ``auto_append`` files) inlined; each line remembers the page line
    it stands for (appended files: the page's last line), warnings carry the page line."""
    result = InlinedLines([], [])
    if site.snippets is None:
        result.lines, result.origins = list(lines), list(range(len(lines)))
        return result
    page = page or (site.docs_dir / rel_path)
    source = list(lines)
    appended = auto_append and site.snippets.auto_append
    if appended:
        source += "\n\n-8<-\n{}\n-8<-\n".format("\n\n".join(site.snippets.auto_append)).split("\n")
    last = max(len(lines) - 1, 0)
    for text, origin, warnings, digests in _parse(source, site, chain=(page.resolve(),), section=False):
        result.lines.append(text)
        result.origins.append(min(origin, last))
        result.warnings += [Issue(rel_path, min(origin, last) + 1, message) for message in warnings]
        result.digests += digests
    return result


def _parse(lines: list[str], site: MkDocsSite, *, chain: tuple[Path, ...], section: bool):
    """``(text, origin, warnings, digests)`` for each output line (warnings and digests on the first line a
    snippet gives, or on an empty tuple when it gives none)."""
    block = False
    out: list[tuple[str, int, list[str], list[str]]] = []
    for index, line in enumerate(lines):
        inline = False
        match = _SNIPPET.match(line) if "8<" in line else None
        if match:
            if match.group("escape"):
                out.append((line.replace(";", "", 1), index, [], []))
                continue
            if block and match.group("inline_marker"):
                continue
            if match.group("inline_marker"):
                inline = True
            else:
                block = not block
                continue
        elif not block:
            section_match = _SECTION.match(line) if not section and "8<" in line else None
            if section_match and section_match.group("escape"):
                m = section_match
                line = m.group("pre") + m.group("escape").replace(";", "", 1) + m.group("inline_marker") \
                    + m.group("section") + m.group("post")
            elif section_match:
                continue
            out.append((line, index, [], []))
            continue
        space = (match.group("space") if inline else re.match(r"[ \t]*", line).group()).expandtabs(4)
        spec = match.group("snippet")[1:-1].strip() if inline else line.strip()
        if not inline and not spec:
            out.append(("", index, [], []))
            continue
        if spec.startswith(";"):
            continue
        state = _Expansion()
        inner = _snippet(spec, site, chain, state)
        if not inner:
            if state.warnings or state.digests:
                out.append(("", index, state.warnings, state.digests))
            continue
        first = True
        for text in inner:
            out.append((space + text, index, state.warnings if first else [], state.digests if first else []))
            first = False
    return out


def _snippet(spec: str, site: MkDocsSite, chain: tuple[Path, ...], state: _Expansion) -> list[str] | None:
    options = site.snippets or SnippetOptions([site.config_file.parent])
    target = _TARGET.match(spec)
    path = target.group("path").strip() if target else ""
    if not path:
        state.warnings.append(f"snippet {spec!r}: no path")
        return None
    if path.lower().startswith(("http://", "https://")):
        state.warnings.append(f"snippet {spec!r} is a URL; it is not downloaded")
        return None
    found = _find_snippet(path, options, site.root)
    if isinstance(found, str):
        state.warnings.append(f"snippet {spec!r} not inlined: {found}")
        return None
    if found in chain:
        state.warnings.append(f"snippet {spec!r} not inlined: it includes itself")
        return None
    if len(chain) > MAX_SNIPPET_DEPTH:
        state.warnings.append(f"snippet {spec!r} not inlined: snippets nested more than {MAX_SNIPPET_DEPTH} deep")
        return None
    try:
        data = found.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        state.warnings.append(f"snippet {spec!r} not inlined: cannot read it ({exc})")
        return None
    state.digests.append(hashlib.sha256(data).hexdigest())
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n") if text else []
    lines = _select(lines, target, options, spec, state)
    if lines is None:
        return None
    nested = _parse(lines, site, chain=(*chain, found), section=target.group("section") is not None)
    for _, _, warnings, digests in nested:
        state.warnings += warnings
        state.digests += digests
    return [text for text, *_ in nested]


def _find_snippet(path: str, options: SnippetOptions, root: Path) -> Path | str:
    """The snippet's file (the first base path that has it), or why there is none."""
    outside = False
    for base in options.base_path:
        if not base.exists():
            continue
        if base.is_dir():
            candidate = (base / path).resolve()
            if options.restrict_base_path and not candidate.is_relative_to(base):
                continue
        else:  # a base path may name a single file
            candidate = (base.parent / path).resolve()
            if candidate != base.resolve():
                continue
        if not candidate.is_relative_to(root):
            outside = True
            continue
        if candidate.is_file():
            return candidate
    return "the file is outside the project" if outside else "file not found"


def _select(lines: list[str], target: re.Match, options: SnippetOptions, spec: str,
            state: _Expansion) -> list[str] | None:
    """The line ranges (``:2:5``, ``:-3``, ``:2:5,8:9``; 1-based, inclusive) or the section a spec names."""
    if not lines:
        return lines
    if target.group("lines"):
        total = len(lines)
        picked: list[str] = []
        for part in target.group("lines")[1:].split(","):
            bits = part.split(":")
            start = int(bits[0]) if bits[0].lstrip("-").isdigit() else None
            start = start if start is None or start < 0 else max(0, start - 1)
            end = int(bits[1]) if len(bits) > 1 and bits[1].lstrip("-").isdigit() else None
            if start is not None and start < 0:
                start = min(max(total + start, 0), total)
            if end is not None and end < 0:
                end = min(max(total + 1 + end, 0), total)
            picked.extend(lines[start:end])
        return textwrap.dedent("\n".join(picked)).split("\n") if options.dedent_subsections else picked
    name = target.group("section")
    if not name:
        return lines
    picked, inside, found = [], False, False
    for line in lines:
        match = _SECTION.match(line) if "8<" in line else None
        if match and match.group("escape"):
            line = match.group("pre") + match.group("escape").replace(";", "", 1) + match.group("inline_marker") \
                + match.group("section") + match.group("post")
        elif match and match.group("name") == name:
            if match.group("type").lower() == "start":
                inside = found = True
                continue
            break
        elif match:
            continue
        if inside:
            picked.append(line)
    if not found:
        state.warnings.append(f"snippet {spec!r}: no section {name!r} in the file")
        return None
    return textwrap.dedent("\n".join(picked)).split("\n") if options.dedent_subsections else picked
