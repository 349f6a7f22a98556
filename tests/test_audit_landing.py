"""Where a question lands in the book (``audit.landing.landed_section``): the first cited source, else the first
source, else a refusal's first suggested section, always without the text fragment a source's link carries."""

from __future__ import annotations

from audit.landing import landed_section

PAGE = "https://docs.example.org/guide/install"


def test_the_first_cited_source_wins_over_an_uncited_one_ranked_higher():
    sources = [{"url": f"{PAGE}#linux", "cited": False}, {"url": f"{PAGE}#windows", "cited": True}]
    assert landed_section(sources, [{"url": "https://elsewhere"}]) == f"{PAGE}#windows"


def test_without_a_citation_the_top_source_counts():
    sources = [{"url": f"{PAGE}#linux", "cited": "yes"}, {"url": f"{PAGE}#windows"}]  # only True is a citation
    assert landed_section(sources, None) == f"{PAGE}#linux"


def test_a_refusal_lands_on_its_first_suggested_section():
    assert landed_section([], [{"url": f"{PAGE}#mac"}, {"url": f"{PAGE}#linux"}]) == f"{PAGE}#mac"


def test_the_text_fragment_is_cut_with_or_without_an_anchor_before_it():
    assert landed_section([{"url": f"{PAGE}#linux:~:text=apt%20install"}], None) == f"{PAGE}#linux"
    assert landed_section([{"url": f"{PAGE}#:~:text=apt"}], None) == PAGE


def test_nothing_usable_lands_nowhere():
    assert landed_section(None, None) == ""
    assert landed_section(["not a dict", {"cited": True}], [{"url": 42}]) == ""
