"""The map of where students struggle as tables and Markdown (``audit.struggle_export``), on a map made by hand: the
sections' columns in order, topics ranked beside sections (named by their label, with no place in the outline), the
heat strip a column per week, and the Markdown's topic lines (terms, cited sections, or none) and its cut-off."""

from __future__ import annotations

from audit.struggle_export import SECTION_COLUMNS, TABLES, heat_table, ranking_markdown, ranking_table, sections_table

URL = "https://docs.example.org/guide/install#linux"


def section(**counts) -> dict:
    base = {column: 0 for column in SECTION_COLUMNS}
    return base | {"chapter": "Guide", "page": "Install", "section": "On Linux", "anchor": "linux", "url": URL} | counts


def ranked_section(rank: int, **fields) -> dict:
    return {"rank": rank, "kind": "section", "section": "On Linux", "chapter": "Guide", "page": "Install", "url": URL,
            "score": 2.5, "struggle": 3, "questions": 4, "sessions": 2} | fields


def topic_entry(rank: int) -> dict:
    return {"rank": rank, "kind": "topic", "n": 7, "label": "proxy *settings*", "score": 1.0, "struggle": 1,
            "questions": 1, "sessions": 1}


def result(ranking: list[dict]) -> dict:
    return {"book": "demo", "totals": {"questions": 5}, "sections": [section(questions=4, unsure=2, thumbs_down=1)],
            "ranking": ranking, "heat": {"weeks": ["2026-11-02", "2026-11-09"],
                                         "chapters": [{"chapter": "Guide", "counts": [1, 3]}]}}


def test_the_tables_have_their_columns_in_order():
    header, rows = sections_table(result([]))
    assert header == SECTION_COLUMNS and rows[0][:6] == ["Guide", "Install", "On Linux", "linux", URL, 4]
    assert rows[0][header.index("unsure")] == 2
    assert heat_table(result([])) == (("chapter", "2026-11-02", "2026-11-09"), [["Guide", 1, 3]])
    assert set(TABLES) == {"sections", "ranking", "heat"}


def test_a_ranked_topic_is_named_by_its_label_and_has_no_place_in_the_outline():
    _, rows = ranking_table(result([ranked_section(1), topic_entry(2)]))
    assert rows == [[1, "section", "On Linux", "Guide", "Install", URL, 2.5, 3, 4, 2],
                    [2, "topic", "topic 7: proxy *settings*", "", "", "", 1.0, 1, 1, 1]]


def test_markdown_lists_a_sections_trouble_and_a_topics_terms_and_cited_sections():
    topics = [{"n": 7, "terms": ["proxy", "http_proxy"], "unsure": 1,
               "sections": [{"section": "Network", "url": "https://docs.example.org/net"},
                            {"section": "Offline", "url": ""}]}]
    text = ranking_markdown(result([ranked_section(1), topic_entry(2)]), topics, days=30)
    assert text.startswith("## Where to revise first (the book `demo`, last 30 days)\n")
    assert "5 questions in the period. 2 sections and topics" in text
    assert f"### 1. [On Linux]({URL})\n\n- in: Guide › Install\n" in text
    assert "- score 2.5: 4 questions in 2 conversations (2 unsure, 1 thumbs down)" in text
    assert "### 2. Topic: proxy \\*settings\\*\n\n- terms: proxy, http\\_proxy\n" in text
    assert "- score 1: 1 question in 1 conversation (1 unsure)" in text
    assert "- sections its answers cite: [Network](https://docs.example.org/net), Offline" in text


def test_markdown_of_a_topic_citing_nothing_and_of_a_long_ranking():
    entries = [ranked_section(rank) for rank in range(1, 4)] + [topic_entry(4)]
    text = ranking_markdown(result(entries), [{"n": 7, "terms": []}], days=7, limit=4)
    assert "- sections its answers cite: none" in text and "more" not in text
    text = ranking_markdown(result(entries), [], days=7, limit=2)
    assert text.count("### ") == 2 and text.endswith("… and 2 more (the admin's map of the book lists them all).\n")


def test_markdown_of_no_struggle_says_so():
    text = ranking_markdown(result([]), [], days=90)
    assert "0 sections and topics" in text and text.endswith("No struggle in this period.\n")
