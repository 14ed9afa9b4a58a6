"""The cost histogram (studio/charts.histogram): mark labels read the real value in
full, stay inside the drawing and off each other; counts are whole numbers; the drawing
fills its box (the browser test tests/e2e/test_first_run.py measures it in Chromium)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from studio import charts
from studio.evals.views.common import usd

NS = "{http://www.w3.org/2000/svg}"
COSTS = [0.000135, 0.000136, 0.000129, 0.000124, 0.000168, 0.000131, 0.000155, 0.000128, 0.000231]


def _marks(svg: str) -> list[ET.Element]:
    return [t for t in ET.fromstring(svg).iter(f"{NS}text") if t.get("class") == "mark"]


def test_it_labels_each_mark_with_its_real_value() -> None:
    svg = charts.histogram(COSTS, label="cost", fmt=usd, marks=[("p50", 0.0001317), ("p95", 0.00023085)])
    assert [t.text for t in _marks(svg)] == ["p50 $0.000132", "p95 $0.000231"]


def test_it_turns_a_label_at_the_right_edge_back_into_the_drawing() -> None:
    svg = charts.histogram(COSTS, label="cost", fmt=usd, marks=[("p50", 0.0001317), ("p95", 0.000231)])
    width = float(ET.fromstring(svg).get("width", 0))
    p50, p95 = _marks(svg)
    assert p50.get("text-anchor") == "start"
    assert p95.get("text-anchor") == "end" and float(p95.get("x", 0)) < width
    assert float(p95.get("x", 0)) - charts._text_width(p95.text or "", bold=True) > 0


def test_it_puts_labels_that_would_overlap_on_rows_of_their_own() -> None:
    svg = charts.histogram([0.5] * 4, label="same", fmt=usd, marks=[("p50", 0.5), ("p95", 0.5)])
    p50, p95 = _marks(svg)
    assert p50.get("y") != p95.get("y")
    apart = charts.histogram(COSTS, label="cost", fmt=usd, marks=[("p50", 0.000124), ("p95", 0.000231)])
    assert len({t.get("y") for t in _marks(apart)}) == 1  # room on one row: one row


def test_it_counts_in_whole_numbers() -> None:
    svg = charts.histogram([0.1, 0.9], label="two", bins=4)
    ticks = [t.text for t in ET.fromstring(svg).iter(f"{NS}text") if t.get("x") == "50"]  # the y axis
    assert ticks == ["0", "1"]


def test_it_is_drawn_wide_and_scaled_to_its_box() -> None:
    root = ET.fromstring(charts.histogram(COSTS, label="cost", fmt=usd))
    assert root.get("class") == "chart wide" and float(root.get("width", 0)) >= 1200
