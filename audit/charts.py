"""Small server-rendered SVG charts for the admin dashboard: no JavaScript, no CDN.

Each function returns markup made with ``format_html``/``escape`` (every label is escaped),
with a ``<title>`` for screen readers; the dashboard also shows the numbers as tables.
"""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 640, 180, 36, 22, 10
COLOURS = {"high": "#2e7d32", "medium": "#f9a825", "low": "#e65100", "unsure": "#8d6e63", "not covered": "#78909c",
           "withheld": "#6a1b9a", "staff": "#00838f", "failed": "#c62828", "up": "#2e7d32", "down": "#c62828",
           "answers": "#1565c0"}


def _frame(title: str, body: list[str], height: int = HEIGHT) -> SafeString:
    return mark_safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{escape(title)}" style="max-width:100%;height:auto;font:11px sans-serif">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>")


def _axis(top: float, unit: str = "") -> list[str]:
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    out = [f'<line x1="{PAD_LEFT}" y1="{PAD_TOP}" x2="{PAD_LEFT}" y2="{PAD_TOP + plot_h}" stroke="#999"/>',
           f'<line x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH}" y2="{PAD_TOP + plot_h}" stroke="#999"/>']
    for fraction in (0, 0.5, 1):
        y = PAD_TOP + plot_h * (1 - fraction)
        value = top * fraction
        label = f"{value:.0f}{unit}" if value >= 10 or value == 0 else f"{value:.1f}{unit}"
        out.append(f'<text x="{PAD_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" fill="#555">{escape(label)}</text>')
    return out


def _x_labels(labels: list[str], step: float) -> list[str]:
    every = max(1, len(labels) // 8)
    return [f'<text x="{PAD_LEFT + step * (i + 0.5):.1f}" y="{HEIGHT - 6}" text-anchor="middle" fill="#555">'
            f"{escape(label)}</text>" for i, label in enumerate(labels) if i % every == 0]


def stacked_bars(title: str, labels: list[str], series: dict[str, list[int]]) -> SafeString:
    """One bar per label, stacked by series (e.g. thumbs up and down per day)."""
    totals = [sum(values[i] for values in series.values()) for i in range(len(labels))]
    top = max(totals, default=0) or 1
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    step = (WIDTH - PAD_LEFT) / max(len(labels), 1)
    body = _axis(top)
    for i, label in enumerate(labels):
        y = PAD_TOP + plot_h
        for name, values in series.items():
            if not values[i]:
                continue
            h = plot_h * values[i] / top
            y -= h
            body.append(f'<rect x="{PAD_LEFT + step * i + step * 0.15:.1f}" y="{y:.1f}" width="{step * 0.7:.1f}" '
                        f'height="{h:.1f}" fill="{COLOURS.get(name, "#1565c0")}"><title>{escape(label)}: '
                        f"{values[i]} {escape(name)}</title></rect>")
    body += _x_labels(labels, step)
    return _frame(title, body)


def line(title: str, labels: list[str], values: list[float | None], *, unit: str = "%", top: float = 100) -> SafeString:
    """A line over the labels; ``None`` values (no data that day) break it."""
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    step = (WIDTH - PAD_LEFT) / max(len(labels), 1)
    body, points = _axis(top, unit), []
    for i, value in enumerate([*values, None]):
        if value is None:
            if len(points) > 1:
                body.append(f'<polyline fill="none" stroke="#c62828" stroke-width="2" points="{" ".join(points)}"/>')
            points = []
            continue
        x, y = PAD_LEFT + step * (i + 0.5), PAD_TOP + plot_h * (1 - min(value, top) / top)
        points.append(f"{x:.1f},{y:.1f}")
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="#c62828"><title>{escape(labels[i])}: '
                    f"{value:.0f}{escape(unit)}</title></circle>")
    body += _x_labels(labels, step)
    return _frame(title, body)


def share_bar(title: str, parts: dict[str, int]) -> SafeString:
    """One horizontal bar split by share, with a legend (e.g. the confidence-level mix)."""
    total = sum(parts.values()) or 1
    body, x = [], 0.0
    for name, count in parts.items():
        w = WIDTH * count / total
        if w:
            body.append(f'<rect x="{x:.1f}" y="4" width="{w:.1f}" height="26" fill="{COLOURS.get(name, "#1565c0")}">'
                        f"<title>{escape(name)}: {count} ({100 * count / total:.0f}%)</title></rect>")
        x += w
    lx = 0
    for name, count in parts.items():
        body.append(f'<rect x="{lx}" y="40" width="10" height="10" fill="{COLOURS.get(name, "#1565c0")}"/>'
                    f'<text x="{lx + 14}" y="49" fill="#333">{escape(name)} {count}</text>')
        lx += 14 + 7 * (len(name) + len(str(count)) + 1) + 18
    return _frame(title, body, height=58)


HEAT_LABEL_W, HEAT_ROW_H, HEAT_HEAD_H, HEAT_LABEL_CHARS = 190, 20, 18, 28
HEAT_COLOUR = "#1e88e5"  # a blue that reads on the admin's light and dark backgrounds at every opacity
HEAT_FLOOR = 0.2  # the opacity of the lightest non-empty cell, so that one question shows


def heat_strip(title: str, weeks: list[str], rows: list[tuple[str, list[tuple[int, str]]]]) -> SafeString:
    """A grid of rows (e.g. chapters) by columns (weeks), each cell shaded by its count and a link (``href``) with
    a ``<title>``: the links make every cell a keyboard stop. ``rows``: ``[(label, [(count, href), …]), …]``.
    The grid holds links, so it is a group of links, not an image (an image's children are not reachable)."""
    top = max((count for _, cells in rows for count, _ in cells), default=0) or 1
    step = (WIDTH - HEAT_LABEL_W) / max(len(weeks), 1)
    height = HEAT_HEAD_H + HEAT_ROW_H * len(rows) + 4
    text = 'style="fill:var(--body-fg,#333)"'
    every = max(1, round(len(weeks) / 6))
    body = [f'<text x="{HEAT_LABEL_W + step * i:.1f}" y="12" {text}>{escape(week)}</text>'
            for i, week in enumerate(weeks) if i % every == 0]
    for r, (label, cells) in enumerate(rows):
        y = HEAT_HEAD_H + HEAT_ROW_H * r
        short = label if len(label) <= HEAT_LABEL_CHARS else label[:HEAT_LABEL_CHARS - 1] + "…"
        body.append(f'<text x="0" y="{y + 14}" {text}><title>{escape(label)}</title>{escape(short)}</text>')
        for i, (count, href) in enumerate(cells):
            name = f"{label}, week of {weeks[i]}: {count} question{'s' if count != 1 else ''}"
            shade = HEAT_FLOOR + (1 - HEAT_FLOOR) * count / top if count else 0
            body.append(f'<a href="{escape(href)}" aria-label="{escape(name)}"><rect x="{HEAT_LABEL_W + step * i:.1f}" '
                        f'y="{y + 1}" width="{max(step - 2, 1):.1f}" height="{HEAT_ROW_H - 2}" fill="{HEAT_COLOUR}" '
                        f'fill-opacity="{shade:.2f}" stroke="{HEAT_COLOUR}" stroke-opacity="0.5">'
                        f"<title>{escape(name)}</title></rect></a>")
    return mark_safe(
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" role="group" '
        f'aria-label="{escape(title)}" style="max-width:100%;height:auto;font:11px sans-serif">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>")
