"""The graph layout behind the overview's SVG."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from runtime import load_pack
from studio.projects.graph_svg import draw, layers


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
