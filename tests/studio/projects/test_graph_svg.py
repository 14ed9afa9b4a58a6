"""The one graph renderer: the layout (studio/projects/graph_svg.py) and its template, for the
overview and the blame and coverage pages."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from django.conf import settings
from django.template.loader import render_to_string

from runtime import drawing_for, load_pack
from studio.projects.graph_geometry import boxes_overlap, path_crosses_box, segment_crosses_box
from studio.projects.graph_layers import layers
from studio.projects.graph_svg import draw, heat_colour, layout_problems

EXAMPLES = ["support_triage", "refund_desk", "invoice_extract", "lead_qualifier", "moderation"]


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


def test_it_finds_a_segment_through_a_box_and_misses_one_beside_it() -> None:
    box = (10.0, 10.0, 20.0, 10.0)
    assert segment_crosses_box((0, 15), (40, 15), box)  # straight through
    assert segment_crosses_box((15, 0), (15, 12), box)  # ends inside
    assert not segment_crosses_box((0, 0), (40, 5), box)  # above it
    assert not segment_crosses_box((0, 30), (9, 0), box)  # left of it
    assert path_crosses_box([(0, 0), (20, 0), (20, 30)], box)
    assert boxes_overlap((0, 0, 10, 10), (9, 9, 5, 5)) and not boxes_overlap((0, 0, 10, 10), (10, 0, 5, 5))


def test_the_layout_check_catches_overlapping_labels_and_crossed_labels() -> None:
    drawing = draw(example("refund_desk"))  # type: ignore[arg-type]
    assert layout_problems(drawing) == []
    labelled = [e for e in drawing.edges if e.box]
    labelled[0].box = labelled[1].box  # broken on purpose: two labels in one place
    assert any("overlap" in p for p in layout_problems(drawing))
    other = next(e for e in drawing.edges if e is not labelled[0])
    x, y = other.points()[len(other.points()) // 2]
    labelled[0].box = (x - 5, y - 5, 10, 10)  # broken on purpose: a label on another edge
    assert any("crosses the label" in p for p in layout_problems(drawing))


def test_no_label_overlaps_another_or_crosses_an_edge_in_any_example_pack() -> None:
    for name in EXAMPLES:
        pack = example(name)
        for drawing in (
            draw(pack),  # type: ignore[arg-type]
            draw(pack, edge_counts={e.index: e.index % 3 for e in pack.edges}, runs=2),  # type: ignore[attr-defined,arg-type]
            draw(pack, shares=dict.fromkeys(pack.nodes, 0.5), notes=dict.fromkeys(pack.nodes, "1 of 2")),  # type: ignore[attr-defined,arg-type]
        ):
            assert layout_problems(drawing) == [], name
            labelled = [e for e in drawing.edges if e.text]
            assert all(e.box is not None for e in labelled), name


def test_it_lists_numbered_edges_and_every_style_in_the_legend() -> None:
    pack = example("moderation")
    drawing = draw(pack, edge_counts={0: 2}, runs=2)  # type: ignore[arg-type]
    keys = {item.key for item in drawing.legend}
    assert {"next", "on_fail", "on_unsure", "untaken", "thick", "entry"} <= keys
    assert {f"node-{n.kind}" for n in drawing.nodes} <= keys
    listed = {item.edge.index for item in drawing.legend if item.edge is not None}
    assert listed == {e.index for e in drawing.edges if e.number}
    assert all(item.y > max(n.bottom for n in drawing.nodes) for item in drawing.legend)
    assert max(item.y for item in drawing.legend) < drawing.height


def test_it_draws_a_taken_on_fail_edge_unlike_an_untaken_one() -> None:
    pack = example("moderation")
    on_fail = next(e for e in pack.edges if e.kind == "on_fail")  # type: ignore[attr-defined]
    plain = next(e for e in pack.edges if e.kind == "next")  # type: ignore[attr-defined]
    drawing = draw(pack, edge_counts={on_fail.index: 1}, runs=2)  # type: ignore[arg-type]
    taken = next(e for e in drawing.edges if e.index == on_fail.index)
    untaken = next(e for e in drawing.edges if e.index == plain.index)
    assert not taken.untaken and untaken.untaken
    assert taken.dash != untaken.dash and taken.marker != untaken.marker
    root = _svg(drawing)
    ns = "{http://www.w3.org/2000/svg}"
    dashes = {
        g.get("data-edge"): next(p for p in g.iter(f"{ns}path") if p.get("class") == "line").get("stroke-dasharray")
        for g in root.iter(f"{ns}g")
        if "edge" in (g.get("class") or "").split() and g.get("data-edge")
    }
    assert dashes[str(on_fail.index)] == "9 4" and dashes[str(plain.index)] == "2 5"


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
    untaken = [
        g
        for g in root.iter(f"{ns}g")
        if {"edge", "untaken"} <= set((g.get("class") or "").split()) and g.get("data-edge")
    ]
    assert sorted(int(g.get("data-edge", "-1")) for g in untaken) == [1, 5, 6, 7]
    node = next(g for g in root.iter(f"{ns}g") if g.get("data-node") == "classify")
    assert node.get("fill") == heat_colour(1.0) and node.get("class") == "node heat"


def test_it_runs_heat_from_pale_to_dark() -> None:
    assert heat_colour(0.0) == "#f8f9fb"
    assert heat_colour(1.0) == "#911812"
    assert heat_colour(2.0) == heat_colour(1.0)
