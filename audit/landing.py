"""Where a question lands in the book: the one section it is counted on by the map of where students struggle
(``audit.struggle``).

It is its answer's first cited source, else its first source (the top retrieved passage), else, for a refusal
(which shows no sources), the first of the closest sections it suggested; known by the section's link without the
text fragment a source's link carries (``#:~:text=…``). Empty when the answer has none of these (it timed out or
failed before retrieving). Written on the audit row when it is saved (``AuditLog.section_url``), so that counting a
term's questions by section reads one column.
"""

from __future__ import annotations

import re

_FRAGMENT = re.compile(r"#?:~:text=.*$")


def landed_section(sources: list | None, suggestions: list | None) -> str:
    """The link of the section an answer with these sources and suggestions lands on ("" for none)."""
    sources = [s for s in sources or () if isinstance(s, dict)]
    cited = [s for s in sources if s.get("cited") is True]
    for candidates in (cited, sources, [s for s in suggestions or () if isinstance(s, dict)]):
        if candidates and isinstance(url := candidates[0].get("url"), str):
            return _FRAGMENT.sub("", url)
    return ""
