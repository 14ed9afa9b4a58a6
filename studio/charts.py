"""Server-side SVG charts for the result pages (bars, histograms, line plots; the pack's graph is
studio/projects/graph_svg.py, drawn by one template): readable with JavaScript off, printable,
and nothing fetched from elsewhere.

Every piece of text that reaches the markup (node ids, `when` sources, model names,
case ids, numbers) goes through `escape`, in one place (`Svg.text` / `Svg.title` /
`_attrs`); the finished SVG is marked safe only after that."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

__all__ = ["PALETTE", "Bar", "Mark", "Point", "hbars", "histogram", "line_plot", "tradeoff"]

PALETTE = ("#2f5bea", "#dc6803", "#067647", "#9e77ed", "#c11574", "#0e9384", "#475467")
INK, MUTED, GRID, AXIS = "#1d2330", "#667085", "#eaecf0", "#98a2b3"
FONT = 'font-family="system-ui, -apple-system, Segoe UI, sans-serif"'
MONO = "ui-monospace, Menlo, Consolas, monospace"


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def _attrs(attrs: dict[str, Any]) -> str:
    return "".join(
        f' {k.rstrip("_").replace("_", "-")}="{escape(_num(v) if isinstance(v, float) else v)}"'
        for k, v in attrs.items()
        if v is not None
    )


class Svg:
    def __init__(self, width: float, height: float, *, label: str, css_class: str = "chart") -> None:
        self.width, self.height = width, height
        self.parts: list[str] = []
        self.label = label
        self.css_class = css_class

    def add(self, tag: str, content: str = "", **attrs: Any) -> None:
        self.parts.append(f"<{tag}{_attrs(attrs)}>{content}</{tag}>" if content else f"<{tag}{_attrs(attrs)}/>")

    def text(self, x: float, y: float, label: object, *, tip: object = None, **attrs: Any) -> None:
        title = f"<title>{escape(tip)}</title>" if tip is not None else ""
        self.parts.append(f"<text{_attrs({'x': x, 'y': y, **attrs})}>{title}{escape(label)}</text>")

    @staticmethod
    def title(label: object) -> str:
        return f"<title>{escape(label)}</title>"

    def open(self, tag: str, **attrs: Any) -> None:
        self.parts.append(f"<{tag}{_attrs(attrs)}>")

    def close(self, tag: str) -> None:
        self.parts.append(f"</{tag}>")

    def render(self) -> SafeString:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="{escape(self.css_class)}" role="img" '
            f'width="{_num(float(self.width))}" height="{_num(float(self.height))}" '
            f'viewBox="0 0 {_num(float(self.width))} {_num(float(self.height))}" {FONT} font-size="12">'
            f"<title>{escape(self.label)}</title>"
        )
        return mark_safe(head + "".join(self.parts) + "</svg>")


def _nice_ticks(hi: float, count: int = 4) -> list[float]:
    """Round tick values from 0 to at least `hi`."""
    if hi <= 0:
        return [0.0, 1.0]
    raw = hi / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(math.ceil(hi / step - 1e-9) + 1)]


# -- histogram ----------------------------------------------------------------------------


def _text_width(text: str, *, size: float = 12, bold: bool = False) -> float:
    """A generous estimate of `text`'s width in the system-ui font at `size` px (no font
    metrics on the server): enough that a label placed by it is never cut at the edge."""
    return len(text) * size * (0.62 if bold else 0.58)


def _place_labels(spans: Sequence[tuple[float, float]], gap: float = 8) -> list[int]:
    """The row (0, 1, ...) of each label span (x0, x1): the first row where it overlaps no
    label already placed there."""
    rows: list[list[tuple[float, float]]] = []
    placed = []
    for x0, x1 in spans:
        for i, row in enumerate(rows):
            if all(x1 + gap <= a or x0 >= b + gap for a, b in row):
                row.append((x0, x1))
                placed.append(i)
                break
        else:
            rows.append([(x0, x1)])
            placed.append(len(rows) - 1)
    return placed


def histogram(
    values: Sequence[float],
    *,
    label: str,
    fmt: Callable[[float], str] = _num,
    bins: int = 20,
    marks: Sequence[tuple[str, float]] = (),
    width: int = 1280,
    height: int = 260,
    unit: str = "runs",
) -> SafeString:
    """Counts of `values` in equal-width bins, with optional vertical marks (p50, p95).

    Drawn `width` wide and scaled by the page to its box (class `wide`). Each mark's label
    reads `name value` in full (`fmt`): placed right of its line, or left of it where it
    would pass the edge, and on a row of its own where it would overlap another."""
    left, right, bottom = 56, 24, 44
    row_h = 15
    svg = Svg(width, height, label=label, css_class="chart wide")
    if not values:
        svg.text(width / 2, height / 2, "no scored runs yet", text_anchor="middle", fill=MUTED)
        return svg.render()
    lo, hi = min(values), max(values)
    if hi - lo < 1e-15:
        # One value: a bar in the middle of an axis from half of it to half as much again.
        half = abs(lo) / 2 or 1.0
        bins, lo, hi = 21, lo - half, hi + half
    plot_w = width - left - right

    def x_of(value: float) -> float:
        return left + plot_w * (value - lo) / (hi - lo)

    # Mark labels first: how many rows they take decides where the plot starts.
    labels = []
    for k, (name, value) in enumerate(marks):
        text, x = f"{name} {fmt(value)}", x_of(value)
        w = _text_width(text, bold=True)
        anchor = "end" if x + 4 + w > width - 2 else "start"
        x0, x1 = (x - 4 - w, x - 4) if anchor == "end" else (x + 4, x + 4 + w)
        labels.append((k, text, x, anchor, x0, x1))
    rows = _place_labels([(x0, x1) for *_, x0, x1 in labels])
    top = 14 + row_h * max([*rows, 0]) + 18
    plot_h = height - top - bottom

    step = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / step))] += 1
    ticks = [t for t in _nice_ticks(max(counts)) if t == int(t)]  # counts: whole numbers
    ymax = ticks[-1]
    for t in ticks:
        y = top + plot_h - plot_h * t / ymax
        svg.add("line", x1=left, x2=left + plot_w, y1=y, y2=y, stroke=GRID)
        svg.text(left - 6, y + 4, int(t), text_anchor="end", fill=MUTED)
    bar_w = plot_w / bins
    for i, n in enumerate(counts):
        h = plot_h * n / ymax
        x0, x1 = lo + i * step, lo + (i + 1) * step
        svg.open("g", class_="bin")
        svg.add(
            "rect",
            Svg.title(f"{fmt(x0)} – {fmt(x1)}: {n} {unit}"),
            x=left + i * bar_w + 1,
            y=top + plot_h - h,
            width=max(bar_w - 2, 1),
            height=max(h, 0),
            fill="#2f5bea",
        )
        svg.close("g")
    svg.add("line", x1=left, x2=left + plot_w, y1=top + plot_h, y2=top + plot_h, stroke=AXIS)
    for i in range(0, bins + 1, max(1, bins // 5)):
        x = left + i * bar_w
        svg.add("line", x1=x, x2=x, y1=top + plot_h, y2=top + plot_h + 4, stroke=AXIS)
        anchor = "start" if i == 0 else "end" if i == bins else "middle"
        svg.text(x, top + plot_h + 17, fmt(lo + i * step), text_anchor=anchor, fill=MUTED)
    for (k, text, x, anchor, _, _), row in zip(labels, rows, strict=True):
        colour = PALETTE[(k + 1) % len(PALETTE)]
        y = 14 + row_h * row
        svg.add("line", x1=x, x2=x, y1=y - 10, y2=top + plot_h, stroke=colour, stroke_dasharray="4 3", stroke_width=1.5)
        svg.text(
            x + (4 if anchor == "start" else -4),
            y,
            text,
            fill=colour,
            font_weight="600",
            text_anchor=anchor,
            class_="mark",
        )
    svg.text(left - 44, top - 12, unit, fill=MUTED)
    svg.text(left + plot_w / 2, height - 6, label, text_anchor="middle", fill=INK)
    return svg.render()


# -- horizontal bars ----------------------------------------------------------------------


@dataclass
class Bar:
    label: str
    value: float
    text: str = ""  # shown after the bar
    colour: str = "#2f5bea"
    href: str | None = None


def hbars(bars: Sequence[Bar], *, label: str, max_value: float | None = None, width: int = 560) -> SafeString:
    """One labelled horizontal bar per row (failures per node, runs per tier)."""
    row_h, left, right, top = 24, 150, 150, 8
    height = top * 2 + row_h * max(len(bars), 1)
    svg = Svg(width, height, label=label)
    top_value = max_value if max_value else max((b.value for b in bars), default=0) or 1
    plot_w = width - left - right
    for i, b in enumerate(bars):
        y = top + i * row_h
        name = b.label if len(b.label) <= 20 else b.label[:19] + "…"
        svg.text(left - 8, y + 16, name, tip=b.label, text_anchor="end", fill=INK)
        w = plot_w * max(b.value, 0) / top_value
        svg.add("rect", x=left, y=y + 5, width=plot_w, height=row_h - 10, fill=GRID, rx=3)
        if b.href:
            svg.open("a", href=b.href)
        svg.add(
            "rect",
            Svg.title(f"{b.label}: {b.text or _num(b.value)}"),
            x=left,
            y=y + 5,
            width=max(w, 0),
            height=row_h - 10,
            fill=b.colour,
            rx=3,
        )
        if b.href:
            svg.close("a")
        svg.text(left + plot_w + 8, y + 16, b.text or _num(b.value), fill=MUTED)
    return svg.render()


# -- line plot ----------------------------------------------------------------------------


@dataclass
class Point:
    x: int  # index into the x labels
    y: float
    tip: str
    href: str | None = None
    low: float | None = None  # an interval drawn as a whisker
    high: float | None = None


def line_plot(
    x_labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[Point]]],
    *,
    label: str,
    y_label: str,
    fmt: Callable[[float], str] = _num,
    y_max: float | None = None,
    width: int = 760,
    height: int = 280,
    x_title: str = "pack version (oldest → newest)",
    empty: str = "no evals with scored runs yet",
) -> SafeString:
    """One line per series over categorical x (pack versions, oldest first; or time buckets)."""
    left, right, top = 64, 24, 28
    bottom = 64
    pad = 36  # keeps the first and last points (and their x labels) off the plot's edges
    legend_h = 18 * len(series)
    svg = Svg(width, height + legend_h, label=label)
    plot_w, plot_h = width - left - right, height - top - bottom
    highest = max((max(p.y, p.high or 0) for _, pts in series for p in pts), default=0.0)
    ticks = [i / 4 * y_max for i in range(5)] if y_max else _nice_ticks(highest or 1.0)
    ymax = ticks[-1] or 1.0

    def px(i: int) -> float:
        return left + (plot_w / 2 if len(x_labels) <= 1 else pad + (plot_w - 2 * pad) * i / (len(x_labels) - 1))

    def py(v: float) -> float:
        return top + plot_h - plot_h * v / ymax

    for t in ticks:
        svg.add("line", x1=left, x2=left + plot_w, y1=py(t), y2=py(t), stroke=GRID)
        svg.text(left - 6, py(t) + 4, fmt(t), text_anchor="end", fill=MUTED)
    svg.add("line", x1=left, x2=left + plot_w, y1=top + plot_h, y2=top + plot_h, stroke=AXIS)
    every = max(1, math.ceil(len(x_labels) / 12))
    for i, name in enumerate(x_labels):
        if i % every:
            continue
        svg.add("line", x1=px(i), x2=px(i), y1=top + plot_h, y2=top + plot_h + 4, stroke=AXIS)
        svg.text(px(i), top + plot_h + 18, name, text_anchor="middle", fill=MUTED, class_="mono")
    svg.text(12, top - 12, y_label, fill=INK, font_weight="600")
    svg.text(left + plot_w / 2, top + plot_h + 40, x_title, text_anchor="middle", fill=MUTED)
    if not any(pts for _, pts in series):
        svg.text(left + plot_w / 2, top + plot_h / 2, empty, text_anchor="middle", fill=MUTED)
    for k, (name, pts) in enumerate(series):
        colour = PALETTE[k % len(PALETTE)]
        ordered = sorted(pts, key=lambda p: p.x)
        if len(ordered) > 1:
            svg.add(
                "polyline",
                points=" ".join(f"{px(p.x):.1f},{py(p.y):.1f}" for p in ordered),
                fill="none",
                stroke=colour,
                stroke_width=2,
            )
        for p in ordered:
            if p.low is not None and p.high is not None:
                svg.add(
                    "line",
                    x1=px(p.x),
                    x2=px(p.x),
                    y1=py(p.low),
                    y2=py(p.high),
                    stroke=colour,
                    stroke_width=1,
                    opacity=0.6,
                )
            if p.href:
                svg.open("a", href=p.href)
            svg.add(
                "circle", Svg.title(p.tip), cx=px(p.x), cy=py(p.y), r=4.5, fill=colour, stroke="#fff", stroke_width=1.5
            )
            if p.href:
                svg.close("a")
        y = height + 18 * k + 4
        svg.add("line", x1=left, x2=left + 22, y1=y, y2=y, stroke=colour, stroke_width=3)
        svg.text(left + 28, y + 4, name, fill=INK)
    return svg.render()


# -- the auto tier's trade-off -------------------------------------------------------------


@dataclass
class Mark:
    """A point of a trade-off curve drawn large and named (the proposed threshold)."""

    name: str
    x: float
    y: float
    colour: str = "#dc6803"


def tradeoff(
    points: Sequence[tuple[float, float, str]],
    *,
    label: str,
    x_label: str,
    y_label: str,
    marks: Sequence[Mark] = (),
    target: float | None = None,
    width: int = 560,
    height: int = 300,
) -> SafeString:
    """A curve of (x, y, tip) points, both axes 0..1 shown as percentages (auto share
    against accuracy inside the auto tier), with named marks and a dashed target line."""
    left, right, top, bottom = 56, 24, 28, 48
    svg = Svg(width, height, label=label)
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + plot_w * min(max(v, 0.0), 1.0)

    def py(v: float) -> float:
        return top + plot_h - plot_h * min(max(v, 0.0), 1.0)

    for i in range(5):
        t = i / 4
        svg.add("line", x1=left, x2=left + plot_w, y1=py(t), y2=py(t), stroke=GRID)
        svg.text(left - 6, py(t) + 4, f"{100 * t:.0f}%", text_anchor="end", fill=MUTED)
        svg.add("line", x1=px(t), x2=px(t), y1=top + plot_h, y2=top + plot_h + 4, stroke=AXIS)
        svg.text(px(t), top + plot_h + 17, f"{100 * t:.0f}%", text_anchor="middle", fill=MUTED)
    svg.add("line", x1=left, x2=left + plot_w, y1=top + plot_h, y2=top + plot_h, stroke=AXIS)
    svg.add("line", x1=left, x2=left, y1=top, y2=top + plot_h, stroke=AXIS)
    svg.text(12, top - 12, y_label, fill=INK, font_weight="600")
    svg.text(left + plot_w / 2, height - 8, x_label, text_anchor="middle", fill=MUTED)
    if target is not None:
        svg.add("line", x1=left, x2=left + plot_w, y1=py(target), y2=py(target), stroke=MUTED, stroke_dasharray="4 3")
        svg.text(left + plot_w - 4, py(target) - 5, f"target {100 * target:.0f}%", text_anchor="end", fill=MUTED)
    ordered = sorted(points, key=lambda pt: pt[0])
    if len(ordered) > 1:
        svg.add(
            "polyline",
            points=" ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in ordered),
            fill="none",
            stroke=PALETTE[0],
            stroke_width=2,
            class_="curve",
        )
    for x, y, tip in ordered:
        svg.add("circle", Svg.title(tip), cx=px(x), cy=py(y), r=3, fill=PALETTE[0])
    for k, mark in enumerate(marks):
        svg.open("g", class_="mark")
        svg.add(
            "circle",
            Svg.title(mark.name),
            cx=px(mark.x),
            cy=py(mark.y),
            r=7,
            fill="none",
            stroke=mark.colour,
            stroke_width=2.5,
        )
        anchor = "end" if mark.x > 0.6 else "start"
        dx = -10 if anchor == "end" else 10
        svg.text(
            px(mark.x) + dx,
            py(mark.y) + 16 + 14 * k,
            mark.name,
            text_anchor=anchor,
            fill=mark.colour,
            font_weight="600",
        )
        svg.close("g")
    return svg.render()


# -- the graph, coloured -------------------------------------------------------------------
