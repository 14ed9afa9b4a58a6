"""A multi-label field: `values:` on an array output is its item set. Induction closes
the items' enum with rule `declared` (as `values` closes a scalar field's enum), adds
`uniqueItems` when no gold list repeats an item, and the emitted grammar holds both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compiler import Spec, induce, load_spec, parse_plan
from compiler.emit import emit
from compiler.planners.rules import rules_plan
from runtime import load_pack

ROOT = Path(__file__).resolve().parents[2]
ITEMS = ["price", "bugs", "ui", "performance", "support"]

SPEC = """\
name: tagger
task: Tag one review with the aspects it talks about.
inputs:
  review:
    description: The review.
    type: string
outputs:
  aspects:
    description: The aspects the review talks about, each once.
    type: array
    values: [price, bugs, ui, performance, support, speed]
    compare: set
"""


def _induced(spec: Spec) -> Any:
    return induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs), declared=spec.declared_values())


def _gold(lists: list[list[str]]) -> str:
    return "".join(
        json.dumps({"id": f"c{i}", "input": {"review": f"review {i}"}, "expected": {"aspects": items}}) + "\n"
        for i, items in enumerate(lists)
    )


def _spec(root: Path, lists: list[list[str]], spec: str = SPEC) -> Spec:
    root.mkdir(parents=True)
    (root / "spec.yaml").write_text(spec)
    (root / "gold.jsonl").write_text(_gold(lists))
    return load_spec(root)


def _grammar_of(out: Path, name: str) -> dict[str, Any]:
    found = [
        g["properties"][name]
        for g in (json.loads(p.read_text()) for p in sorted((out / "grammars").glob("*.json")))
        if name in g.get("properties", {})
    ]
    assert found, f"no grammar writes {name}"
    assert all(g == found[0] for g in found)
    return found[0]


def test_it_closes_the_items_enum_to_the_declared_item_set(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "spec", [["bugs"], ["price", "ui"], []])
    field = _induced(spec).fields["aspects"]
    assert field.items is not None
    enum = [c for c in field.items.constraints if c.kind == "enum"]
    assert [(c.field, c.detail, c.evidence) for c in enum] == [
        (
            "aspects[]",
            {"values": [*ITEMS, "speed"], "rule": "declared"},
            {"declared": 6, "seen_in_gold": 3, "violations": 0},
        )
    ]
    assert field.schema() == {
        "type": "array",
        "uniqueItems": True,
        "items": {"type": "string", "enum": [*ITEMS, "speed"]},
    }
    assert "aspects[]: enum ['price', 'bugs', 'ui', 'performance', 'support', 'speed'] (declared in the spec)" in (
        "\n".join(_induced(spec).report())
    )


def test_it_leaves_out_unique_items_when_a_gold_list_repeats_an_item(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "spec", [["bugs", "bugs"], ["price"]])
    schema = _induced(spec).fields["aspects"].schema()
    assert "uniqueItems" not in schema
    assert schema["items"]["enum"] == [*ITEMS, "speed"]


def test_an_untyped_field_with_lists_in_gold_is_closed_the_same_way(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "spec", [["bugs"], ["price", "ui"]], SPEC.replace("    type: array\n", ""))
    assert _induced(spec).fields["aspects"].schema()["items"]["enum"] == [*ITEMS, "speed"]


def test_a_scalar_fields_values_still_close_the_field_itself() -> None:
    induction = induce([({}, {"aspects": ["ui"], "mood": "glad"})], declared={"aspects[]": ["ui"], "mood": ["glad"]})
    assert induction.fields["mood"].schema()["enum"] == ["glad"]
    assert "enum" not in induction.fields["aspects"].schema()
    assert induction.fields["aspects"].schema()["items"]["enum"] == ["ui"]


def test_an_item_set_gold_never_shows_still_closes_the_items() -> None:
    schema = induce([({}, {"aspects": None})], declared={"aspects[]": ["ui", "bugs"]}).fields["aspects"].schema()
    assert schema["items"] == {"enum": ["ui", "bugs"]}
    assert "uniqueItems" not in schema


def test_the_emitted_grammar_holds_the_item_enum(tmp_path: Path) -> None:
    spec = _spec(tmp_path / "spec", [["bugs"], ["price", "ui"], [], ["support", "performance", "bugs"]])
    induction = _induced(spec)
    out = emit(parse_plan(rules_plan(spec, induction, {}), spec), spec, tmp_path / "pack", induction=induction)
    load_pack(out)
    grammar = _grammar_of(out, "aspects")
    assert grammar["type"] == "array"
    assert grammar["items"]["enum"] == [*ITEMS, "speed"]
    assert grammar["uniqueItems"] is True


def test_the_review_aspects_benchmark_spec_emits_its_packs_item_enum(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "benchmarks/specs/review_aspects")
    induction = _induced(spec)
    out = emit(parse_plan(rules_plan(spec, induction, {}), spec), spec, tmp_path / "pack", induction=induction)
    hand = json.loads((ROOT / "benchmarks/packs/review_aspects/grammars/aspects.json").read_text())
    grammar = _grammar_of(load_pack(out).root, "aspects")
    assert grammar["items"]["enum"] == hand["properties"]["aspects"]["items"]["enum"] == ITEMS
    assert grammar["uniqueItems"] is hand["properties"]["aspects"]["uniqueItems"] is True
