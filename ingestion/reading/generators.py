"""Other static-site generators' syntax in a page, read as their sites render it (line-preserving, as ``mdx``).

Books written for Jekyll, MkDocs or mdBook are folders of Markdown too, with a little syntax of
their own that is not prose. ``clean_generator_syntax`` rewrites it in place, outside code, before
the MDX cleanup, and never adds or removes a line.

Decisions:
- Liquid/Jinja (Jekyll, MkDocs macros), in ``.md`` pages only (in ``.mdx``, ``{{`` is a JSX object) and
  never inside inline code or code blocks: a ``{% comment %}…{% endcomment %}`` block is dropped with its
  content; ``{% raw %}``/``{% endraw %}`` markers go and their content stays; every other
  ``{% tag %}`` (``include``, ``if``, ``for``, ``assign``, ``highlight``…) and every ``{{ output }}`` is
  removed: what it would render comes from the site's data, which a folder of pages doesn't have.
- Jekyll's ``{% highlight ruby linenos %}`` … ``{% endhighlight %}`` become a fence (```` ```ruby ````, before
  anything else reads the page), so their content is read, and shown in answers, as the code block the site
  renders; ``linenos`` and the like are dropped. An opening tag never closed stays a tag (removed as one).
- mdBook's ``{{#include file}}`` (and ``#rustdoc_include``, ``#playground``) on a line of its own is inlined
  before this runs (``ingestion.reading.partials``); one left mid-line is removed with a warning naming it. An
  escaped ``\\{{#include …}}`` is text (mdBook shows it without the backslash, ``MdBookConventions.clean``).
- MkDocs admonitions (``!!! note "Title"``, and collapsible ``???``/``???+``) become a label line like
  Docusaurus's (``Note (Title):``) and their content, indented four spaces, is dedented so that it is
  read as the paragraphs, lists and code it is rather than as one indented code block.
- PyMdown's generic blocks (``pymdownx.blocks``: ``/// note | Title`` … ``///``, ``////`` and more slashes
  when nested), in ``.md`` pages: an admonition (``admonition``, ``details`` and the admonition types) becomes
  the same label line, a ``tab`` a ``**Title:**`` line as MkDocs' content tabs do; ``caption``, ``html`` and
  ``define`` keep only their content. The header's option lines (``    type: warning``, four spaces in) are
  blanked (an ``admonition`` or ``details`` without a title is labelled by its ``type``), and so is the closing
  line. Only those names open a block (a Rust ``/// Returns …`` comment outside code is text), and only with a
  closing line of as many slashes further down.
"""

from __future__ import annotations

import re

from ingestion.reading.documents import Issue, Label, admonition_label, fence_for

_COMMENT_OPEN = re.compile(r"\{%-?\s*comment\s*-?%\}")
_COMMENT_CLOSE = re.compile(r"\{%-?\s*endcomment\s*-?%\}")
_TAG = re.compile(r"\{%-?.*?-?%\}")
_RAW_OPEN = re.compile(r"\{%-?\s*raw\s*-?%\}")
_RAW_CLOSE = re.compile(r"\{%-?\s*endraw\s*-?%\}")
_MDBOOK = re.compile(r"(?<!\\)\{\{\s*#(include|rustdoc_include|playground)\b[^}]*\}\}")  # ``\{{#`` is text
# Not JSX's ``style={{…}}`` object literals nor GitHub Actions' ``${{ … }}``.
_OUTPUT = re.compile(r"(?<![=$\\])\{\{(?!\s*[\w$]+\s*:).*?\}\}")
_INLINE_CODE = re.compile(r"(`+).*?\1")
_TEMPLATE_SUFFIXES = (".md", ".markdown")
_MKDOCS_ADMONITION = re.compile(r"^(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?)[ \t]+(?P<kind>[A-Za-z][\w-]*)"
                                r"(?:[ \t]+(?P<classes>[\w -]*?))?(?:[ \t]*\"(?P<title>[^\"]*)\")?[ \t]*$")


