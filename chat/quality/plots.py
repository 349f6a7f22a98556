"""The confidence figures of ``evaluate`` as one standalone SVG (``evaluate --plot FILE.svg``): the reliability
diagram (in each tenth of confidence, the share of answers that were right, against the diagonal a calibrated
confidence would follow) and the risk–coverage curve (answering from the most confident answer down: the share
of the questions answered, and the share of those answers wrong).

Plain SVG with escaped labels and a ``<title>``, like the admin dashboard's charts: no JavaScript, nothing
fetched. With ``--compare``, one row of the two charts per run, in one file.
"""

from __future__ import annotations

from html import escape

SIZE, PAD = 300, 40
PLOT = SIZE - 2 * PAD


def _x(value: float, left: float) -> float:
    return left + PAD + PLOT * value


def _y(value: float) -> float:
    return PAD + PLOT * (1 - value)


def _panel(left: float, title: str, x_label: str, y_label: str) -> list[str]:
    out = [f'<text x="{left + SIZE / 2}" y="18" text-anchor="middle" font-weight="600">{escape(title)}</text>',
           f'<rect x="{left + PAD}" y="{PAD}" width="{PLOT}" height="{PLOT}" fill="none" stroke="#999"/>',
           f'<text x="{left + SIZE / 2}" y="{SIZE - 6}" text-anchor="middle" fill="#555">{escape(x_label)}</text>',
           f'<text x="{left + 12}" y="{SIZE / 2}" text-anchor="middle" fill="#555" '
           f'transform="rotate(-90 {left + 12} {SIZE / 2})">{escape(y_label)}</text>']
    for tick in (0, 0.5, 1):
        out.append(f'<text x="{_x(tick, left):.1f}" y="{PAD + PLOT + 14}" text-anchor="middle" fill="#555">'
                   f"{tick:g}</text>")
        out.append(f'<text x="{left + PAD - 4}" y="{_y(tick) + 4:.1f}" text-anchor="end" fill="#555">{tick:g}</text>')
    return out


def confidence_svg(report: dict, *, title: str = "") -> str:
    """``report``: ``confidence_report``'s result (``reliability`` and ``risk_coverage``)."""
    return confidence_svgs({title: report})


def confidence_svgs(reports: dict[str, dict]) -> str:
    """One SVG with a row of the two charts per report (``evaluate --compare`` draws both runs)."""
    rows = []
    for n, (title, report) in enumerate(reports.items()):
        heading = (f"Confidence{': ' + title if title else ''} "
                   f"(ECE {report['ece'] if report['ece'] is not None else '—'})")
        rows.append(f'<g transform="translate(0 {n * (SIZE + 16)})"><text x="4" y="12" fill="#555">'
                    f'{escape(heading)}</text><g transform="translate(0 16)">{"".join(_charts(report))}</g></g>')
    label = "; ".join(f"Confidence {t}".strip() for t in reports) or "Confidence"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {2 * SIZE} {len(reports) * (SIZE + 16)}" '
            f'role="img" aria-label="{escape(label)}" style="font:11px sans-serif"><title>{escape(label)}</title>'
            f'{"".join(rows)}</svg>\n')


def _charts(report: dict) -> list[str]:
    body = _panel(0, "Reliability", "confidence", "share right")
    body.append(f'<line x1="{_x(0, 0)}" y1="{_y(0)}" x2="{_x(1, 0)}" y2="{_y(1)}" stroke="#bbb" '
                'stroke-dasharray="4 3"/>')
    largest = max((b["n"] for b in report["reliability"]), default=1)
    for b in report["reliability"]:
        width = PLOT * (b["to"] - b["from"]) * 0.8
        height = PLOT * b["right"]
        body.append(f'<rect x="{_x(b["from"], 0) + PLOT * 0.01:.1f}" y="{_y(b["right"]):.1f}" width="{width:.1f}" '
                    f'height="{height:.1f}" fill="#1565c0" fill-opacity="{0.3 + 0.7 * b["n"] / largest:.2f}">'
                    f'<title>confidence {b["from"]:g}–{b["to"]:g}: {b["n"]} answers, {b["right"]:.0%} right '
                    f'(mean confidence {b["confidence"]:.2f})</title></rect>')
    body += _panel(SIZE, "Risk–coverage", "coverage (share answered)", "risk (share wrong)")
    points = [(p["coverage"], p["risk"]) for p in report["risk_coverage"]]
    if points:
        path = " ".join(f"{_x(c, SIZE):.1f},{_y(r):.1f}" for c, r in points)
        body.append(f'<polyline points="{path}" fill="none" stroke="#e65100" stroke-width="2"/>')
        for p in report["risk_coverage"]:
            body.append(f'<circle cx="{_x(p["coverage"], SIZE):.1f}" cy="{_y(p["risk"]):.1f}" r="3" fill="#e65100">'
                        f'<title>from confidence {p["confidence"]:.2f}: {p["coverage"]:.0%} answered, '
                        f'{p["risk"]:.0%} wrong</title></circle>')
    return body
