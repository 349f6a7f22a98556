"""The map of where students struggle (``audit.struggle.struggle_map``) as tables for CSV (the sections, the ranking,
the heat strip by chapter and week) and its ranking as Markdown for an issue in the book's repository."""

from __future__ import annotations

from collections.abc import Callable

from audit.gaps import markdown_escape, markdown_link
from audit.struggle import LEVELS

SECTION_COLUMNS = ("chapter", "page", "section", "anchor", "url", "questions", "sessions", *LEVELS, "thumbs_down",
                   "wrong", "needs_doc_fix", "previous", "change", "struggle", "score")
RANKING_COLUMNS = ("rank", "kind", "name", "chapter", "page", "url", "score", "struggle", "questions", "sessions")
MARKDOWN_RANKED = 30  # entries in an export, highest score first
TROUBLE = (("unsure", "unsure"), ("refused", "refused"), ("withheld", "withheld"), ("thumbs_down", "thumbs down"),
           ("wrong", "judged wrong"), ("needs_doc_fix", "needs a doc fix"))

Table = tuple[tuple[str, ...], list[list]]


def sections_table(result: dict) -> Table:
    """Every section in the outline's order, with its counts."""
    return SECTION_COLUMNS, [[section[column] for column in SECTION_COLUMNS] for section in result["sections"]]


def ranking_table(result: dict) -> Table:
    """The ranking, highest score first: sections and topics (a topic's name is its label)."""
    rows = []
    for entry in result["ranking"]:
        topic = entry.get("kind") == "topic"
        name = f"topic {entry['n']}: {entry['label']}" if topic else entry["section"]
        place = ("", "", "") if topic else (entry["chapter"], entry["page"], entry["url"])
        rows.append([entry["rank"], entry.get("kind", "section"), name, *place, entry["score"], entry["struggle"],
                     entry["questions"], entry["sessions"]])
    return RANKING_COLUMNS, rows


def heat_table(result: dict) -> Table:
    """The questions of each chapter per week (a column per week, by its Monday)."""
    heat = result["heat"]
    return ("chapter", *heat["weeks"]), [[row["chapter"], *row["counts"]] for row in heat["chapters"]]


TABLES: dict[str, Callable[[dict], Table]] = {"sections": sections_table, "ranking": ranking_table,
                                              "heat": heat_table}


def ranking_markdown(result: dict, topics: list[dict], *, days: int, limit: int = MARKDOWN_RANKED) -> str:
    """"Where to revise first" as Markdown to paste into an issue of the book's repository, as the coverage gaps'
    (``gaps_markdown``): each ranked section with its link and place, each topic with its terms and the sections
    its answers cite, and what went wrong there. Headings and readers' words are escaped."""
    ranked = result["ranking"]
    sections = {section["url"]: section for section in result["sections"]}
    by_number = {topic["n"]: topic for topic in topics}
    lines = [f"## Where to revise first (the book `{result['book']}`, last {days} days)", "",
             f"bookchat's map of where students struggle: {result['totals']['questions']} questions in the period. "
             f"{len(ranked)} section{'s' if len(ranked) != 1 else ''} and topics had answers held back as unsure, "
             "refused or withheld, thumbs down or reviewers' verdicts; they are ranked by that trouble per question, "
             "weighted by how many students asked. The highest come first.", ""]
    if not ranked:
        lines.append("No struggle in this period.")
    for entry in ranked[:limit]:
        if entry.get("kind") == "topic":
            lines += _topic_lines(entry, by_number.get(entry["n"], {}))
        else:
            lines += _section_lines(entry, sections.get(entry["url"], {}))
        lines.append("")
    if len(ranked) > limit:
        lines.append(f"… and {len(ranked) - limit} more (the admin's map of the book lists them all).")
    return "\n".join(lines).rstrip() + "\n"


def _asked(entry: dict, counts: dict) -> str:
    trouble = [f"{counts[name]} {label}" for name, label in TROUBLE if counts.get(name)]
    return (f"- score {entry['score']:g}: {entry['questions']} question{'s' if entry['questions'] != 1 else ''} "
            f"in {entry['sessions']} conversation{'s' if entry['sessions'] != 1 else ''}"
            + (f" ({', '.join(trouble)})" if trouble else ""))


def _section_lines(entry: dict, section: dict) -> list[str]:
    place = " › ".join(markdown_escape(part) for part in (entry["chapter"], entry["page"]) if part)
    return [f"### {entry['rank']}. [{markdown_escape(entry['section'])}]({markdown_link(entry['url'])})", "",
            f"- in: {place}", _asked(entry, section)]


def _topic_lines(entry: dict, topic: dict) -> list[str]:
    lines = [f"### {entry['rank']}. Topic: {markdown_escape(entry['label'])}", "",
             f"- terms: {', '.join(markdown_escape(term) for term in topic.get('terms', []))}", _asked(entry, topic)]
    cited = [f"[{markdown_escape(s['section'])}]({markdown_link(s['url'])})" if s.get("url")
             else markdown_escape(s["section"]) for s in topic.get("sections", [])]
    lines.append(f"- sections its answers cite: {', '.join(cited)}" if cited else "- sections its answers cite: none")
    return lines
