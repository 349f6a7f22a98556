"""The dashboard's SVG charts (``audit.charts``): every label escaped, bars stacked in proportion, a line broken where a
day has no data, shares that add up, and the heat strip's cells as links shaded by their count."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from audit.charts import COLOURS, HEAT_FLOOR, heat_strip, line, share_bar, stacked_bars

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script> & more'


def parsed(markup: str) -> ET.Element:
    """The chart as XML: it fails to parse if any label broke out of its element."""
    return ET.fromstring(str(markup))


def test_every_label_and_title_is_escaped():
    charts = [stacked_bars(HOSTILE, [HOSTILE], {HOSTILE: [1]}), line(HOSTILE, [HOSTILE], [5.0]),
              share_bar(HOSTILE, {HOSTILE: 2}), heat_strip(HOSTILE, [HOSTILE], [(HOSTILE, [(1, '/x?a="b"&c')])])]
    for chart in charts:
        assert "<script>" not in chart
        svg = parsed(chart)
        assert svg.find(f"{SVG}title").text == HOSTILE
        assert svg.get("aria-label") == HOSTILE


def test_stacked_bars_are_as_tall_as_their_share_of_the_tallest_day():
    svg = parsed(stacked_bars("feedback", ["mon", "tue"], {"up": [3, 1], "down": [1, 0]}))
    bars = svg.findall(f"{SVG}rect")
    heights = {bar.find(f"{SVG}title").text: float(bar.get("height")) for bar in bars}
    assert set(heights) == {"mon: 3 up", "mon: 1 down", "tue: 1 up"}  # a zero draws no bar
    assert heights["mon: 3 up"] == 3 * heights["mon: 1 down"] == 3 * heights["tue: 1 up"]
    assert {bar.get("fill") for bar in bars} == {COLOURS["up"], COLOURS["down"]}


def test_a_line_breaks_where_a_day_has_no_value_and_is_capped_at_the_top():
    svg = parsed(line("refusals", ["a", "b", "c", "d", "e"], [10.0, 20.0, None, 150.0, 40.0]))
    polylines = svg.findall(f"{SVG}polyline")
    assert [len(p.get("points").split()) for p in polylines] == [2, 2]  # a–b, then d–e
    circles = svg.findall(f"{SVG}circle")
    assert [c.find(f"{SVG}title").text for c in circles] == ["a: 10%", "b: 20%", "d: 150%", "e: 40%"]
    top_y = min(float(c.get("cy")) for c in circles)
    assert float(circles[2].get("cy")) == top_y  # 150 % is drawn at the top, not above the frame


def test_share_bar_splits_the_width_by_share_and_lists_every_part():
    svg = parsed(share_bar("levels", {"high": 3, "low": 1, "unsure": 0}))
    shares = [(r.find(f"{SVG}title").text, float(r.get("width"))) for r in svg.findall(f"{SVG}rect")
              if r.find(f"{SVG}title") is not None]
    assert shares == [("high: 3 (75%)", 480.0), ("low: 1 (25%)", 160.0)]
    legend = [t.text for t in svg.findall(f"{SVG}text")]
    assert legend == ["high 3", "low 1", "unsure 0"]


def test_heat_strip_cells_are_links_shaded_by_count_with_a_visible_floor():
    svg = parsed(heat_strip("heat", ["2026-11-02", "2026-11-09"],
                            [("A chapter", [(4, "/a?w=1"), (0, "/a?w=2")]), ("B", [(1, "/b?w=1"), (2, "/b?w=2")])]))
    assert svg.get("role") == "group"
    links = svg.findall(f"{SVG}a")
    assert [a.get("href") for a in links] == ["/a?w=1", "/a?w=2", "/b?w=1", "/b?w=2"]
    assert links[0].get("aria-label") == "A chapter, week of 2026-11-02: 4 questions"
    assert links[3].get("aria-label") == "B, week of 2026-11-09: 2 questions"
    assert links[2].get("aria-label").endswith(": 1 question")
    shades = [float(a.find(f"{SVG}rect").get("fill-opacity")) for a in links]
    assert shades[0] == 1.0 and shades[1] == 0.0
    assert shades[2] == round(HEAT_FLOOR + (1 - HEAT_FLOOR) / 4, 2)


def test_heat_strip_shortens_long_row_labels_but_keeps_them_whole_in_the_title():
    long = "A chapter whose name is far too long to fit"
    svg = str(heat_strip("heat", ["w"], [(long, [(1, "/")])]))
    assert re.search(r"<title>A chapter whose name is far too long to fit</title>A chapter whose name is far…<",
                     svg)
