"""Inline SVG charts for HTML reports, generated in Python: no JavaScript, no CDN, printable, archivable.

Three shapes cover the drill report: a line chart over time (with event markers), grouped horizontal
bars (one row per item, one bar per measure) and a timeline of intervals (steps). Every text is
escaped; every number is rounded, so the output is stable for a given input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Sequence

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
STATUS_COLORS = {"ok": "#2ca02c", "noop": "#9ecae1", "planned": "#c7c7c7", "refused": "#ff7f0e", "error": "#d62728"}
FONT = 'font-family="system-ui, sans-serif" font-size="11"'


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]  # (x, y)
    color: str | None = None


@dataclass
class Marker:
    x: float
    label: str


@dataclass
class Bar:
    label: str
    values: list[float | None]
    notes: list[str] = field(default_factory=list)  # shown after the bars (e.g. "re-read 0")


def _n(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    return [round(start + i * step, 10) for i in range(int(math.ceil((hi - start) / step)) + 1)]


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
            + "".join(body) + "</svg>")


def line_chart(series: list[Series], *, title: str, x_label: str, y_label: str, markers: Sequence[Marker] = (),
               width: int = 760, height: int = 260) -> str:
    left, right, top, bottom = 56, 16, 44, 40
    xs = [x for s in series for x, _ in s.points] + [m.x for m in markers]
    ys = [y for s in series for _, y in s.points]
    if not xs:
        return _svg(width, 60, [f'<text x="10" y="30" {FONT}>{escape(title)}: no data</text>'], title)
    xt, yt = nice_ticks(min(xs), max(xs)), nice_ticks(0, max(ys, default=1) or 1)
    x0, x1, y1 = xt[0], xt[-1], yt[-1]
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1) * pw

    def py(y: float) -> float:
        return top + ph - y / (y1 or 1) * ph

    body = [f'<text x="10" y="16" {FONT} font-weight="bold">{escape(title)}</text>']
    for t in yt:
        body.append(f'<line x1="{left}" x2="{width - right}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#eee"/>'
                    f'<text x="{left - 6}" y="{py(t) + 4:.1f}" {FONT} text-anchor="end">{_n(t)}</text>')
    for t in xt:
        body.append(f'<text x="{px(t):.1f}" y="{top + ph + 16}" {FONT} text-anchor="middle">{_n(t)}</text>')
    body.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}" stroke="#999"/>'
                f'<line x1="{left}" x2="{width - right}" y1="{top + ph}" y2="{top + ph}" stroke="#999"/>'
                f'<text x="{left + pw / 2:.1f}" y="{height - 6}" {FONT} text-anchor="middle">{escape(x_label)}</text>'
                f'<text x="12" y="{top + ph / 2:.1f}" {FONT} text-anchor="middle" '
                f'transform="rotate(-90 12 {top + ph / 2:.1f})">{escape(y_label)}</text>')
    for m in markers:
        x = px(m.x)
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="#555" stroke-dasharray="4 3"/>'
                    f'<text x="{x + 3:.1f}" y="{top + ph - 4}" {FONT}>{escape(m.label)}</text>')
    for i, s in enumerate(series):
        color = s.color or PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(s.points))
        if pts:
            body.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{pts}"/>')
        lx = width - right - (len(series) - i) * 190
        body.append(f'<rect x="{lx}" y="{top - 12}" width="10" height="3" fill="{color}"/>'
                    f'<text x="{lx + 14}" y="{top - 7}" {FONT}>{escape(s.name)}</text>')
    return _svg(width, height, body, title)


def _text_width(text: str) -> float:
    return len(text) * 6.2  # 11px system-ui, roughly


def bar_chart(bars: list[Bar], measures: list[str], *, title: str, width: int = 980, row: int = 16) -> str:
    """One row per bar label, one bar per measure (None: no bar), values to a common scale."""
    left = min(max((_text_width(b.label) for b in bars), default=60) + 16, width * 0.4)
    notes_w = max((_text_width(", ".join(b.notes)) for b in bars), default=0) + 12
    top = 40
    height = top + len(bars) * (row * len(measures) + 8) + 10
    vmax = max((v for b in bars for v in b.values if v is not None), default=1) or 1
    pw = width - left - notes_w - 50
    body = [f'<text x="10" y="16" {FONT} font-weight="bold">{escape(title)}</text>']
    for i, name in enumerate(measures):
        body.append(f'<rect x="{left + i * 260:.1f}" y="22" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
                    f'<text x="{left + 14 + i * 260:.1f}" y="31" {FONT}>{escape(name)}</text>')
    y = top
    for b in bars:
        mid = y + row * len(measures) / 2 + 4
        body.append(f'<text x="{left - 6:.1f}" y="{mid:.1f}" {FONT} text-anchor="end">{escape(b.label)}</text>')
        for i, v in enumerate(b.values):
            if v is not None:
                w = max(v / vmax * pw, 1.0)
                by = y + i * row
                body.append(f'<rect x="{left:.1f}" y="{by + 1}" width="{w:.1f}" height="{row - 3}" '
                            f'fill="{PALETTE[i % len(PALETTE)]}"/>'
                            f'<text x="{left + w + 4:.1f}" y="{by + row - 4}" {FONT}>{_n(v)}</text>')
        if b.notes:
            body.append(f'<text x="{width - notes_w:.1f}" y="{mid:.1f}" {FONT}>{escape(", ".join(b.notes))}</text>')
        y += row * len(measures) + 8
    return _svg(width, height, body, title)


def timeline(rows: list[tuple[str, float, float, str]], *, title: str, x_label: str = "seconds since start",
             width: int = 760, row: int = 18) -> str:
    """Intervals (label, start, end, status) on one time axis, in the given order."""
    left, right, top = 200, 70, 30
    height = top + len(rows) * row + 34
    xt = nice_ticks(min((r[1] for r in rows), default=0), max((r[2] for r in rows), default=1))
    x0, x1 = xt[0], xt[-1]
    pw = width - left - right

    def px(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1) * pw

    body = [f'<text x="10" y="16" {FONT} font-weight="bold">{escape(title)}</text>']
    bottom = top + len(rows) * row
    for t in xt:
        body.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{top}" y2="{bottom}" stroke="#eee"/>'
                    f'<text x="{px(t):.1f}" y="{bottom + 14}" {FONT} text-anchor="middle">{_n(t)}</text>')
    for i, (label, start, end, status) in enumerate(rows):
        y = top + i * row
        w = max(px(end) - px(start), 1.5)
        body.append(f'<text x="{left - 6}" y="{y + row - 5}" {FONT} text-anchor="end">{escape(label)}</text>'
                    f'<rect x="{px(start):.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" '
                    f'fill="{STATUS_COLORS.get(status, "#1f77b4")}">'
                    f'<title>{escape(f"{label}: {end - start:.2f}s, {status}")}</title></rect>'
                    f'<text x="{px(start) + w + 4:.1f}" y="{y + row - 5}" {FONT}>{end - start:.2f}s</text>')
    body.append(f'<text x="{left + pw / 2:.1f}" y="{height - 4}" {FONT} text-anchor="middle">{escape(x_label)}</text>')
    return _svg(width, height, body, title)
