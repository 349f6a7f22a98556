"""What the renderer shows of a page: hidden code lines, ``{{#title}}``, ``{{#playground}}``."""

from __future__ import annotations

import re

_RUST_HIDDEN = re.compile(r"^(\s*)#(.?)(.*)$", re.S)

# mdBook's link preprocessor: an escaped ``\{{#…}}`` (left alone) or ``{{#type argument}}``.
_DIRECTIVE = re.compile(r"\\\{\{#.*\}\}|\{\{\s*#([a-zA-Z0-9_]+)\s+([^}]+)\}\}")


def hide_rust_lines(code: str, *, blank: bool = False) -> str:
    """A Rust code block as mdBook shows it: lines whose first non-blank character is ``#`` followed by a space
    or nothing are hidden (dropped, or emptied with ``blank``); ``##`` shows as ``#``; ``#[attr]``, ``#!`` stay."""
    out = []
    for line in code.split("\n"):
        match = _RUST_HIDDEN.match(line.removesuffix("\r"))
        if match and match.group(2) == "#":
            out.append(match.group(1) + "#" + match.group(3))
        elif match and match.group(2) in ("", " "):
            if blank:
                out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def hide_prefixed_lines(code: str, prefix: str, *, blank: bool = False) -> str:
    """A code block with a ``hidelines`` prefix as mdBook shows it: lines that start with ``prefix`` after their
    indentation are hidden (dropped, or emptied with ``blank``)."""
    if not prefix:
        return code
    out = []
    for line in code.split("\n"):
        if line.lstrip().startswith(prefix):
            if blank:
                out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def code_language(info: str) -> str:
    """A fenced block's language as mdBook reads its info string: the first word (split on spaces, tabs, ``,``)."""
    words = [word for word in re.split(r"[ \t,]", info) if word]
    return words[0] if words else ""


def visible_code(code: str, info: str, hidelines: dict[str, str] | None = None, *, blank: bool = False) -> str:
    """A fenced code block's content without its hidden lines: the Rust rule for ``rust``; for other languages
    a ``hidelines=<prefix>`` word of the info string, else the language's prefix in ``hidelines`` (book.toml)."""
    words = [word for word in re.split(r"[ \t,]", info) if word]
    language = code_language(info)
    if language == "rust":
        return hide_rust_lines(code, blank=blank)
    prefix = next((word.removeprefix("hidelines=") for word in words[1:] if word.startswith("hidelines=")), None)
    prefix = prefix if prefix is not None else (hidelines or {}).get(language) if language else None
    return hide_prefixed_lines(code, prefix, blank=blank) if prefix else code


def title_directive(text: str) -> tuple[str, str | None]:
    """``text`` without its ``{{#title …}}`` directives (the page's ``<title>``; the last one wins), and that
    title or None. What the directive spanned is removed but its newlines stay, so line numbers don't change;
    an escaped ``\\{{#title …}}`` is left as it is."""
    title = None

    def replace(match: re.Match) -> str:
        nonlocal title
        if match.group(1) != "title":
            return match.group()
        title = match.group(2).strip() or None
        return "\n" * match.group().count("\n")

    replaced = _DIRECTIVE.sub(replace, text)
    if replaced == text:
        return text, None
    # Each directive is replaced by its newlines: the lines correspond one to one.
    lines = [line if line.strip() or not old.strip() else ""
             for line, old in zip(replaced.split("\n"), text.split("\n"), strict=True)]
    return "\n".join(lines), title


def playground_block(code: str, attributes: list[str] | None = None) -> str:
    """What ``{{#playground file attr…}}`` stands for: the file in a ```` ```rust,attr… ```` block (mdBook's links
    preprocessor), ending in a newline."""
    info = ",".join(["rust", *(attributes or [])])
    body = code if code.endswith("\n") else code + "\n"
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{fence}{info}\n{body}{fence}\n"
