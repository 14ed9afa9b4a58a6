"""The one graph renderer: the layout (studio/projects/graph_svg.py) and its template, for the
overview and the blame and coverage pages."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from django.conf import settings
from django.template.loader import render_to_string

from runtime import drawing_for, load_pack
from studio.projects.graph_svg import draw, heat_colour, layers


def example(name: str) -> object:
    return load_pack(Path(settings.EXAMPLE_PACKS) / name)


def test_it_lays_nodes_out_in_layers_from_the_entry() -> None:
    rows = layers(example("support_triage"))  # type: ignore[arg-type]
    assert rows[0] == ["classify"]
    assert set(rows[1]) == {"extract", "manual_triage"}
    assert rows[2:4] == [["sentiment"], ["prioritise"]]
    assert set(rows[4]) == {"billing_ops", "tech_support", "account_team", "general"}


def test_it_draws_every_node_and_edge_inside_the_picture() -> None:
    pack = example("refund_desk")
    drawing = draw(pack)  # type: ignore[arg-type]
    assert {n.id for n in drawing.nodes} == set(pack.nodes)  # type: ignore[attr-defined]
    assert len(drawing.edges) == len(pack.edges)  # type: ignore[attr-defined]
    for n in drawing.nodes:
        assert n.x >= 0 and n.right <= drawing.width and n.y >= 0 and n.bottom <= drawing.height
    for e in drawing.edges:
        assert 0 <= e.label_x <= drawing.width and 0 <= e.label_y <= drawing.height


def retry_loop_pack(root: Path) -> object:
    """draft -> check; check fails back to draft (an edge up the graph) or ends."""
    (root / "prompts").mkdir(parents=True)
    (root / "grammars").mkdir()
    (root / "manifest.yaml").write_text("name: loop\nversion: 1\nentry: draft\ninputs: [text]\n")
    (root / "graph.yaml").write_text(
        "nodes:\n"
        "  draft: {kind: generate, reads: [input.text], writes: [n]}\n"
        "  check: {kind: assert, reads: [n], expr: 'n > 0'}\n"
        "  done: {kind: end}\n"
        "edges:\n"
        "  - {from: draft, to: check}\n"
        "  - {from: check, to: done}\n"
        "  - {from: check, on_fail: draft}\n"
    )
    (root / "prompts/draft.txt").write_text("Count {{ input.text }}\n")
    (root / "grammars/draft.json").write_text(
        '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    )
    return load_pack(root)


def test_it_routes_edges_back_up_the_graph_around_the_right_side(tmp_path: Path) -> None:
    drawing = draw(retry_loop_pack(tmp_path))  # type: ignore[arg-type]
    nodes = {n.id: n for n in drawing.nodes}
    assert nodes["draft"].y < nodes["check"].y < nodes["done"].y
    back = next(e for e in drawing.edges if e.source == "check" and e.target == "draft")
    assert back.kind == "on_fail" and back.dashed
    assert back.d.startswith(f"M{nodes['check'].right:g},")
    assert back.label_x > nodes["check"].right


def test_it_routes_edges_along_a_layer_below_it() -> None:
    drawing = draw(example("refund_desk"))  # type: ignore[arg-type]
    nodes = {n.id: n for n in drawing.nodes}
    assert nodes["review"].y == nodes["check_amount"].y
    along = next(e for e in drawing.edges if e.source == "review" and e.target == "check_amount")
    assert along.label_y > nodes["review"].bottom or along.label == ""
    assert f",{nodes['review'].bottom:g} C" in along.d


def test_it_labels_edges_and_dashes_the_failure_ones() -> None:
    drawing = draw(example("moderation"))  # type: ignore[arg-type]
    kinds = {(e.source, e.target, e.kind): e for e in drawing.edges}
    assert kinds[("judge", "hold", "on_unsure")].dashed and kinds[("judge", "hold", "on_fail")].dashed
    assert kinds[("judge", "hold", "on_unsure")].d != kinds[("judge", "hold", "on_fail")].d  # drawn apart
    assert kinds[("screen", "publish", "next")].label == "risk == 'none'"
    assert not kinds[("screen", "judge", "next")].dashed


def test_it_shortens_long_labels() -> None:
    drawing = draw(example("refund_desk"))  # type: ignore[arg-type]
    long = next(e for e in drawing.edges if e.label == "intent == 'refund' and order_id != null")
    assert long.short_label.endswith("…") and len(long.short_label) <= 26


EVIL = '<script>alert("x")</script>&'


def _svg(drawing: object) -> ET.Element:
    text = render_to_string("projects/_graph_svg.html", {"drawing": drawing})
    assert "<script>" not in text
    return ET.fromstring(text)  # well-formed XML: nothing unescaped slipped in


def test_it_takes_each_kinds_outline_and_caption_from_the_runtime() -> None:
    pack = example("support_triage")
    drawing = draw(pack)  # type: ignore[arg-type]
    for n in drawing.nodes:
        assert (n.shape, n.css_class, n.caption) == (
            drawing_for(n.kind).shape,
            drawing_for(n.kind).css_class,
            drawing_for(n.kind).label,
        )


def test_it_fills_nodes_by_blame_and_marks_untaken_edges_by_their_pack_index() -> None:
    pack = example("support_triage")
    counts = {0: 10, 2: 10, 3: 10, 4: 10}
    drawing = draw(pack, label=EVIL, shares={"classify": 1.0}, notes={"classify": EVIL}, edge_counts=counts, runs=10)  # type: ignore[arg-type]
    classify = next(n for n in drawing.nodes if n.id == "classify")
    assert classify.fill == heat_colour(1.0) and classify.on_dark and classify.caption == EVIL
    assert {e.index for e in drawing.edges if e.untaken} == {1, 5, 6, 7}
    assert next(e for e in drawing.edges if e.index == 0).width > next(e for e in drawing.edges if e.index == 1).width
    root = _svg(drawing)
    ns = "{http://www.w3.org/2000/svg}"
    untaken = [g for g in root.iter(f"{ns}g") if "untaken" in (g.get("class") or "").split()]
    assert sorted(int(g.get("data-edge", "-1")) for g in untaken) == [1, 5, 6, 7]
    node = next(g for g in root.iter(f"{ns}g") if g.get("data-node") == "classify")
    assert node.get("fill") == heat_colour(1.0) and node.get("class") == "node heat"


def test_it_runs_heat_from_pale_to_dark() -> None:
    assert heat_colour(0.0) == "#f8f9fb"
    assert heat_colour(1.0) == "#911812"
    assert heat_colour(2.0) == heat_colour(1.0)
