"""studio/charts.py: SVG that reads without JavaScript and escapes every label."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from studio import charts

EVIL = '<script>alert("x")</script>&'


def _parses(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML: nothing unescaped slipped in


def test_it_escapes_every_label_in_a_histogram() -> None:
    svg = charts.histogram([0.1, 0.2, 0.2, 0.9], label=EVIL, fmt=lambda v: f"{EVIL}{v:.1f}", marks=[(EVIL, 0.2)])
    assert "<script>" not in svg
    assert _parses(svg).tag.endswith("svg")
    assert svg.count('<g class="bin">') == 20


def test_it_draws_one_bar_in_the_middle_when_every_value_is_equal() -> None:
    svg = charts.histogram([0.5] * 7, label="same", marks=[("p50", 0.5)])
    drawn = [r for r in _parses(svg).iter("{http://www.w3.org/2000/svg}rect") if float(r.get("height", 0)) > 0]
    assert len(drawn) == 1
    assert "7 runs" in svg and "p50 0.5" in svg
    middle = float(drawn[0].get("x", 0)) + float(drawn[0].get("width", 0)) / 2
    assert abs(middle - float(_parses(svg).get("width", 0)) / 2) < 20
    assert "no scored runs yet" in charts.histogram([], label="empty")


def test_it_escapes_bar_and_plot_labels() -> None:
    bars = charts.hbars([charts.Bar(EVIL, 3, EVIL, href='/x?a=1&b="2"')], label=EVIL)
    plot = charts.line_plot(
        [EVIL, "v2"],
        [(EVIL, [charts.Point(0, 0.5, EVIL, "/e/1?x=<y>", 0.2, 0.8), charts.Point(1, 0.7, "ok")])],
        label=EVIL,
        y_label=EVIL,
        y_max=1.0,
    )
    for svg in (bars, plot):
        assert "<script>" not in svg
        _parses(svg)
    assert "<polyline" in plot
