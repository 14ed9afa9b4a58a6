"""The recorded plans (specs/<pack>/plans/1.json): hand-made plan documents that mirror
the example packs. Each parses against its spec, emits (with the spec's induction and the
hand pack's own scripted model) to a pack with the hand pack's nodes and edges, and that
pack passes every evalset case the hand pack passes with the same script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compiler import induce, load_spec, parse_plan
from compiler.emit import emit
from runtime import Pack, Tool, evaluate, load_pack, load_tools, open_backend

ROOT = Path(__file__).resolve().parents[2]
# Every example pack with a recorded plan (packs/calculator has none: the planners do not
# emit its choose_tool node).
EXAMPLES = sorted(
    p.name
    for p in (ROOT / "packs").iterdir()
    if (p / "manifest.yaml").is_file() and (ROOT / "specs" / p.name / "plans" / "1.json").is_file()
)


def tools_for(name: str) -> dict[str, Tool] | None:
    return load_tools(f"{ROOT / 'packs' / name / 'tools.py'}:registry") if name == "refund_desk" else None


def emitted(name: str, out: Path) -> Path:
    spec = load_spec(ROOT / "specs" / name)
    plan = parse_plan(json.loads((ROOT / "specs" / name / "plans/1.json").read_text()), spec)
    script = json.loads((ROOT / "packs" / name / "fakes/scripted.json").read_text())
    induction = induce([(c.input, c.expected) for c in spec.gold], list(spec.outputs), declared=spec.declared_values())
    return emit(plan, spec, out, induction=induction, fakes={"scripted.json": script}, model="fake:fakes/scripted.json")


def passed(pack: Pack, tools: dict[str, Tool] | None) -> dict[str, bool]:
    assert pack.model is not None
    backend = open_backend(pack.model, base_dir=pack.root, default=pack.model)
    report = evaluate(pack, backend, tools=tools, concurrency=1)
    return {c.case_id: c.passed for c in report.cases}


def bare(source: str | None) -> str | None:
    return "".join(source.split()) if source is not None else None


def shape(pack: Pack) -> tuple[Any, ...]:
    """What the regenerated pack must share with the hand one: per node its kind, reads,
    writes, agreement, two_stage, tool call, check and end output; the edges in order."""
    nodes = {
        n.id: (
            n.kind,
            tuple(n.reads),
            tuple(n.writes),
            n.samples,
            n.agree,
            n.two_stage,
            n.tool,
            n.args,
            bare(n.check.source if n.check is not None else None),
            n.output,
        )
        for n in pack.nodes.values()
    }
    edges = [(e.source, e.target, e.kind, e.when.source if e.when is not None else None) for e in pack.edges]
    return nodes, edges


def test_it_has_a_recorded_plan_for_every_example_pack() -> None:
    assert sorted(p.parts[-3] for p in ROOT.glob("specs/*/plans/1.json")) == EXAMPLES


@pytest.mark.parametrize("name", EXAMPLES)
def test_it_regenerates_the_example_pack(name: str, tmp_path: Path) -> None:
    tools = tools_for(name)
    names = set(tools) if tools is not None else None
    hand = load_pack(ROOT / "packs" / name, tools=names)
    pack = load_pack(emitted(name, tmp_path / name), tools=names)
    assert shape(pack) == shape(hand)
    hand_passed = passed(hand, tools)
    assert all(hand_passed.values()), "the hand pack passes its own script"
    assert passed(pack, tools) == hand_passed