# PyMdown's generic blocks: ``/// name | argument`` (three or more slashes), closed by a line of as many.
_BLOCK_OPEN = re.compile(r"^(?P<slashes>/{3,})[ \t]*(?P<name>[A-Za-z][\w-]*)[ \t]*(?:\|[ \t]*(?P<arg>.*?))?[ \t]*$")
_BLOCK_OPTION = re.compile(r"^(?: {4}|\t)[ \t]*[\w-]+[ \t]*:")
_ADMONITION_BLOCKS = {"admonition", "details", "note", "attention", "caution", "danger", "error", "tip", "hint",
                      "warning", "info", "check", "important", "success", "question", "failure", "bug", "example",
                      "quote", "abstract", "summary", "tldr", "seealso"}
_CONTENT_BLOCKS = {"caption", "html", "define"}
_BLOCK_NAMES = _ADMONITION_BLOCKS | _CONTENT_BLOCKS | {"tab"}


_HIGHLIGHT_OPEN = re.compile(r"^(?P<indent>[ \t]*)\{%-?\s*highlight\s+(?P<lang>[\w+#.-]+)[^%]*-?%\}\s*$")
_HIGHLIGHT_CLOSE = re.compile(r"^[ \t]*\{%-?\s*endhighlight\s*-?%\}\s*$")


def highlight_fences(lines: list[str], *, rel_path: str) -> None:
    """Rewrite Jekyll ``{% highlight lang %}`` … ``{% endhighlight %}`` blocks of a ``.md`` page in ``lines`` as
    fenced code blocks, in place, line for line."""
    if not rel_path.lower().endswith(_TEMPLATE_SUFFIXES):
        return
    index = 0
    while index < len(lines):
        opening = _HIGHLIGHT_OPEN.match(lines[index]) if "highlight" in lines[index] else None
        close = next((j for j in range(index + 1, len(lines)) if _HIGHLIGHT_CLOSE.match(lines[j])), None) \
            if opening else None
        if opening and close is not None:
            fence = fence_for("\n".join(lines[index + 1:close]))
            lines[index] = f"{opening.group('indent')}{fence}{opening.group('lang')}"
            lines[close] = f"{opening.group('indent')}{fence}"
            index = close
        index += 1


def clean_generator_syntax(lines: list[str], code_lines: set[int], *, rel_path: str,
                           labels: dict[int, Label] | None = None) -> list[Issue]:
    """Rewrite ``lines`` in place (see the module docstring); the warnings it has for the page. ``labels`` gets the
    label lines written for PyMdown's blocks, by line, for the parser to fold each into the block's first
    paragraph."""
    warnings: list[Issue] = []
    in_comment = in_raw = False
    templates = rel_path.lower().endswith(_TEMPLATE_SUFFIXES)  # an .mdx page is JSX: ``{{`` is an object there
    for index, line in enumerate(lines):
        if not templates or index in code_lines or not ("{" in line or in_comment):
            continue
        line, in_comment = _drop_comments(line, in_comment)
        parts, in_raw = _raw_parts(line, in_raw)
        for text in (text for text, raw in parts if not raw):
            for match in _MDBOOK.finditer(outside_inline_code(text, lambda text: text, code=lambda span: "")):
                warnings.append(Issue(rel_path, index + 1, f"mdBook {match.group()} is not inlined; its text is "
                                                           "not indexed"))
        line = "".join(text if raw else outside_inline_code(text, _strip_template) for text, raw in parts)
        lines[index] = line if line.strip() or not lines[index].strip() else ""
    for index, line in enumerate(lines):
        if index in code_lines or not ("!!!" in line or "???" in line):
            continue
        match = _MKDOCS_ADMONITION.match(line)
        if match:
            indent = match.group("indent")
            lines[index] = indent + admonition_label(match.group("kind"), match.group("title"))
            dedent_body(lines, index + 1, len(indent.expandtabs(4)) + 4)
    if templates:
        written = pymdown_blocks(lines, code_lines)
        if labels is not None:
            labels.update(written)
    return warnings


