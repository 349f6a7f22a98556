"""Small server-rendered SVG charts for the admin dashboard: no JavaScript, no CDN.

Each function returns markup made with ``format_html``/``escape`` (every label is escaped),
with a ``<title>`` for screen readers; the dashboard also shows the numbers as tables.
"""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 640, 180, 36, 22, 10
COLOURS = {"high": "#2e7d32", "medium": "#f9a825", "low": "#e65100", "unsure": "#8d6e63", "not covered": "#78909c",
           "withheld": "#6a1b9a", "failed": "#c62828", "up": "#2e7d32", "down": "#c62828", "answers": "#1565c0"}


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
