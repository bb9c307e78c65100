"""Inline SVG charts, by hand (no plotting dependency): time lanes and line charts
sharing one time axis, with shaded bands (partitions) and event markers. Pure
Python; every string that comes from data is escaped."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f", "#bab0ac",
           "#e15759", "#8cd17d", "#499894", "#d37295", "#a0cbe8", "#ffbe7d", "#86bcb6"]  # fmt: skip
HEALTHY = "#59a14f"
SIDES = ["#f28e2b", "#4e79a7", "#b07aa1", "#9c755f", "#edc948", "#76b7b2", "#ff9da7", "#bab0ac"]  # no green
ALARM = "#d62728"
SILENT = "#c7c7c7"
BAND = "rgba(214,39,40,0.10)"
NOTICE_BAND = "rgba(237,160,40,0.18)"  # amber: worth a look, not wrong (a mixed-version window)
EVENT = "#1f5fa8"  # a marker for an event that is not a fault (a feature flag enabled)
FONT = 'font-family="system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif" font-size="11"'

_STEPS_MS = [1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000,
             3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000, 172_800_000, 604_800_000]  # fmt: skip


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def side_color(i: int) -> str:
    """The colour of the i-th side of a partition (never the healthy green)."""
    return SIDES[i % len(SIDES)]


def fmt_time(ms: int, step_ms: int = 1000, span_ms: int = 0) -> str:
    t = time.gmtime(ms / 1000)
    if span_ms > 86_400_000:
        return time.strftime("%m-%d %H:%M", t)
    return time.strftime("%H:%M:%S" if step_ms < 60_000 else "%H:%M", t)


def fmt_num(v: float | None) -> str:
    if v is None:
        return "–"
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suffix}"
    if a >= 100 or float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.3g}"


def fmt_duration(ms: int | float) -> str:
    s = ms / 1000
    if s < 120:
        return f"{s:g} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def time_ticks(t0: int, t1: int, max_ticks: int = 8) -> tuple[list[int], int]:
    span = max(1, t1 - t0)
    step = next((s for s in _STEPS_MS if span / s <= max_ticks), _STEPS_MS[-1])
    first = -(-t0 // step) * step
    return list(range(first, t1 + 1, step)), step


def nice_max(v: float) -> tuple[float, float]:
    """(axis top, tick step) for values up to v."""
    if v <= 0:
        return 1.0, 0.25
    raw = v / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return step * math.ceil(v / step), step


@dataclass
class Frame:
    """A plot area mapping [t0, t1] onto the x axis."""

    t0: int
    t1: int
    width: int = 980
    left: int = 130
    right: int = 12
    bands: Sequence[tuple[int, int, str]] = ()  # (start, end, title): shaded
    markers: Sequence[tuple[int, str]] = ()  # (time, title): a red tick line
    band_fill: str = BAND
    marker_stroke: str = ALARM

    def x(self, t: float) -> float:
        span = max(1, self.t1 - self.t0)
        return self.left + (t - self.t0) / span * (self.width - self.left - self.right)

    def axis(self, y: float) -> str:
        ticks, step = time_ticks(self.t0, self.t1)
        out = [f'<line x1="{self.left}" y1="{y}" x2="{self.width - self.right}" y2="{y}" stroke="#999"/>']
        for t in ticks:
            x = self.x(t)
            out.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#999"/>')
            out.append(f'<text x="{x:.1f}" y="{y + 15}" text-anchor="middle" fill="#555">'
                       f'{escape(fmt_time(t, step, self.t1 - self.t0))}</text>')  # fmt: skip
        return "".join(out)

    def overlays(self, top: float, bottom: float) -> str:
        out = []
        for s, e, title in self.bands:
            x0, x1 = self.x(max(s, self.t0)), self.x(min(e, self.t1))
            out.append(f'<rect x="{x0:.1f}" y="{top}" width="{max(1.0, x1 - x0):.1f}" height="{bottom - top}" '
                       f'fill="{self.band_fill}"><title>{escape(title)}</title></rect>')  # fmt: skip
        for t, title in self.markers:
            x = self.x(t)
            out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="{self.marker_stroke}" '
                       f'stroke-width="1.5" stroke-dasharray="3,2"><title>{escape(title)}</title></line>')  # fmt: skip
        return "".join(out)


@dataclass
class Segment:
    start: int
    end: int
    color: str
    title: str = ""
    hatched: bool = False


@dataclass
class Lane:
    label: str
    segments: list[Segment] = field(default_factory=list)


_HATCH = ('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
          f'<rect width="6" height="6" fill="#fff"/><line x1="0" y1="0" x2="0" y2="6" stroke="{ALARM}" '
          'stroke-width="2.5"/></pattern></defs>')  # fmt: skip


def timeline(frame: Frame, lanes: Sequence[Lane], lane_height: int = 18, title: str = "") -> str:
    """One horizontal lane per entry, its segments as coloured bars (hatched red: alarm)."""
    top = 22 if title else 6
    h = top + len(lanes) * (lane_height + 4) + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{frame.width}" height="{h}" {FONT} role="img">', _HATCH]
    if title:
        out.append(f'<text x="4" y="14" font-weight="600">{escape(title)}</text>')
    bottom = top + len(lanes) * (lane_height + 4)
    for i, lane in enumerate(lanes):
        y = top + i * (lane_height + 4)
        out.append(f'<text x="{frame.left - 6}" y="{y + lane_height - 5}" text-anchor="end">'
                   f'{escape(_clip(lane.label, 22))}<title>{escape(lane.label)}</title></text>')  # fmt: skip
        out.append(f'<rect x="{frame.left}" y="{y}" width="{frame.width - frame.left - frame.right}" '
                   f'height="{lane_height}" fill="#f4f4f4"/>')  # fmt: skip
        for s in lane.segments:
            if s.end <= frame.t0 or s.start >= frame.t1:
                continue
            x0, x1 = frame.x(max(s.start, frame.t0)), frame.x(min(s.end, frame.t1))
            fill = "url(#hatch)" if s.hatched else s.color
            out.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(0.8, x1 - x0):.1f}" height="{lane_height}" '
                       f'fill="{fill}"><title>{escape(s.title)}</title></rect>')  # fmt: skip
    out.append(frame.overlays(top, bottom))
    out.append(frame.axis(bottom + 2))
    out.append("</svg>")
    return "".join(out)


@dataclass
class Series:
    label: str
    color: str
    points: list[tuple[int, float | None]]


def line_chart(frame: Frame, series: Sequence[Series], height: int = 170, title: str = "", unit: str = "",
               gap_ms: int | None = None) -> str:  # fmt: skip
    """Lines over time; a None value, or two points further apart than `gap_ms`, break a line."""
    top = 24  # room for the title and the legend
    bottom = height - 24
    vmax = max((v for s in series for _, v in s.points if v is not None), default=0.0)
    ymax, ystep = nice_max(vmax)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{frame.width}" height="{height}" {FONT} role="img">']
    if title:
        out.append(f'<text x="4" y="14" font-weight="600">{escape(title)}</text>')
    lx = frame.left + 8
    for s in series:  # the legend, top right of the title
        out.append(f'<rect x="{lx + 200}" y="5" width="10" height="10" fill="{s.color}"/>'
                   f'<text x="{lx + 214}" y="14">{escape(s.label)}</text>')  # fmt: skip
        lx += 24 + 7 * len(s.label) + 10

    def y(v: float) -> float:
        return bottom - (v / ymax) * (bottom - top)

    k = 0.0
    while k <= ymax + 1e-9:
        yy = y(k)
        out.append(f'<line x1="{frame.left}" y1="{yy:.1f}" x2="{frame.width - frame.right}" y2="{yy:.1f}" '
                   f'stroke="#eee"/><text x="{frame.left - 6}" y="{yy + 4:.1f}" text-anchor="end" fill="#555">'
                   f'{escape(fmt_num(k))}{escape(unit) if k == 0 else ""}</text>')  # fmt: skip
        k += ystep
    out.append(frame.overlays(top, bottom))
    for s in series:
        for run in _runs(s.points, gap_ms):
            if len(run) == 1:
                t, v = run[0]
                out.append(f'<circle cx="{frame.x(t):.1f}" cy="{y(v):.1f}" r="1.8" fill="{s.color}"/>')
                continue
            pts = " ".join(f"{frame.x(t):.1f},{y(v):.1f}" for t, v in run)
            out.append(f'<polyline points="{pts}" fill="none" stroke="{s.color}" stroke-width="1.4"/>')
    out.append(frame.axis(bottom))
    out.append("</svg>")
    return "".join(out)


def _runs(points: list[tuple[int, float | None]], gap_ms: int | None) -> list[list[tuple[int, float]]]:
    runs: list[list[tuple[int, float]]] = []
    cur: list[tuple[int, float]] = []
    last_t = None
    for t, v in sorted(points, key=lambda p: p[0]):
        if v is None or (gap_ms is not None and last_t is not None and t - last_t > gap_ms):
            if cur:
                runs.append(cur)
            cur = []
        if v is not None:
            cur.append((t, float(v)))
        last_t = t
    if cur:
        runs.append(cur)
    return runs


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"