def pymdown_blocks(lines: list[str], code_lines: set[int]) -> dict[int, Label]:
    """Rewrite PyMdown's generic blocks in ``lines`` in place, line for line (see the module docstring); the label
    lines written, by line, each valid up to its block's closing line."""
    labels: dict[int, Label] = {}
    for index, line in enumerate(lines):
        if index in code_lines or not line.startswith("///"):
            continue
        match = _BLOCK_OPEN.match(line)
        name = match.group("name").lower() if match else ""
        if name not in _BLOCK_NAMES:
            continue
        closer = "/" * len(match.group("slashes"))
        close = next((j for j in range(index + 1, len(lines)) if j not in code_lines and lines[j].strip() == closer),
                     None)
        if close is None:
            continue
        options: dict[str, str] = {}
        body = index + 1
        while body < close and _BLOCK_OPTION.match(lines[body]):
            key, _, value = lines[body].strip().partition(":")
            options[key.strip().lower()] = value.strip().strip("\"'")
            lines[body] = ""
            body += 1
        title = (match.group("arg") or "").strip()
        if name == "tab":
            lines[index] = f"**{title.replace('*', '')}:**" if title else ""
        elif name in _CONTENT_BLOCKS:
            lines[index] = ""
        else:
            kind = options.get("type") or ("note" if name == "admonition" else name)
            lines[index] = admonition_label(kind, title or None)
        lines[close] = ""
        if lines[index]:
            labels[index] = Label(lines[index], close)
    return labels


def _strip_template(text: str) -> str:
    return _OUTPUT.sub("", _TAG.sub("", _MDBOOK.sub("", text)))


def _raw_parts(line: str, in_raw: bool) -> tuple[list[tuple[str, bool]], bool]:
    """``line`` as ``(text, inside a raw block)`` parts, the ``{% raw %}``/``{% endraw %}`` markers dropped, and
    whether the raw block goes on after it. A marker quoted in inline code opens or closes nothing."""
    quoted = [span.span() for span in _INLINE_CODE.finditer(line)]
    parts, pos = [], 0
    while True:
        marker = (_RAW_CLOSE if in_raw else _RAW_OPEN).search(line, pos)
        while marker is not None and any(start <= marker.start() < end for start, end in quoted):
            marker = (_RAW_CLOSE if in_raw else _RAW_OPEN).search(line, marker.end())
        if marker is None:
            parts.append((line[pos:], in_raw))
            return parts, in_raw
        parts.append((line[pos:marker.start()], in_raw))
        pos, in_raw = marker.end(), not in_raw


def outside_inline_code(line: str, rewrite, *, code=lambda span: span) -> str:
    """``line`` with ``rewrite`` applied to its text outside inline code spans (a page about Liquid quotes it), and
    ``code`` to each span (kept as it is by default)."""
    out, pos = [], 0
    for span in _INLINE_CODE.finditer(line):
        out += [rewrite(line[pos:span.start()]), code(span.group())]
        pos = span.end()
    return "".join(out) + rewrite(line[pos:])


def _drop_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """``line`` without the parts inside a Liquid comment block, and whether the block goes on after it. A comment
    tag quoted in inline code (a page about Liquid) opens nothing."""
    quoted = [span.span() for span in _INLINE_CODE.finditer(line)]
    kept, pos = [], 0
    while pos <= len(line):
        if in_comment:
            close = _COMMENT_CLOSE.search(line, pos)
            if close is None:
                return "".join(kept), True
            pos, in_comment = close.end(), False
        else:
            opening = _COMMENT_OPEN.search(line, pos)
            while opening is not None and any(start <= opening.start() < end for start, end in quoted):
                opening = _COMMENT_OPEN.search(line, opening.end())
            if opening is None:
                kept.append(line[pos:])
                return "".join(kept), False
            kept.append(line[pos:opening.start()])
            pos, in_comment = opening.end(), True
    return "".join(kept), in_comment


def dedent_body(lines: list[str], start: int, width: int, *, clear_blank: bool = False) -> None:
    """Dedent by four a block's body from ``start`` (an admonition's, a content tab's): the following blank lines
    (emptied with ``clear_blank``) and lines indented ``width`` or more."""
    index = start
    while index < len(lines):
        line = lines[index].expandtabs(4)
        if not line.strip():
            if clear_blank:
                lines[index] = ""
            index += 1
            continue
        if len(line) - len(line.lstrip(" ")) < width:
            break
        lines[index] = line[4:]
        index += 1
