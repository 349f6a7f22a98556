"""Words that carry meaning: tokenising, stop words and light stemming for comparing questions,
sentences and passages (the extractive generator and the grounding check), plus sentence
splitting and Markdown-to-plain-text for excerpts.

Deliberately small and language-light: the comparison only has to tell whether two texts
share their content words, not to understand them.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from ingestion.reading.fences import fence_roles

_WORD = re.compile(r"[^\W_]+(?:[-'.][^\W_]+)*", re.UNICODE)
# Chinese and Japanese end a sentence with a full-width stop and write no space after it: the next one starts
# right after the stop (and its closing quote or bracket).
_CJK_CLOSERS = "”’」』）》\"')\\]"
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9`*_\u00C0-\uFFFF])"
                           rf"|(?:(?<=[。！？])|(?<=[。！？][{_CJK_CLOSERS}]))(?=[^\s{_CJK_CLOSERS}。！？])")
# Ideographs and kana: scripts written without spaces between words, compared by overlapping character pairs.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_SCRIPT_RUN = re.compile(f"[{_CJK}]+|[^{_CJK}]+")
_CJK_CHAR = re.compile(f"[{_CJK}]")
_CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_SPACED_CITATION = re.compile(r"(?:^|(?<=\s))" + _CITATION.pattern)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_MARKS = re.compile(r"[*_`~]+")
_HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
# TeX math: ``$$…$$`` or ``$…$`` (not ``$5 and $10``: no space inside the dollars, no word right after them).
MATH = r"\$\$.+?\$\$|(?<![\w$\\])\$(?=\S)[^$\n]+?(?<=\S)\$(?![\w$])"
# Inline code (any run of backticks, closed by the same run) and math: kept as written in plain text.
_VERBATIM = re.compile(rf"(?<!`)(`+)(?!`)\s?(.+?)\s?(?<!`)\1(?!`)|{MATH}", re.DOTALL)
# A table's delimiter row (`| --- | :-: |`, `--- | ---`): it has a pipe, which a thematic break never has.
_TABLE_RULE = re.compile(r"^[ \t]*(?=[^|\n]*\|)\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_TABLE_PIPE = re.compile(r"(?<!\\)\|")
_CELL_SEPARATOR = " · "

STOP_WORDS = frozenset("""
a about above after again against all also am an and any are aren't as at be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
either else ever few for from further get gets got had hadn't has hasn't have haven't having he he'd he'll he's
her here here's hers herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's
its itself just let's like may me might more most much must mustn't my myself neither no nor not now of off on
once one only or other ought our ours ourselves out over own per please same shall shan't she she'd she'll
she's should shouldn't so some such than that that's the their theirs them themselves then there there's these
they they'd they'll they're they've this those though through to too under until up upon us use used using very
via was wasn't we we'd we'll we're we've were weren't what what's when when's where where's whether which while
who who's whom whose why why's will with within without won't would wouldn't yes yet you you'd you'll you're
you've your yours yourself yourselves
tell explain describe give know want need way ways thing things kind something anything does done make makes
""".split())  # noqa: SIM905 - a word list reads best as text


def normalise(text: str) -> str:
    """NFKC, case-folded, with Markdown emphasis/code markers dropped and whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[*_`]", "", text)
    return re.sub(r"\s+", " ", text).strip()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English suffix stripper: enough to match 'installs'/'installing'/'installed'."""
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, keep in (("ies", "y"), ("ied", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""),
                         ("ly", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            word = word[: -len(suffix)] + keep
            break
    if len(word) > 4 and word[-1] == word[-2] and word[-1] not in "lsz":  # running → runn → run
        word = word[:-1]
    return word.rstrip("e") if len(word) > 4 else word


def words(text: str) -> list[str]:
    """Lower-cased word tokens (dotted and hyphenated names like ``docusaurus.config.js`` stay whole)."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


@lru_cache(maxsize=2048)
def content_terms(text: str) -> tuple[str, ...]:
    """Stemmed words that are not stop words, in order (repeats kept). Hyphenated and dotted
    names also contribute their parts, so ``trailing-slash`` matches ``trailing slash``.
    Cached: the same passages come back for question after question (grounding, the extractive
    generator and confidence each read their terms); the stems in the tuples are shared."""
    out = []
    for word in words(text):
        if _CJK_CHAR.search(word):
            out.extend(_cjk_terms(word))
            continue
        parts = [word] + (re.split(r"[-'.]", word) if re.search(r"[-'.]", word) else [])
        for part in parts:
            if part and part not in STOP_WORDS and (len(part) > 1 or part.isdigit()):
                out.append(stem(part))
    return tuple(out)


def _cjk_terms(word: str) -> list[str]:
    """The terms of a word holding ideographs or kana: each run of them as its overlapping character pairs (a
    run is a clause, not a word: "构建站点时" shares "站点" with "部署站点"), the rest of the word as a word of
    its own ("部署到github" holds "github")."""
    out = []
    for run in _SCRIPT_RUN.findall(word):
        if _CJK_CHAR.match(run):
            out.extend(run[i:i + 2] for i in range(len(run) - 1))
        else:
            out.extend(content_terms(run))
    return out


def strip_citations(text: str) -> str:
    """``text`` without its ``[n]`` markers (and the space before each)."""
    return re.sub(r"\s*" + _CITATION.pattern, "", text)


def citations(text: str, *, spaced: bool = False) -> list[int]:
    """The source numbers cited in ``text``: ``[1]``, ``[2, 3]``. ``spaced``: only markers after a space or at
    the start (as the extractive composer writes them), so that the book's own ``hl[18,22]`` or ``arr[2]`` quoted
    in its sentences is not read as one."""
    found = []
    for group in (_SPACED_CITATION if spaced else _CITATION).findall(text):
        found.extend(int(n) for n in group.split(","))
    return found


def split_sentences(text: str) -> list[str]:
    """Sentences of one paragraph of prose (whitespace inside is collapsed)."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def plain_text(markdown: str) -> str:
    """Markdown reduced to the words a reader sees: links keep their text, markers and tags go, and a table
    reads as its rows, each row's cells joined by `` · `` and ended like a sentence. The book's own words
    stay as written: inline code (`` `<head>` ``, `` `a < b` ``), math (``$x_1$``, ``$$…$$``) and the lines of
    a code block are kept verbatim; a block's fences are not text (``js title="a.js"`` is not shown)."""
    out, prose = [], []
    for line, role in fence_roles(markdown.split("\n")):
        if role == "text":
            prose.append(line)
        elif role == "open":
            out.append(_prose_text("\n".join(prose)))
            prose = []
        elif role == "code":
            out.append(line)
    out.append(_prose_text("\n".join(prose)))
    return re.sub(r"\s+", " ", " ".join(out)).strip()


def _prose_text(markdown: str) -> str:
    markdown = _tables_as_rows(markdown) if "|" in markdown else markdown
    out, end = [], 0
    for found in [*_VERBATIM.finditer(markdown), None]:
        text = _MD_LINK.sub(r"\1", markdown[end:found.start() if found else len(markdown)])
        text = _HTML_TAG.sub("", text)
        text = re.sub(r"^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+|\d+[.)]\s+)", "", text, flags=re.MULTILINE)
        out.append(_MD_MARKS.sub("", text))
        if found:  # code or math: only a code span's backticks go
            out.append(found.group(2) if found.group(1) else found.group(0))
            end = found.end()
    return "".join(out)


def _tables_as_rows(markdown: str) -> str:
    """Each Markdown table (a header row, its delimiter row, the rows up to a line without a pipe) as one line
    per row: ``| Name | Type |`` → ``Name · Type.``; the delimiter row goes. Other lines are left as they are."""
    out: list[str] = []
    in_table = False
    for line in markdown.split("\n"):
        if _TABLE_RULE.match(line) and out and "|" in out[-1] and not in_table:
            out[-1] = _table_row(out[-1])
            in_table = True
        elif in_table and "|" in line and line.strip():
            out.append(_table_row(line))
        else:
            in_table = False
            out.append(line)
    return "\n".join(out)


def _table_row(line: str) -> str:
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    cells = [cell.strip().replace("\\|", "|") for cell in _TABLE_PIPE.split(line)]
    row = _CELL_SEPARATOR.join(cell for cell in cells if cell)
    return row if not row or row[-1] in ".!?:;…" else f"{row}."
